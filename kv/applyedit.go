package kv

// Applying a version edit to the levels, with the checks that make a bad
// edit corruption rather than a broken tree.

import (
	"fmt"
	"slices"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/internal/base"
)

// applyEdit returns the levels after e. Level 0 is kept oldest first (by file
// number: flushes allocate increasing numbers), other levels by smallest key.
func applyEdit(levels [compaction.NumLevels][]*base.TableMeta, e *versionEdit) ([compaction.NumLevels][]*base.TableMeta, error) {
	var out [compaction.NumLevels][]*base.TableMeta
	del := make(map[uint64]int, len(e.deleted))
	for _, d := range e.deleted {
		del[d.fileNum] = d.level
	}
	for lvl := range levels {
		changed := false
		for _, a := range e.added {
			if a.level == lvl {
				changed = true
			}
		}
		for _, d := range e.deleted {
			if d.level == lvl {
				changed = true
			}
		}
		if !changed {
			out[lvl] = levels[lvl]
			continue
		}
		var ts []*base.TableMeta
		for _, t := range levels[lvl] {
			if l, ok := del[t.FileNum]; ok && l == lvl {
				delete(del, t.FileNum)
				continue
			}
			ts = append(ts, t)
		}
		for _, a := range e.added {
			if a.level == lvl {
				ts = append(ts, a.meta)
			}
		}
		if lvl == 0 {
			slices.SortFunc(ts, func(a, b *base.TableMeta) int { return cmpU64(a.FileNum, b.FileNum) })
		} else {
			slices.SortFunc(ts, func(a, b *base.TableMeta) int {
				return base.CompareInternalKeys(a.Smallest, b.Smallest)
			})
			for i := 1; i < len(ts); i++ {
				if base.CompareInternalKeys(ts[i-1].Largest, ts[i].Smallest) >= 0 {
					return out, fmt.Errorf("%w: tables %d and %d overlap in L%d", ErrCorruption, ts[i-1].FileNum, ts[i].FileNum, lvl)
				}
			}
		}
		out[lvl] = ts
	}
	if len(del) > 0 {
		for fn, l := range del {
			return out, fmt.Errorf("%w: manifest deletes table %d absent from L%d", ErrCorruption, fn, l)
		}
	}
	return out, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

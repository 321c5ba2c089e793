package manifest

// Applying a version edit to the levels, with the checks that make a bad
// edit corruption rather than a broken tree.

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/adaptkv/adaptkv/internal/base"
)

// Apply returns the levels after e. Level 0 is kept oldest first (by file
// number: flushes allocate increasing numbers), other levels by smallest
// key. An edit that deletes a table the level does not hold, or leaves two
// tables of a level below L0 overlapping, is corruption (an error wrapping
// base.ErrCorruption).
func Apply(levels [NumLevels][]*base.TableMeta, e *VersionEdit) ([NumLevels][]*base.TableMeta, error) {
	var out [NumLevels][]*base.TableMeta
	del := make(map[uint64]int, len(e.Deleted))
	for _, d := range e.Deleted {
		del[d.FileNum] = d.Level
	}
	for lvl := range levels {
		changed := false
		for _, a := range e.Added {
			if a.Level == lvl {
				changed = true
			}
		}
		for _, d := range e.Deleted {
			if d.Level == lvl {
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
		for _, a := range e.Added {
			if a.Level == lvl {
				ts = append(ts, a.Meta)
			}
		}
		if lvl == 0 {
			slices.SortFunc(ts, func(a, b *base.TableMeta) int { return cmp.Compare(a.FileNum, b.FileNum) })
		} else {
			slices.SortFunc(ts, func(a, b *base.TableMeta) int {
				return base.CompareInternalKeys(a.Smallest, b.Smallest)
			})
			for i := 1; i < len(ts); i++ {
				if base.CompareInternalKeys(ts[i-1].Largest, ts[i].Smallest) >= 0 {
					return out, fmt.Errorf("%w: tables %d and %d overlap in L%d", base.ErrCorruption, ts[i-1].FileNum, ts[i].FileNum, lvl)
				}
			}
		}
		out[lvl] = ts
	}
	if len(del) > 0 {
		for fn, l := range del {
			return out, fmt.Errorf("%w: manifest deletes table %d absent from L%d", base.ErrCorruption, fn, l)
		}
	}
	return out, nil
}

package manifest

import (
	"bytes"
	"slices"

	"github.com/adaptkv/adaptkv/internal/base"
)

// L0's structure, in the two measures the store uses: sublevels, which
// point reads walk, and depth, which compaction picking scores. Depth is
// the most tables holding one key; the sublevel count can exceed it (a
// table sits above every older table it overlaps, even where those do not
// overlap each other).

// L0Sublevels arranges L0 (oldest first) into sublevels, Pebble's scheme: a
// table's sublevel is one above the highest sublevel of the older tables it
// shares user keys with (0 if none). Tables of one sublevel never share a
// user key (of two that did, the newer would sit above the older), so each
// sublevel is a sorted run; and of the tables holding a key, a newer one is
// always in a higher sublevel, so reading the sublevels from the top visits
// them newest first. Each sublevel is sorted by smallest key.
func L0Sublevels(l0 []*base.TableMeta) [][]*base.TableMeta {
	sub := make([]int, len(l0))
	var out [][]*base.TableMeta
	for i, t := range l0 {
		s := 0
		for j, u := range l0[:i] {
			if sub[j] >= s && bytes.Compare(u.Smallest.UserKey, t.Largest.UserKey) <= 0 &&
				bytes.Compare(t.Smallest.UserKey, u.Largest.UserKey) <= 0 {
				s = sub[j] + 1
			}
		}
		sub[i] = s
		for len(out) <= s {
			out = append(out, nil)
		}
		out[s] = append(out[s], t)
	}
	for _, ts := range out {
		slices.SortFunc(ts, func(a, b *base.TableMeta) int { return bytes.Compare(a.Smallest.UserKey, b.Smallest.UserKey) })
	}
	return out
}

// L0Depth returns L0's read amplification: the largest number of tables of
// l0 not busy (busy nil: none is) whose user key ranges hold one key. A
// point read checks at most that many L0 tables.
func L0Depth(l0 []*base.TableMeta, busy func(fileNum uint64) bool) int {
	var starts, ends [][]byte
	for _, t := range l0 {
		if busy == nil || !busy(t.FileNum) {
			starts = append(starts, t.Smallest.UserKey)
			ends = append(ends, t.Largest.UserKey)
		}
	}
	slices.SortFunc(starts, bytes.Compare)
	slices.SortFunc(ends, bytes.Compare)
	// Sweep the boundaries in key order; ranges are closed, so at equal
	// keys a start counts before an end.
	depth, best, j := 0, 0, 0
	for _, s := range starts {
		for j < len(ends) && bytes.Compare(ends[j], s) < 0 {
			depth--
			j++
		}
		depth++
		best = max(best, depth)
	}
	return best
}

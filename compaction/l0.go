package compaction

import (
	"bytes"
	"slices"

	"github.com/adaptkv/adaptkv/internal/manifest"
)

// l0Score is L0's score: 2 x manifest.L0Depth / L0Trigger (Pebble's L0 fill
// factor, so L0 compacts from depth L0Trigger/2), or the count of tables
// not busy over L0FileThreshold when that is higher.
func l0Score(l0 []*TableMeta, opts Options, busy func(uint64) bool) float64 {
	n := 0
	for _, t := range l0 {
		if !busy(t.FileNum) {
			n++
		}
	}
	return max(2*float64(manifest.L0Depth(l0, busy))/float64(opts.L0Trigger), float64(n)/float64(opts.L0FileThreshold))
}

// pickL0 picks the L0 compaction into base, the base level: every level
// above it is empty (BaseLevel never puts the base below a populated
// level), so moving L0 data past them keeps newer versions above older.
//
// Each L0 table seeds a candidate: the table with every older L0 table that
// overlaps a member, transitively (l0Closure). Compacting those leaves no
// older version of a key above a newer one; newer tables may stay in L0.
// When flushes are split at the base level's boundaries (FlushSplitKeys),
// a candidate is one slice of the key space, so L0 compacts slice by slice
// and a slice can move down while another part of the base level is in a
// compaction of its own (Pebble reaches the same with its L0 sublevels).
// The candidate with the most tables wins (ties: the one with the oldest
// table), among those whose tables, and base-level tables under them, are
// not busy.
func pickL0(levels [NumLevels][]*TableMeta, base int, busy func(uint64) bool, ratio float64, trigger int) *Plan {
	var best []*TableMeta
	var bestOldest uint64
	for _, seed := range levels[0] {
		if busy(seed.FileNum) {
			continue
		}
		cand := l0Closure(levels[0], seed)
		if anyBusy(cand, busy) {
			continue
		}
		oldest := seed.FileNum
		for _, t := range cand {
			oldest = min(oldest, t.FileNum)
		}
		if best == nil || len(cand) > len(best) || (len(cand) == len(best) && oldest < bestOldest) {
			// Check the base level's side before preferring this set.
			lo, hi := keyRange(cand)
			if anyBusy(overlapping(levels[base], lo, hi), busy) {
				continue
			}
			best, bestOldest = cand, oldest
		}
	}
	if best == nil {
		return nil
	}
	if p := pickIntraL0(levels, base, best, busy, ratio, trigger); p != nil {
		return p
	}
	lo, hi := keyRange(best)
	return &Plan{Level: 0, OutputLevel: base, Inputs: inLevelOrder(levels[0], best), Overlapping: overlapping(levels[base], lo, hi)}
}

// pickIntraL0 returns the intra-L0 compaction of cand (an L0 candidate of
// pickL0) when ratio > 0, L0 compactions have fallen behind and it is
// cheap next to compacting into base: cand widened to every L0 table
// overlapping a member, newer or older, transitively (their user key
// ranges union to one interval, so no L0 table outside overlaps the
// output), none busy, deeper than the depth an L0 compaction starts at
// (L0Trigger/2: at that depth the base compaction is the one to run; kvbench
// churn checked more filters a read when L0 was merged there too), and
// less than 1/ratio of the bytes of the base-level tables under them.
func pickIntraL0(levels [NumLevels][]*TableMeta, base int, cand []*TableMeta, busy func(uint64) bool, ratio float64, trigger int) *Plan {
	if ratio <= 0 {
		return nil
	}
	set := widenL0(levels[0], slices.Clone(cand), false)
	if anyBusy(set, busy) || manifest.L0Depth(set, nil) < max(2, trigger/2+1) {
		return nil
	}
	lo, hi := keyRange(set)
	if float64(sumSize(overlapping(levels[base], lo, hi))) <= ratio*float64(sumSize(set)) {
		return nil
	}
	return &Plan{Level: 0, OutputLevel: 0, Inputs: inLevelOrder(levels[0], set)}
}

// l0Closure returns seed and every L0 table older than a member (by file
// number: flushes number their tables in order) that shares user keys with
// it, transitively.
func l0Closure(l0 []*TableMeta, seed *TableMeta) []*TableMeta {
	return widenL0(l0, []*TableMeta{seed}, true)
}

// widenL0 appends to set every L0 table that shares user keys with a
// member, transitively; with olderOnly, only tables older than that member
// (lower file number).
func widenL0(l0, set []*TableMeta, olderOnly bool) []*TableMeta {
	for i := 0; i < len(set); i++ {
		t := set[i]
		for _, u := range l0 {
			if (!olderOnly || u.FileNum < t.FileNum) && overlaps(u, t.Smallest.UserKey, t.Largest.UserKey) && !slices.Contains(set, u) {
				set = append(set, u)
			}
		}
	}
	return set
}

// l0Components groups L0 tables into maximal sets that overlap transitively
// by user key (a sweep over the tables sorted by smallest user key).
func l0Components(l0 []*TableMeta) [][]*TableMeta {
	sorted := slices.Clone(l0)
	slices.SortStableFunc(sorted, func(a, b *TableMeta) int {
		return bytes.Compare(a.Smallest.UserKey, b.Smallest.UserKey)
	})
	var comps [][]*TableMeta
	var hi []byte
	for _, t := range sorted {
		if len(comps) > 0 && bytes.Compare(t.Smallest.UserKey, hi) <= 0 {
			comps[len(comps)-1] = append(comps[len(comps)-1], t)
			if bytes.Compare(t.Largest.UserKey, hi) > 0 {
				hi = t.Largest.UserKey
			}
			continue
		}
		comps = append(comps, []*TableMeta{t})
		hi = t.Largest.UserKey
	}
	return comps
}

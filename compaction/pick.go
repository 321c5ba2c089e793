package compaction

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/adaptkv/adaptkv/internal/base"
)

// BaseLevel returns the level L0 compacts into and the target size of each
// level from it down to L5 (0 for the levels above it and for the last
// level, which has no target). With StaticLevelTargets it is L1 and the
// static targets (LevelTarget). It is Pebble's dynamic base level
// ("dynamic level bytes", facts from Pebble's compaction picker): the
// targets are derived from the data actually in the tree, not from L1 up,
// so a small store has no empty middle levels to pass through and a point
// read checks L0, then one table per populated level.
//
// With no data below L0 the base is the last level. Otherwise the last
// level's share of the data in a steady tree, total - total/ratio, is
// divided by the ratio once per level from the last level up to the first
// populated one; while that exceeds BaseLevelBytes, the base moves one level
// up (and the size is divided again). The base level's target is
// BaseLevelBytes, and each level below it multiplies by the ratio that
// spreads BaseLevelBytes to the last level's share evenly.
func BaseLevel(levels [NumLevels][]*TableMeta, opts Options) (base int, targets [NumLevels]uint64) {
	opts = opts.WithDefaults()
	if opts.StaticLevelTargets {
		for l := 1; l < NumLevels-1; l++ {
			targets[l] = opts.LevelTarget(l)
		}
		return 1, targets
	}
	first, total := 0, uint64(0)
	for l := 1; l < NumLevels; l++ {
		if size := sumSize(levels[l]); size > 0 {
			if first == 0 {
				first = l
			}
			total += size
		}
	}
	if total == 0 {
		return NumLevels - 1, targets
	}
	total += sumSize(levels[0])
	bottom := float64(total) - float64(total)/opts.LevelRatio
	cur := bottom
	for l := NumLevels - 2; l >= first; l-- {
		cur /= opts.LevelRatio
	}
	base = first
	for base > 1 && cur > float64(opts.BaseLevelBytes) {
		base--
		cur /= opts.LevelRatio
	}
	mult := 1.0
	if base < NumLevels-1 {
		mult = math.Pow(bottom/float64(opts.BaseLevelBytes), 1/float64(NumLevels-1-base))
	}
	size := float64(opts.BaseLevelBytes)
	for l := base; l < NumLevels-1; l++ {
		if l > base {
			size *= mult
		}
		targets[l] = uint64(max(1, math.Round(size)))
	}
	return base, targets
}

// Scores returns the compaction score (fill factor) of each level: for L0
// twice its depth (manifest.L0Depth, the tables not busy) over L0Trigger, or its
// count of tables not busy over L0FileThreshold if higher; for the levels
// from the base level (BaseLevel) to L5 the size of the level's tables over
// the level's target size; 0 for the levels above the base level (empty)
// and for the last level, which has no level to compact into. Busy L0
// tables are leaving L0 already and are not counted (Pebble's depth after
// the ongoing compactions); a busy table of a lower level is counted, as
// Pebble counts it: it is still there, and most busy tables of a level are
// the tables a compaction from the level above is rewriting into it, which
// stay in the level with the bytes that compaction brings (counting them
// out once let the base level grow to several times its target under a
// sustained write load: docs/ARCHITECTURE.md, "Compactions").
func Scores(levels [NumLevels][]*TableMeta, opts Options, busy func(fileNum uint64) bool) [NumLevels]float64 {
	s, _ := scores(levels, opts, busy)
	return s
}

// scores is Scores, with the base level it found.
func scores(levels [NumLevels][]*TableMeta, opts Options, busy func(fileNum uint64) bool) ([NumLevels]float64, int) {
	opts = opts.WithDefaults()
	busy = orNotBusy(busy)
	var s [NumLevels]float64
	s[0] = l0Score(levels[0], opts, busy)
	base, targets := BaseLevel(levels, opts)
	for l := base; l < NumLevels-1; l++ {
		s[l] = float64(sumSize(levels[l])) / float64(targets[l])
	}
	return s, base
}

// Priorities returns the order in which Pick tries the levels: 0 for a
// level whose score (Scores) is below 1, else its score divided by the
// score of the level it compacts into (the base level for L0; at least
// 0.01; the last level counts as full, 1). This is Pebble's adjustment:
// a level whose output level is over its own target waits for that level
// to be compacted first, so data does not pile up in the upper levels of
// a tree that cannot keep up (L0 deep and the base level growing without
// bound), and a level over an almost empty one goes first.
func Priorities(levels [NumLevels][]*TableMeta, opts Options, busy func(fileNum uint64) bool) [NumLevels]float64 {
	return priorities(scores(levels, opts, busy))
}

// priorities is Priorities from the levels' scores and the base level.
func priorities(s [NumLevels]float64, base int) [NumLevels]float64 {
	fill := s
	fill[NumLevels-1] = 1
	var p [NumLevels]float64
	for l := 0; l < NumLevels-1; l++ {
		if s[l] < 1 {
			continue
		}
		next := l + 1
		if l == 0 {
			next = base
		}
		p[l] = s[l] / max(0.01, fill[next])
	}
	return p
}

// Pick chooses the next automatic compaction, or returns nil when no level
// needs one (or every candidate is blocked by busy tables).
//
// Levels L1..L6 must each be sorted by Smallest and non-overlapping
// (CheckLevels); L0 may be in any order and its tables may overlap. busy
// reports the tables of running compactions (inputs and overlapping tables
// of every running plan); nil means none. Invalid option values are
// replaced by the defaults (check them once with Options.Validate).
//
// The levels with score >= 1 (Scores) are tried from the highest priority
// (Priorities: the score over the output level's) down, ties to the upper
// level:
//   - L0: each table with the older L0 tables it overlaps, transitively, is
//     a candidate; candidates holding a busy table are skipped; the one with
//     the most tables (ties: the one with the oldest table, lowest FileNum)
//     is compacted with the base-level tables it overlaps (see pickL0), or
//     with Options.IntraL0Ratio merged within L0 when that is much cheaper
//     (pickIntraL0, Plan.IsIntraL0).
//   - Ln, n >= 1: each table not busy is a candidate, widened to its
//     neighbours that share a boundary user key, with the tables of L(n+1)
//     that overlap it (widened the same way). Among the candidates whose
//     tables are all free, the one with the smallest ratio of overlapping
//     bytes to input bytes is picked (Pebble's and RocksDB's "min
//     overlapping ratio", which keeps write amplification low), ties to the
//     smaller key. The choice is stateless: no round-robin pointer.
//
// A plan never takes a busy table, so it never overlaps a running
// compaction at its output level: a running compaction's output lies
// within the range of its tables, and any table of the output level in a
// plan's range is one of its Overlapping tables.
func Pick(levels [NumLevels][]*TableMeta, opts Options, busy func(fileNum uint64) bool) *Plan {
	busy = orNotBusy(busy)
	score, base := scores(levels, opts, busy)
	prio := priorities(score, base)
	order := make([]int, 0, NumLevels)
	for l, p := range prio {
		if p > 0 {
			order = append(order, l)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return prio[order[i]] > prio[order[j]] })
	o := opts.WithDefaults()
	for _, l := range order {
		var p *Plan
		if l == 0 {
			p = pickL0(levels, base, busy, o.IntraL0Ratio, o.L0Trigger)
		} else {
			p = pickLevel(levels, l, busy)
		}
		if p != nil {
			p.Score = score[l]
			return p
		}
	}
	return nil
}

// FlushSplitKeys returns where a flush may cut its output into several L0
// tables: the largest user key of each base-level table but the last
// (BaseLevel), ascending. A flushed table ends at or before one of them, so
// each covers the key range of few base-level tables, and pickL0 can
// compact L0 one such slice at a time. None when the base level is empty.
func FlushSplitKeys(levels [NumLevels][]*TableMeta, opts Options) [][]byte {
	base, _ := BaseLevel(levels, opts)
	ts := levels[base]
	if len(ts) < 2 {
		return nil
	}
	keys := make([][]byte, 0, len(ts)-1)
	for _, t := range ts[:len(ts)-1] {
		keys = append(keys, t.Largest.UserKey)
	}
	return keys
}

func pickLevel(levels [NumLevels][]*TableMeta, level int, busy func(uint64) bool) *Plan {
	tables := levels[level]
	var best *Plan
	bestRatio := math.Inf(1)
	prevA := -1
	for i, t := range tables {
		if busy(t.FileNum) {
			continue
		}
		a, b := expandBoundary(tables, i, i)
		if a == prevA {
			continue // same widened candidate as the previous seed
		}
		prevA = a
		inputs := tables[a : b+1]
		if anyBusy(inputs, busy) {
			continue
		}
		lo, hi := keyRange(inputs)
		over := overlapping(levels[level+1], lo, hi)
		if anyBusy(over, busy) {
			continue
		}
		ratio := float64(sumSize(over)) / float64(max(sumSize(inputs), 1))
		if ratio < bestRatio {
			bestRatio = ratio
			best = &Plan{Level: level, OutputLevel: level + 1, Inputs: inputs, Overlapping: over}
		}
	}
	if best != nil {
		best.Inputs = slices.Clone(best.Inputs)
	}
	return best
}

// PickRange returns the manual compaction of the tables of level whose user
// keys overlap [start, end] (nil bounds are unbounded), or nil when there is
// none or it cannot run now (see TryPickRange for the reason). The inputs
// are widened as in Pick (L0: every table overlapping them transitively;
// Ln: neighbours sharing a boundary user key) and compacted with their
// overlapping tables of level+1; the last level compacts into itself.
// (Plan.SkipEmptyLevels moves the output further down.)
func PickRange(levels [NumLevels][]*TableMeta, level int, start, end []byte, busy func(uint64) bool) *Plan {
	p, _ := TryPickRange(levels, level, start, end, busy)
	return p
}

// TryPickRange is PickRange that tells why there is no plan: (nil, nil) when
// level holds no table in the range, ErrBusy when a needed table is in a
// running compaction (retry after it ends), ErrInvalidLevel for a level
// outside [0, NumLevels), ErrInvalidOptions for start > end.
func TryPickRange(levels [NumLevels][]*TableMeta, level int, start, end []byte, busy func(uint64) bool) (*Plan, error) {
	if level < 0 || level >= NumLevels {
		return nil, fmt.Errorf("%w: %d", ErrInvalidLevel, level)
	}
	if start != nil && end != nil && bytes.Compare(start, end) > 0 {
		return nil, fmt.Errorf("%w: range start %q > end %q", ErrInvalidOptions, start, end)
	}
	busy = orNotBusy(busy)
	p := &Plan{Level: level, OutputLevel: min(level+1, NumLevels-1), Manual: true}
	if level == 0 {
		for _, comp := range l0Components(levels[0]) {
			for _, t := range comp {
				if overlaps(t, start, end) {
					p.Inputs = append(p.Inputs, comp...)
					break
				}
			}
		}
		p.Inputs = inLevelOrder(levels[0], p.Inputs)
	} else {
		p.Inputs = overlapping(levels[level], start, end)
	}
	if len(p.Inputs) == 0 {
		return nil, nil
	}
	if p.OutputLevel != level {
		lo, hi := keyRange(p.Inputs)
		p.Overlapping = overlapping(levels[p.OutputLevel], lo, hi)
	}
	if anyBusy(p.Inputs, busy) || anyBusy(p.Overlapping, busy) {
		return nil, ErrBusy
	}
	return p, nil
}

// CheckLevels verifies the shape Pick relies on: every table has Smallest
// <= Largest, and L1..L6 are sorted by Smallest with no two tables sharing
// an internal key (tables may share a boundary user key). It returns an
// error wrapping ErrInvalidOptions describing the first violation.
func CheckLevels(levels [NumLevels][]*TableMeta) error {
	for l, tables := range levels {
		for i, t := range tables {
			if t == nil {
				return fmt.Errorf("%w: L%d table %d is nil", ErrInvalidOptions, l, i)
			}
			if base.CompareInternalKeys(t.Smallest, t.Largest) > 0 {
				return fmt.Errorf("%w: L%d table %d: smallest key after largest", ErrInvalidOptions, l, t.FileNum)
			}
			if l > 0 && i > 0 && base.CompareInternalKeys(tables[i-1].Largest, t.Smallest) >= 0 {
				return fmt.Errorf("%w: L%d tables %d and %d overlap or are out of order",
					ErrInvalidOptions, l, tables[i-1].FileNum, t.FileNum)
			}
		}
	}
	return nil
}

func orNotBusy(busy func(uint64) bool) func(uint64) bool {
	if busy == nil {
		return func(uint64) bool { return false }
	}
	return busy
}

func anyBusy(tables []*TableMeta, busy func(uint64) bool) bool {
	for _, t := range tables {
		if busy(t.FileNum) {
			return true
		}
	}
	return false
}

func sumSize(tables []*TableMeta) uint64 {
	var s uint64
	for _, t := range tables {
		s += t.LevelSize()
	}
	return s
}

// overlaps reports whether t's user key range meets [lo, hi] (nil bounds
// are unbounded).
func overlaps(t *TableMeta, lo, hi []byte) bool {
	return (lo == nil || bytes.Compare(t.Largest.UserKey, lo) >= 0) &&
		(hi == nil || bytes.Compare(t.Smallest.UserKey, hi) <= 0)
}

// keyRange returns the smallest and largest user keys of tables.
func keyRange(tables []*TableMeta) (lo, hi []byte) {
	for i, t := range tables {
		if i == 0 || bytes.Compare(t.Smallest.UserKey, lo) < 0 {
			lo = t.Smallest.UserKey
		}
		if i == 0 || bytes.Compare(t.Largest.UserKey, hi) > 0 {
			hi = t.Largest.UserKey
		}
	}
	return lo, hi
}

// overlapping returns the tables of a sorted, non-overlapping level whose
// user keys meet [lo, hi], widened to neighbours sharing a boundary user key.
func overlapping(tables []*TableMeta, lo, hi []byte) []*TableMeta {
	a := 0
	if lo != nil {
		a = sort.Search(len(tables), func(i int) bool { return bytes.Compare(tables[i].Largest.UserKey, lo) >= 0 })
	}
	b := a - 1
	for b+1 < len(tables) && overlaps(tables[b+1], lo, hi) {
		b++
	}
	if b < a {
		return nil
	}
	a, b = expandBoundary(tables, a, b)
	return slices.Clone(tables[a : b+1])
}

// expandBoundary widens tables[a..b] of a sorted level so that no user key
// has versions both inside and outside it: adjacent tables whose boundary
// user keys are equal go together.
func expandBoundary(tables []*TableMeta, a, b int) (int, int) {
	for a > 0 && bytes.Equal(tables[a-1].Largest.UserKey, tables[a].Smallest.UserKey) {
		a--
	}
	for b+1 < len(tables) && bytes.Equal(tables[b].Largest.UserKey, tables[b+1].Smallest.UserKey) {
		b++
	}
	return a, b
}

// inLevelOrder returns the tables of set in the order they have in level.
func inLevelOrder(level, set []*TableMeta) []*TableMeta {
	in := make(map[*TableMeta]bool, len(set))
	for _, t := range set {
		in[t] = true
	}
	out := make([]*TableMeta, 0, len(set))
	for _, t := range level {
		if in[t] {
			out = append(out, t)
		}
	}
	return out
}

// Debt estimates the bytes compactions must still rewrite to bring every
// level within its target, the way Pebble estimates compaction debt: once
// L0's score reaches 1 (Scores), its bytes and the base level's (which L0's
// tables, spread over the key space, mostly overlap) are owed, and L0's
// bytes are carried into the base level; from the base level down, a level
// whose bytes (with what is carried into it) exceed its target carries the
// excess down and owes the excess plus the share of the next level it
// overlaps (excess times the next level's size over this level's).
func Debt(levels [NumLevels][]*TableMeta, opts Options) uint64 {
	opts = opts.WithDefaults()
	base, targets := BaseLevel(levels, opts)
	var debt, carried float64
	if l0Score(levels[0], opts, orNotBusy(nil)) >= 1 {
		carried = float64(sumSize(levels[0]))
		debt = carried + float64(sumSize(levels[base]))
	}
	for l := base; l < NumLevels-1; l++ {
		size := float64(sumSize(levels[l])) + carried
		if size <= float64(targets[l]) {
			carried = 0
			continue
		}
		carried = size - float64(targets[l])
		if next := float64(sumSize(levels[l+1])); next > 0 {
			debt += carried * (next/size + 1)
		}
	}
	return uint64(debt)
}

package compaction

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/adaptkv/adaptkv/internal/base"
)

// Defaults of Options (used for zero fields).
const (
	// DefaultL0Trigger is the L0 read amplification at which L0's score is
	// 2: Pebble's L0CompactionThreshold, 4 too. L0 scores
	// 2 x depth / L0Trigger, so compactions start at depth 2 (Scores).
	DefaultL0Trigger = 4
	// DefaultL0FileThresholdPerTrigger times L0Trigger is the default
	// L0FileThreshold: 16 tables with the default trigger.
	DefaultL0FileThresholdPerTrigger = 4
	// DefaultLevelRatio is the size ratio between consecutive levels.
	DefaultLevelRatio = 10
	// DefaultBaseLevelBytes is the target size of L1: 64 MiB, as in Pebble's
	// LBaseMaxBytes and RocksDB's max_bytes_for_level_base. With ratio 10
	// the levels hold 64 MiB, 640 MiB, 6.4 GiB, ... up to 6.4 TiB at L6,
	// which covers an embedded store while keeping L1 small enough that an
	// L0->L1 compaction stays short.
	DefaultBaseLevelBytes = 64 << 20
	// DefaultTargetFileSize is the default size at which Run cuts output
	// tables (Pebble's default for its base level): 2 MiB.
	DefaultTargetFileSize = 2 << 20
)

// Options configure picking. Zero fields take the defaults above.
type Options struct {
	// L0Trigger is the L0 read amplification (L0Depth) at which L0 scores
	// 2, as Pebble's L0CompactionThreshold: L0 scores 2 x depth /
	// L0Trigger, so an L0 compaction starts at depth L0Trigger/2.
	L0Trigger int
	// L0FileThreshold is the number of L0 tables at which L0 scores 1
	// whatever their depth, so that tables that do not overlap (sequential
	// keys) do not pile up in L0 (Pebble's L0CompactionFileThreshold,
	// whose default of 500 suits its L0 sublevel index; a read here scans
	// L0's tables). Default: DefaultL0FileThresholdPerTrigger x L0Trigger.
	L0FileThreshold int
	// LevelRatio is the ratio between the target sizes of L(n+1) and Ln.
	LevelRatio float64
	// BaseLevelBytes is the target size of L1.
	BaseLevelBytes uint64
	// TargetFileSize is the output table size for Run (RunOptions); Pick
	// does not use it.
	TargetFileSize uint64
	// StaticLevelTargets turns the dynamic base level off: L0 compacts
	// into L1 and Ln's target is BaseLevelBytes * LevelRatio^(n-1) (RocksDB
	// without level_compaction_dynamic_level_bytes). Off by default.
	StaticLevelTargets bool
	// IntraL0Ratio turns on intra-L0 compactions: when L0 compactions have
	// fallen behind (the L0 tables an L0 compaction would take are deeper
	// than the depth L0 compactions start at) and those tables hold less
	// than 1/IntraL0Ratio of the bytes of the base-level tables under
	// them, Pick merges them (with every L0 table they overlap,
	// transitively, newer ones too) within L0 (Plan.IsIntraL0): a read
	// then checks one table there, at the cost of rewriting a few small
	// tables rather than the base level under them. 0 (the default): off.
	// The caller must give the output a file number above every L0
	// table's and below every later flush's (L0 is ordered by file
	// number), see Plan.IsIntraL0.
	IntraL0Ratio float64
}

// Validate reports options that cannot be used, wrapping ErrInvalidOptions.
// Zero fields are valid (they take the defaults).
func (o Options) Validate() error {
	if o.L0Trigger < 0 {
		return fmt.Errorf("%w: L0Trigger %d < 0", ErrInvalidOptions, o.L0Trigger)
	}
	if o.L0FileThreshold < 0 {
		return fmt.Errorf("%w: L0FileThreshold %d < 0", ErrInvalidOptions, o.L0FileThreshold)
	}
	if o.LevelRatio != 0 && !(o.LevelRatio >= 1 && o.LevelRatio <= 1000) {
		return fmt.Errorf("%w: LevelRatio %v outside [1, 1000]", ErrInvalidOptions, o.LevelRatio)
	}
	if o.IntraL0Ratio != 0 && !(o.IntraL0Ratio >= 1 && o.IntraL0Ratio <= 1000) {
		return fmt.Errorf("%w: IntraL0Ratio %v outside [1, 1000]", ErrInvalidOptions, o.IntraL0Ratio)
	}
	return nil
}

// WithDefaults returns o with zero (and invalid) fields set to the defaults.
func (o Options) WithDefaults() Options {
	if o.L0Trigger <= 0 {
		o.L0Trigger = DefaultL0Trigger
	}
	if o.L0FileThreshold <= 0 {
		o.L0FileThreshold = DefaultL0FileThresholdPerTrigger * o.L0Trigger
	}
	if !(o.LevelRatio >= 1 && o.LevelRatio <= 1000) {
		o.LevelRatio = DefaultLevelRatio
	}
	if o.BaseLevelBytes == 0 {
		o.BaseLevelBytes = DefaultBaseLevelBytes
	}
	if o.TargetFileSize == 0 {
		o.TargetFileSize = DefaultTargetFileSize
	}
	if !(o.IntraL0Ratio >= 1 && o.IntraL0Ratio <= 1000) {
		o.IntraL0Ratio = 0
	}
	return o
}

// LevelTarget returns the static target size of level (1..NumLevels-1):
// BaseLevelBytes * LevelRatio^(level-1), used with StaticLevelTargets (the
// default targets are dynamic: BaseLevel). Zero fields take the defaults.
func (o Options) LevelTarget(level int) uint64 {
	o = o.WithDefaults()
	t := float64(o.BaseLevelBytes) * math.Pow(o.LevelRatio, float64(level-1))
	if t >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(t)
}

// Plan is a compaction to run: the Inputs of Level are merged with the
// Overlapping tables of OutputLevel and written to OutputLevel.
type Plan struct {
	Level, OutputLevel int
	// Inputs are the tables of Level, in the order of the level's slice.
	Inputs []*TableMeta
	// Overlapping are the tables of OutputLevel (when it differs from Level)
	// whose user key range overlaps the inputs', in key order.
	Overlapping []*TableMeta
	// Manual is set for plans made by PickRange.
	Manual bool
	// Score is the score of Level when Pick chose it (0 for manual plans).
	Score float64
}

// IsIntraL0 reports whether the plan merges L0 tables into L0 (Pick with
// Options.IntraL0Ratio). Its inputs are every L0 table overlapping any of
// them, so no other L0 table shares a user key with the output, and the
// caller writes it as one table (RunOptions.TargetFileSize 0) whose file
// number is taken after every input's and before any flush that was not
// done when the plan was picked: L0 is read newest first by file number,
// and the output's data is newer than its inputs' and older than those
// flushes'.
func (p *Plan) IsIntraL0() bool { return p.Level == 0 && p.OutputLevel == 0 }

// String describes the plan for logs, e.g. "L1->L2 inputs [7 8] overlapping [3]".
func (p *Plan) String() string {
	kind := ""
	if p.Manual {
		kind = " (manual)"
	}
	nums := func(ts []*TableMeta) []uint64 {
		out := make([]uint64, len(ts))
		for i, t := range ts {
			out[i] = t.FileNum
		}
		return out
	}
	return fmt.Sprintf("L%d->L%d%s inputs %v overlapping %v", p.Level, p.OutputLevel, kind, nums(p.Inputs), nums(p.Overlapping))
}

// SkipEmptyLevels moves the output of a plan that compacts into the next
// level down past the levels that hold nothing in the inputs' key range,
// to the first level that does (or the last level), and takes that level's
// overlapping tables: writing the output through each empty level would
// rewrite the same bytes again. Versions stay ordered, since the levels
// passed over have nothing in the range. It reports whether a table it
// would now take is busy (then the plan is unchanged).
func (p *Plan) SkipEmptyLevels(levels [NumLevels][]*TableMeta, busy func(uint64) bool) (blocked bool) {
	if p.OutputLevel == p.Level || p.OutputLevel == NumLevels-1 {
		return false
	}
	lo, hi := keyRange(p.Inputs)
	out := p.OutputLevel
	for out < NumLevels-1 && len(overlapping(levels[out], lo, hi)) == 0 {
		out++
	}
	over := overlapping(levels[out], lo, hi)
	if anyBusy(over, orNotBusy(busy)) {
		return true
	}
	p.OutputLevel, p.Overlapping = out, over
	return false
}

// Tables returns Inputs followed by Overlapping.
func (p *Plan) Tables() []*TableMeta {
	return append(slices.Clip(p.Inputs), p.Overlapping...)
}

// UserKeyRange returns the smallest and largest user keys of the plan's
// tables; the outputs of the plan lie within it.
func (p *Plan) UserKeyRange() (smallest, largest []byte) {
	return keyRange(p.Tables())
}

// Grandparents returns the tables the plan's outputs will next be
// compacted into (RunOptions.Grandparents): those of the first populated
// level below OutputLevel that overlap the plan's key range (the level a
// compaction of the outputs writes to, as SkipEmptyLevels passes the empty
// ones), in key order; nil from the last level.
func (p *Plan) Grandparents(levels [NumLevels][]*TableMeta) []*TableMeta {
	lo, hi := p.UserKeyRange()
	for l := p.OutputLevel + 1; l < NumLevels; l++ {
		if len(levels[l]) > 0 {
			return overlapping(levels[l], lo, hi)
		}
	}
	return nil
}

// IsBottommost reports whether no level below the plan's output level holds
// a table overlapping the plan's user key range, i.e. whether Run may drop
// tombstones (RunOptions.DropTombstones).
func (p *Plan) IsBottommost(levels [NumLevels][]*TableMeta) bool {
	lo, hi := p.UserKeyRange()
	for l := p.OutputLevel + 1; l < NumLevels; l++ {
		for _, t := range levels[l] {
			if overlaps(t, lo, hi) {
				return false
			}
		}
	}
	return true
}

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

// L0Depth returns L0's read amplification: the largest number of tables of
// l0 not busy whose user key ranges hold one key (what Pebble calls the
// number of L0 sublevels). A point read checks at most that many L0 tables.
func L0Depth(l0 []*TableMeta, busy func(fileNum uint64) bool) int {
	busy = orNotBusy(busy)
	var starts, ends [][]byte
	for _, t := range l0 {
		if !busy(t.FileNum) {
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

// l0Score is L0's score: 2 x L0Depth / L0Trigger (Pebble's L0 fill
// factor, so L0 compacts from depth L0Trigger/2), or the count of tables
// not busy over L0FileThreshold when that is higher.
func l0Score(l0 []*TableMeta, opts Options, busy func(uint64) bool) float64 {
	n := 0
	for _, t := range l0 {
		if !busy(t.FileNum) {
			n++
		}
	}
	return max(2*float64(L0Depth(l0, busy))/float64(opts.L0Trigger), float64(n)/float64(opts.L0FileThreshold))
}

// Scores returns the compaction score (fill factor) of each level: for L0
// twice its depth (L0Depth, the tables not busy) over L0Trigger, or its
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
	if anyBusy(set, busy) || L0Depth(set, nil) < max(2, trigger/2+1) {
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
		s += t.Size
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

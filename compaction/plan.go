package compaction

import (
	"bytes"
	"fmt"
	"slices"
)

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

// Parts splits the plan into plans over disjoint user key ranges that can
// run at the same time and together write what p writes (RocksDB's
// subcompactions, cut at table boundaries): the plan's tables are grouped
// where their user key ranges meet (so every version of a user key, and
// every range tombstone with the keys it covers, stays in one group; a
// table's range includes its tombstones'), and consecutive groups are
// joined into parts of at least minBytes of tables, the last part joined
// to the one before when it is smaller. A part keeps the plan's levels,
// Manual and Score, and the tables it takes in their order in p. An
// intra-L0 plan, which writes one table, is never split; nor is a plan
// whose tables do not reach 2*minBytes. The parts are in key order; one
// part is p itself.
func (p *Plan) Parts(minBytes uint64) []*Plan {
	tables := p.Inputs
	if p.OutputLevel != p.Level {
		tables = p.Tables()
	}
	if p.IsIntraL0() || len(tables) < 2 || sumSize(tables) < 2*minBytes {
		return []*Plan{p}
	}
	byStart := slices.Clone(tables)
	slices.SortStableFunc(byStart, func(a, b *TableMeta) int {
		return bytes.Compare(a.Smallest.UserKey, b.Smallest.UserKey)
	})
	// part[t] is the index of the part that takes table t.
	part := make(map[*TableMeta]int, len(tables))
	var sizes []uint64
	var hi []byte // the largest user key of the group so far
	for i, t := range byStart {
		newGroup := i > 0 && bytes.Compare(t.Smallest.UserKey, hi) > 0
		switch {
		case i == 0:
			sizes = append(sizes, 0)
		case newGroup && sizes[len(sizes)-1] >= minBytes:
			sizes = append(sizes, 0)
		}
		if i == 0 || bytes.Compare(t.Largest.UserKey, hi) > 0 {
			hi = t.Largest.UserKey
		}
		part[t] = len(sizes) - 1
		sizes[len(sizes)-1] += t.LevelSize()
	}
	if n := len(sizes); n > 1 && sizes[n-1] < minBytes {
		for t, i := range part {
			if i == n-1 {
				part[t] = n - 2
			}
		}
		sizes = sizes[:n-1]
	}
	if len(sizes) == 1 {
		return []*Plan{p}
	}
	parts := make([]*Plan, len(sizes))
	for i := range parts {
		parts[i] = &Plan{Level: p.Level, OutputLevel: p.OutputLevel, Manual: p.Manual, Score: p.Score}
	}
	for _, t := range p.Inputs {
		q := parts[part[t]]
		q.Inputs = append(q.Inputs, t)
	}
	if p.OutputLevel != p.Level {
		for _, t := range p.Overlapping {
			q := parts[part[t]]
			q.Overlapping = append(q.Overlapping, t)
		}
	}
	return parts
}

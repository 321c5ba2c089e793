package compaction

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/stretchr/testify/require"
)

// tm makes a table over user keys [lo, hi] (seqs 100 and 1).
func tm(fileNum, size uint64, lo, hi string) *TableMeta {
	return &TableMeta{
		FileNum:  fileNum,
		Size:     size,
		Smallest: base.InternalKey{UserKey: []byte(lo), Seq: 100, Kind: base.KeyKindSet},
		Largest:  base.InternalKey{UserKey: []byte(hi), Seq: 1, Kind: base.KeyKindSet},
	}
}

func busySet(nums ...uint64) func(uint64) bool {
	return func(n uint64) bool { return slices.Contains(nums, n) }
}

func fileNums(ts []*TableMeta) []uint64 {
	var out []uint64
	for _, t := range ts {
		out = append(out, t.FileNum)
	}
	return out
}

const mib = 1 << 20

func TestOptions(t *testing.T) {
	d := Options{}.WithDefaults()
	require.Equal(t, Options{L0Trigger: 4, L0FileThreshold: 16, LevelRatio: 10, BaseLevelBytes: 64 * mib, TargetFileSize: 2 * mib}, d)
	require.Equal(t, 40, Options{L0Trigger: 10}.WithDefaults().L0FileThreshold)
	require.NoError(t, Options{}.Validate())
	require.ErrorIs(t, Options{L0Trigger: -1}.Validate(), ErrInvalidOptions)
	require.ErrorIs(t, Options{L0FileThreshold: -1}.Validate(), ErrInvalidOptions)
	require.ErrorIs(t, Options{LevelRatio: 0.5}.Validate(), ErrInvalidOptions)
	require.ErrorIs(t, Options{LevelRatio: 1e9}.Validate(), ErrInvalidOptions)
	require.Equal(t, uint64(64*mib), Options{}.LevelTarget(1))
	require.Equal(t, uint64(640*mib), Options{}.LevelTarget(2))
	require.Equal(t, uint64(6400*mib), Options{}.LevelTarget(3))
	require.Equal(t, uint64(3000), Options{BaseLevelBytes: 1000, LevelRatio: 3}.LevelTarget(2))
}

func TestPickL0Trigger(t *testing.T) {
	var levels [NumLevels][]*TableMeta
	// Depth 1: no key is in two L0 tables.
	levels[0] = []*TableMeta{tm(10, 1, "a", "f"), tm(12, 1, "g", "h")}
	levels[1] = []*TableMeta{tm(1, 5, "a", "b"), tm(2, 5, "c", "h"), tm(3, 5, "x", "z")}
	require.Nil(t, Pick(levels, Options{}, nil), "depth 1 < trigger 4 / 2")
	require.Equal(t, 0.5, Scores(levels, Options{}, nil)[0])

	// Depth 2 (keys e..f are in 10 and 11): L0 scores 2 x 2 / 4.
	levels[0] = []*TableMeta{tm(10, 1, "a", "f"), tm(11, 1, "e", "k"), tm(12, 1, "g", "h"), tm(13, 1, "j", "m")}
	p := Pick(levels, Options{}, nil)
	require.NotNil(t, p)
	require.Equal(t, 0, p.Level)
	require.Equal(t, 1, p.OutputLevel)
	require.False(t, p.Manual)
	require.Equal(t, 1.0, p.Score)
	// 12 with the older tables it overlaps (11, and 10 through 11); 13 is
	// newer than all of them and may stay (a tie with 13's own set, which
	// holds the same oldest table, goes to the first found).
	require.Equal(t, []uint64{10, 11, 12}, fileNums(p.Inputs))
	require.Equal(t, []uint64{1, 2}, fileNums(p.Overlapping))
	lo, hi := p.UserKeyRange()
	require.Equal(t, "a", string(lo))
	require.Equal(t, "k", string(hi))

	require.Equal(t, "L0->L1 inputs [10 11 12] overlapping [1 2]", p.String())
	require.Equal(t, "L3->L4 (manual) inputs [] overlapping []", (&Plan{Level: 3, OutputLevel: 4, Manual: true}).String())

	// A custom trigger: depth 2 < 5 / 2.
	require.Nil(t, Pick(levels, Options{L0Trigger: 5}, nil))
	require.Equal(t, 0.8, Scores(levels, Options{L0Trigger: 5}, nil)[0])
}

func TestPickL0FileThreshold(t *testing.T) {
	// Tables that do not overlap (sequential keys) keep depth 1; their
	// count triggers the compaction instead.
	var levels [NumLevels][]*TableMeta
	for i := 0; i < 15; i++ {
		k := string(rune('a' + i))
		levels[0] = append(levels[0], tm(uint64(100+i), 1, k+"0", k+"9"))
	}
	require.Equal(t, 1, manifest.L0Depth(levels[0], nil))
	require.Nil(t, Pick(levels, Options{}, nil), "15 tables < 4 x 4")
	levels[0] = append(levels[0], tm(200, 1, "z0", "z9"))
	p := Pick(levels, Options{}, nil)
	require.NotNil(t, p)
	require.Equal(t, 1.0, p.Score)
	require.Nil(t, Pick(levels, Options{L0FileThreshold: 17}, nil))
	// Busy tables do not count.
	require.Nil(t, Pick(levels, Options{}, busySet(100)))
}

func TestPickL0Components(t *testing.T) {
	var levels [NumLevels][]*TableMeta
	// Two transitive groups: {20,21,22} over [a,g] (21 bridges 20 and 22),
	// {23,24} over [p,t]; and 25 alone at [x,y].
	levels[0] = []*TableMeta{tm(20, 1, "a", "c"), tm(21, 1, "c", "e"), tm(22, 1, "e", "g"),
		tm(23, 1, "p", "r"), tm(24, 1, "q", "t"), tm(25, 1, "x", "y")}
	levels[1] = []*TableMeta{tm(1, 5, "b", "d"), tm(2, 5, "h", "o"), tm(3, 5, "s", "u"), tm(4, 5, "x", "x")}

	p := Pick(levels, Options{}, nil)
	require.Equal(t, []uint64{20, 21, 22}, fileNums(p.Inputs), "the largest group")
	require.Equal(t, []uint64{1}, fileNums(p.Overlapping))

	// A busy table blocks its whole group (and is not counted in L0's score).
	p = Pick(levels, Options{L0Trigger: 2}, busySet(21))
	require.Equal(t, []uint64{23, 24}, fileNums(p.Inputs))
	require.Equal(t, []uint64{3}, fileNums(p.Overlapping))
	require.Equal(t, 2.0, p.Score, "depth 2 (23, 24) x 2 / 2")

	// A busy L1 table blocks the groups overlapping it; 20, older than the
	// busy 21, may go alone (21 stays above its output).
	p = Pick(levels, Options{L0Trigger: 2}, busySet(21, 3))
	require.Equal(t, []uint64{20}, fileNums(p.Inputs))
	require.Equal(t, []uint64{1}, fileNums(p.Overlapping))
	p = Pick(levels, Options{L0Trigger: 2}, busySet(21, 3, 1))
	require.Equal(t, []uint64{23}, fileNums(p.Inputs), "older than 24, overlapping nothing busy")
	require.Empty(t, p.Overlapping)
	p = Pick(levels, Options{L0Trigger: 2}, busySet(21, 3, 1, 23))
	require.Equal(t, []uint64{25}, fileNums(p.Inputs))
	require.Equal(t, []uint64{4}, fileNums(p.Overlapping))

	// Equal group sizes: the group with the oldest table.
	levels[0] = []*TableMeta{tm(30, 1, "a", "b"), tm(31, 1, "m", "n"), tm(29, 1, "x", "y")}
	p = Pick(levels, Options{L0Trigger: 2}, nil)
	require.Equal(t, []uint64{29}, fileNums(p.Inputs))

	// Everything busy: nothing to do.
	require.Nil(t, Pick(levels, Options{L0Trigger: 1}, busySet(29, 30, 31)))
}

func TestPickSizeScores(t *testing.T) {
	opts := Options{BaseLevelBytes: 100, LevelRatio: 10, StaticLevelTargets: true}
	var levels [NumLevels][]*TableMeta
	levels[1] = []*TableMeta{tm(1, 40, "a", "c"), tm(2, 40, "d", "f"), tm(3, 40, "g", "i")} // 120/100
	levels[2] = []*TableMeta{tm(10, 300, "a", "b"), tm(11, 10, "e", "e"), tm(12, 500, "h", "z")}
	levels[3] = []*TableMeta{tm(20, 1000, "a", "z")}

	s := Scores(levels, opts, nil)
	require.InDelta(t, 1.2, s[1], 1e-9)
	require.InDelta(t, 0.81, s[2], 1e-9)
	require.InDelta(t, 1.0/10, s[3], 1e-9)

	p := Pick(levels, opts, nil)
	require.NotNil(t, p)
	require.Equal(t, 1, p.Level)
	require.Equal(t, 2, p.OutputLevel)
	// Overlap ratios: table 1 -> 300/40, table 2 -> 10/40, table 3 -> 500/40.
	require.Equal(t, []uint64{2}, fileNums(p.Inputs))
	require.Equal(t, []uint64{11}, fileNums(p.Overlapping))

	// Busy: table 2 is skipped, then table 1 (next smallest ratio). A busy
	// table below L0 still counts in its level's score.
	require.InDelta(t, 1.2, Scores(levels, opts, busySet(2))[1], 1e-9)
	p = Pick(levels, opts, busySet(2))
	require.Equal(t, []uint64{1}, fileNums(p.Inputs))
	levels[1] = append(levels[1], tm(4, 40, "j", "k"))
	p = Pick(levels, opts, busySet(2))
	require.Equal(t, []uint64{1}, fileNums(p.Inputs))
	// An overlapping busy table blocks a candidate too.
	p = Pick(levels, opts, busySet(2, 10))
	require.Equal(t, []uint64{3}, fileNums(p.Inputs))
	require.Equal(t, []uint64{12}, fileNums(p.Overlapping))

	// The highest score wins: make L2 score 2.
	levels[2] = append(levels[2][:2:2], tm(12, 1690, "h", "z"))
	p = Pick(levels, opts, nil)
	require.Equal(t, 2, p.Level)
	require.Equal(t, 3, p.OutputLevel)
	require.InDelta(t, 2.0, p.Score, 1e-9)
	// If that level is blocked, the next level with score >= 1 is used.
	p = Pick(levels, opts, busySet(20))
	require.Equal(t, 1, p.Level)

	// The last level is never compacted by size.
	var last [NumLevels][]*TableMeta
	last[NumLevels-1] = []*TableMeta{tm(1, 1<<62, "a", "z")}
	require.Equal(t, 0.0, Scores(last, Options{}, nil)[NumLevels-1])
	require.Nil(t, Pick(last, Options{}, nil))
}

// TestScoresLeaveOutRemoteSections: level sizing counts a table's
// LevelSize, so tables that differ only in a filter remote section give the
// same base level, targets, scores, debt and parts.
func TestScoresLeaveOutRemoteSections(t *testing.T) {
	opts := Options{L0Trigger: 4, BaseLevelBytes: 64 * mib, LevelRatio: 10}
	build := func(remote uint64) [NumLevels][]*TableMeta {
		var levels [NumLevels][]*TableMeta
		for i := range 8 {
			levels[4] = append(levels[4], tm(uint64(10+i), 20*mib, fmt.Sprintf("a%d", i), fmt.Sprintf("a%dz", i)))
		}
		for i := range 60 {
			levels[6] = append(levels[6], tm(uint64(100+i), 60*mib, fmt.Sprintf("a%02d", i), fmt.Sprintf("a%02dz", i)))
		}
		for l := range levels {
			for _, t := range levels[l] {
				t.Size += remote
				t.RemoteSize = remote
			}
		}
		return levels
	}
	static, adaptive := build(0), build(8*mib)
	b0, t0 := BaseLevel(static, opts)
	b1, t1 := BaseLevel(adaptive, opts)
	require.Equal(t, b0, b1)
	require.Equal(t, t0, t1)
	require.Equal(t, Scores(static, opts, nil), Scores(adaptive, opts, nil))
	require.Equal(t, Debt(static, opts), Debt(adaptive, opts))
	require.Equal(t, uint64(20*mib), adaptive[4][0].LevelSize())

	// Counting the files' sizes would have sized the levels differently.
	counted := build(0)
	for l := range counted {
		for _, t := range counted[l] {
			t.Size += 8 * mib
		}
	}
	require.NotEqual(t, Scores(static, opts, nil), Scores(counted, opts, nil))
}

// TestPickPriorities: Pick orders the levels by score over the output
// level's score (Pebble's adjustment), not by score alone.
func TestPickPriorities(t *testing.T) {
	opts := Options{L0Trigger: 4, BaseLevelBytes: 100, LevelRatio: 10, StaticLevelTargets: true}
	l0 := func(depth int) []*TableMeta {
		var ts []*TableMeta
		for i := 0; i < depth; i++ {
			ts = append(ts, tm(uint64(100+i), 10, "a", "z"))
		}
		return ts
	}

	// A tree that is not keeping up: L0 six deep (score 3) over a base
	// level at 2.6 times its target. By score alone L0 would go first and
	// grow L1 further; by priority L1 goes first (2.6/0.5 against 3/2.6).
	var levels [NumLevels][]*TableMeta
	levels[0] = l0(6)
	levels[1] = []*TableMeta{tm(1, 130, "a", "m"), tm(2, 130, "n", "z")}
	levels[2] = []*TableMeta{tm(10, 500, "a", "z")}
	s := Scores(levels, opts, nil)
	require.InDelta(t, 3.0, s[0], 1e-9)
	require.InDelta(t, 2.6, s[1], 1e-9)
	pr := Priorities(levels, opts, nil)
	require.InDelta(t, 3.0/2.6, pr[0], 1e-9)
	require.InDelta(t, 2.6/0.5, pr[1], 1e-9)
	require.Zero(t, pr[2], "score below 1")
	p := Pick(levels, opts, nil)
	require.Equal(t, 1, p.Level)
	require.InDelta(t, 2.6, p.Score, 1e-9, "Plan.Score stays the level's score")
	// With L1's tables busy (its compaction running) L0 may not go
	// either (it would write into them); with L2 busy only L0 can go.
	require.Nil(t, Pick(levels, opts, busySet(1, 2)))
	p = Pick(levels, opts, busySet(10))
	require.Equal(t, 0, p.Level)

	// L0 just at its trigger (score 1) over a nearly empty L1 goes before
	// a fuller L2 whose own output level is nearly full: 1/0.2 against
	// 1.5/0.9.
	levels[0] = l0(2)
	levels[1] = []*TableMeta{tm(1, 20, "a", "m")}
	levels[2] = []*TableMeta{tm(10, 1500, "a", "z")}
	levels[3] = []*TableMeta{tm(20, 9000, "a", "z")}
	pr = Priorities(levels, opts, nil)
	require.InDelta(t, 5.0, pr[0], 1e-9)
	require.InDelta(t, 1.5/0.9, pr[2], 1e-9)
	p = Pick(levels, opts, nil)
	require.Equal(t, 0, p.Level)
	require.Equal(t, 1, p.OutputLevel)

	// An empty output level counts as 0.01 full.
	levels[3] = nil
	require.InDelta(t, 150.0, Priorities(levels, opts, nil)[2], 1e-9)
}

// TestPickIntraL0: with IntraL0Ratio, L0 tables deeper than the depth L0
// compactions start at, and much smaller than the base-level tables under
// them, are merged within L0, with every L0 table they overlap, newer ones
// included.
func TestPickIntraL0(t *testing.T) {
	opts := Options{L0Trigger: 4, BaseLevelBytes: 1 << 20, LevelRatio: 10, StaticLevelTargets: true, IntraL0Ratio: 4}
	var levels [NumLevels][]*TableMeta
	// 10, 11 and 14 share e..f (depth 3); 12, newer than 10, overlaps
	// only 10; 13 lies apart.
	levels[0] = []*TableMeta{tm(10, 10, "a", "f"), tm(11, 10, "e", "g"), tm(12, 10, "b", "c"), tm(13, 10, "x", "z"), tm(14, 10, "e", "f")}
	levels[1] = []*TableMeta{tm(1, 1000, "a", "m"), tm(2, 1000, "n", "z")}

	p := Pick(levels, opts, nil)
	require.True(t, p.IsIntraL0())
	require.Equal(t, 0, p.OutputLevel)
	require.Equal(t, []uint64{10, 11, 12, 14}, fileNums(p.Inputs), "12 joins: it overlaps 10")
	require.Empty(t, p.Overlapping)

	// Off: into the base level (the newest table with the older ones it
	// overlaps).
	off := opts
	off.IntraL0Ratio = 0
	p = Pick(levels, off, nil)
	require.False(t, p.IsIntraL0())
	require.Equal(t, []uint64{10, 11, 14}, fileNums(p.Inputs))
	require.Equal(t, []uint64{1}, fileNums(p.Overlapping))
	// The base level under them too small (120 <= 4 x 40).
	levels[1][0] = tm(1, 120, "a", "m")
	p = Pick(levels, opts, nil)
	require.False(t, p.IsIntraL0())
	require.Equal(t, 1, p.OutputLevel)
	levels[1][0] = tm(1, 1000, "a", "m")
	// Only two deep, the depth L0 compactions start at: into the base
	// level.
	two := slices.Clone(levels[0][:4])
	p = Pick([NumLevels][]*TableMeta{two, levels[1]}, opts, nil)
	require.False(t, p.IsIntraL0())
	require.Equal(t, []uint64{10, 11}, fileNums(p.Inputs))
	// A busy table among them (12, in a compaction of its own): not
	// merged in L0; the base compaction may still run.
	p = Pick(levels, opts, busySet(12))
	require.False(t, p.IsIntraL0())
	require.Equal(t, []uint64{10, 11, 14}, fileNums(p.Inputs))

	require.ErrorIs(t, Options{IntraL0Ratio: 0.5}.Validate(), ErrInvalidOptions)
	require.NoError(t, Options{IntraL0Ratio: 4}.Validate())
	require.Zero(t, Options{IntraL0Ratio: -1}.WithDefaults().IntraL0Ratio)
}

func TestPickBoundaryExpansion(t *testing.T) {
	opts := Options{BaseLevelBytes: 10, LevelRatio: 1000, StaticLevelTargets: true}
	k := func(fileNum, size uint64, lo string, loSeq uint64, hi string, hiSeq uint64) *TableMeta {
		return &TableMeta{FileNum: fileNum, Size: size,
			Smallest: base.InternalKey{UserKey: []byte(lo), Seq: loSeq, Kind: base.KeyKindSet},
			Largest:  base.InternalKey{UserKey: []byte(hi), Seq: hiSeq, Kind: base.KeyKindSet}}
	}
	var levels [NumLevels][]*TableMeta
	// L1: 2 and 3 share user key "f" (versions #9 in 2, #5 in 3); 3 and 4
	// share "k". Table 3 is the cheapest seed but must take 2 and 4 along.
	levels[1] = []*TableMeta{k(1, 10, "a", 9, "b", 9), k(2, 10, "c", 9, "f", 9), k(3, 100, "f", 5, "k", 9), k(4, 10, "k", 3, "m", 9), k(5, 10, "x", 9, "y", 9)}
	// L2: 12 overlaps [c, m] and shares "p" with 13, which must go too.
	levels[2] = []*TableMeta{k(11, 1000, "a", 1, "b", 1), k(12, 1, "m", 1, "p", 2), k(13, 1, "p", 1, "q", 1), k(14, 1000, "x", 1, "z", 1)}
	require.NoError(t, CheckLevels(levels))

	p := Pick(levels, opts, nil)
	require.Equal(t, []uint64{2, 3, 4}, fileNums(p.Inputs))
	require.Equal(t, []uint64{12, 13}, fileNums(p.Overlapping))

	// If a table of the widened set is busy, the set cannot be picked.
	p = Pick(levels, opts, busySet(4))
	require.NotNil(t, p)
	require.NotContains(t, fileNums(p.Inputs), uint64(3))
	require.NotContains(t, fileNums(p.Inputs), uint64(2))
	p = Pick(levels, opts, busySet(13))
	require.NotContains(t, fileNums(p.Inputs), uint64(3))

	// Manual ranges widen the same way.
	p = PickRange(levels, 1, []byte("g"), []byte("h"), nil)
	require.Equal(t, []uint64{2, 3, 4}, fileNums(p.Inputs))
	require.Equal(t, []uint64{12, 13}, fileNums(p.Overlapping))
}

func TestPickRange(t *testing.T) {
	var levels [NumLevels][]*TableMeta
	levels[0] = []*TableMeta{tm(30, 1, "a", "c"), tm(31, 1, "c", "e"), tm(32, 1, "m", "n")}
	levels[1] = []*TableMeta{tm(1, 1, "b", "d"), tm(2, 1, "f", "g"), tm(3, 1, "l", "o")}
	levels[3] = []*TableMeta{tm(10, 1, "a", "c"), tm(11, 1, "d", "f"), tm(12, 1, "g", "i")}
	levels[4] = []*TableMeta{tm(20, 1, "c", "d"), tm(21, 1, "h", "z")}
	levels[6] = []*TableMeta{tm(40, 1, "a", "k"), tm(41, 1, "l", "z")}

	// L0: a range touching table 30 takes 31 too (they overlap), and the L1
	// tables overlapping [a, e].
	p := PickRange(levels, 0, []byte("a"), []byte("a"), nil)
	require.True(t, p.Manual)
	require.Equal(t, 0, p.Level)
	require.Equal(t, 1, p.OutputLevel)
	require.Equal(t, []uint64{30, 31}, fileNums(p.Inputs))
	require.Equal(t, []uint64{1}, fileNums(p.Overlapping))

	p = PickRange(levels, 0, nil, nil, nil)
	require.Equal(t, []uint64{30, 31, 32}, fileNums(p.Inputs))
	require.Equal(t, []uint64{1, 2, 3}, fileNums(p.Overlapping))

	// L3 -> L4.
	p = PickRange(levels, 3, []byte("e"), []byte("g"), nil)
	require.Equal(t, 4, p.OutputLevel)
	require.Equal(t, []uint64{11, 12}, fileNums(p.Inputs))
	require.Equal(t, []uint64{20, 21}, fileNums(p.Overlapping))
	p = PickRange(levels, 3, nil, []byte("b"), nil)
	require.Equal(t, []uint64{10}, fileNums(p.Inputs))
	require.Equal(t, []uint64{20}, fileNums(p.Overlapping))
	p = PickRange(levels, 3, []byte("h"), nil, nil)
	require.Equal(t, []uint64{12}, fileNums(p.Inputs))
	require.Equal(t, []uint64{21}, fileNums(p.Overlapping))
	// Bounds are inclusive.
	p = PickRange(levels, 3, []byte("f"), []byte("f"), nil)
	require.Equal(t, []uint64{11}, fileNums(p.Inputs))

	// The last level compacts into itself.
	p = PickRange(levels, 6, []byte("k"), []byte("k"), nil)
	require.Equal(t, 6, p.Level)
	require.Equal(t, 6, p.OutputLevel)
	require.Equal(t, []uint64{40}, fileNums(p.Inputs))
	require.Empty(t, p.Overlapping)
	require.True(t, p.IsBottommost(levels))

	// Nothing in range; empty level.
	p, err := TryPickRange(levels, 3, []byte("j"), []byte("k"), nil)
	require.NoError(t, err)
	require.Nil(t, p)
	require.Nil(t, PickRange(levels, 2, nil, nil, nil))

	// Busy tables at either level.
	p, err = TryPickRange(levels, 3, []byte("e"), []byte("g"), busySet(21))
	require.ErrorIs(t, err, ErrBusy)
	require.Nil(t, p)
	require.Nil(t, PickRange(levels, 3, []byte("e"), []byte("g"), busySet(12)))
	require.NotNil(t, PickRange(levels, 3, []byte("e"), []byte("g"), busySet(10, 40)))

	// Bad arguments.
	_, err = TryPickRange(levels, -1, nil, nil, nil)
	require.ErrorIs(t, err, ErrInvalidLevel)
	_, err = TryPickRange(levels, NumLevels, nil, nil, nil)
	require.ErrorIs(t, err, ErrInvalidLevel)
	_, err = TryPickRange(levels, 3, []byte("z"), []byte("a"), nil)
	require.ErrorIs(t, err, ErrInvalidOptions)
}

func TestIsBottommost(t *testing.T) {
	var levels [NumLevels][]*TableMeta
	levels[1] = []*TableMeta{tm(1, 1, "c", "f")}
	levels[2] = []*TableMeta{tm(2, 1, "a", "b")}
	levels[5] = []*TableMeta{tm(3, 1, "g", "h")}
	p := PickRange(levels, 1, nil, nil, nil)
	require.True(t, p.IsBottommost(levels), "nothing below L2 overlaps [a, f]")
	levels[4] = []*TableMeta{tm(4, 1, "f", "g")}
	require.False(t, p.IsBottommost(levels))
}

func TestCheckLevels(t *testing.T) {
	var levels [NumLevels][]*TableMeta
	levels[0] = []*TableMeta{tm(1, 1, "a", "z"), tm(2, 1, "b", "c")} // L0 may overlap
	levels[1] = []*TableMeta{tm(3, 1, "a", "c"), tm(4, 1, "d", "e")}
	require.NoError(t, CheckLevels(levels))
	shared3, shared4 := tm(3, 1, "a", "d"), tm(4, 1, "d", "e")
	shared3.Largest.Seq, shared4.Smallest.Seq = 50, 10 // "d"#50 then "d"#10
	levels[1] = []*TableMeta{shared3, shared4}
	require.NoError(t, CheckLevels(levels), "a shared boundary user key with distinct versions is allowed")
	levels[1] = []*TableMeta{tm(4, 1, "d", "e"), tm(3, 1, "a", "c")}
	require.ErrorIs(t, CheckLevels(levels), ErrInvalidOptions)
	levels[1] = []*TableMeta{tm(3, 1, "a", "e"), tm(4, 1, "d", "f")}
	require.ErrorIs(t, CheckLevels(levels), ErrInvalidOptions)
	levels[1] = []*TableMeta{tm(3, 1, "z", "a")}
	require.ErrorIs(t, CheckLevels(levels), ErrInvalidOptions)
	levels[1] = []*TableMeta{nil}
	require.ErrorIs(t, CheckLevels(levels), ErrInvalidOptions)
}

// randLevels builds a random valid LSM shape: random L0 tables, and sorted
// levels whose adjacent tables sometimes share a boundary user key.
func randLevels(rng *rand.Rand) [NumLevels][]*TableMeta {
	var levels [NumLevels][]*TableMeta
	fileNum := uint64(1)
	key := func(i int) string { return fmt.Sprintf("k%03d", i) }
	for i := rng.Intn(8); i > 0; i-- {
		a := rng.Intn(100)
		b := a + rng.Intn(20)
		levels[0] = append(levels[0], tm(fileNum, uint64(1+rng.Intn(100)), key(a), key(b)))
		fileNum++
	}
	for l := 1; l < NumLevels; l++ {
		pos := rng.Intn(10)
		seq := uint64(1 << 20)
		for pos < 120 && rng.Intn(12) != 0 {
			lo := pos
			hi := lo + rng.Intn(8)
			t := tm(fileNum, uint64(1+rng.Intn(1<<uint(l+6))), key(lo), key(hi))
			fileNum++
			// Decreasing seqs along the level keep a shared boundary user
			// key in internal-key order across the two tables.
			t.Smallest.Seq, t.Largest.Seq = seq, seq-1
			seq -= 2
			levels[l] = append(levels[l], t)
			if rng.Intn(3) == 0 {
				pos = hi // next table shares the boundary user key
			} else {
				pos = hi + 1 + rng.Intn(10)
			}
		}
	}
	return levels
}

func TestPickRandomInvariants(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	rounds := 3000
	if testing.Short() {
		rounds = 500
	}
	picked, intra := 0, 0
	// Intra-L0 plans are rare among random shapes (none in some 500-round
	// runs): play on, up to 10x the rounds, until one has been seen.
	for round := 0; round < rounds || (intra == 0 && round < 10*rounds); round++ {
		levels := randLevels(rng)
		require.NoError(t, CheckLevels(levels))
		var busyNums []uint64
		for l := range levels {
			for _, tb := range levels[l] {
				if rng.Intn(8) == 0 {
					busyNums = append(busyNums, tb.FileNum)
				}
			}
		}
		busy := busySet(busyNums...)
		opts := Options{L0Trigger: 1 + rng.Intn(5), BaseLevelBytes: uint64(50 + rng.Intn(300)), LevelRatio: float64(2 + rng.Intn(4))}
		if rng.Intn(2) == 0 {
			opts.IntraL0Ratio = float64(1 + rng.Intn(4))
			for _, tb := range levels[0] {
				tb.Size = 1 + uint64(rng.Intn(10)) // small flushes over a large base level
			}
		}
		msg := fmt.Sprintf("seed %d round %d", seed, round)
		scores := Scores(levels, opts, busy)
		prio := Priorities(levels, opts, busy)

		p := Pick(levels, opts, busy)
		base, _ := BaseLevel(levels, opts)
		feasible := bruteFeasible(levels, busy, base)
		bestPrio := 0.0
		for l := 0; l < NumLevels-1; l++ {
			if scores[l] >= 1 && feasible[l] != nil {
				require.Positive(t, prio[l], msg)
				bestPrio = max(bestPrio, prio[l])
			}
		}
		if p == nil {
			require.Zero(t, bestPrio, "%s: Pick returned nil but a level needs and allows a compaction", msg)
			continue
		}
		picked++
		require.Equal(t, bestPrio, prio[p.Level], msg)
		require.Equal(t, scores[p.Level], p.Score, msg)
		checkPlan(t, levels, p, busy, msg)
		if p.IsIntraL0() {
			intra++
			require.NotZero(t, opts.IntraL0Ratio, msg)
			under := sumSize(bruteOverlap(levels[base], p.Inputs))
			require.Greater(t, float64(under), opts.IntraL0Ratio*float64(sumSize(p.Inputs)), msg)
			require.GreaterOrEqual(t, manifest.L0Depth(p.Inputs, nil), max(2, opts.L0Trigger/2+1), msg)
		}
		if p.Level > 0 {
			// Minimal overlap ratio among the feasible candidates.
			ratio := float64(sumSize(p.Overlapping)) / float64(sumSize(p.Inputs))
			require.InDelta(t, feasible[p.Level][0], ratio, 1e-12, msg)
		}

		// A random manual range.
		level := rng.Intn(NumLevels)
		var start, end []byte
		if rng.Intn(3) > 0 {
			start = []byte(fmt.Sprintf("k%03d", rng.Intn(130)))
		}
		if rng.Intn(3) > 0 {
			end = []byte(fmt.Sprintf("k%03d", rng.Intn(130)))
		}
		if start != nil && end != nil && bytes.Compare(start, end) > 0 {
			start, end = end, start
		}
		mp, err := TryPickRange(levels, level, start, end, busy)
		inRange := 0
		for _, tb := range levels[level] {
			if overlaps(tb, start, end) {
				inRange++
			}
		}
		switch {
		case inRange == 0:
			require.NoError(t, err, msg)
			require.Nil(t, mp, msg)
		case err != nil:
			require.ErrorIs(t, err, ErrBusy, msg)
		default:
			require.True(t, mp.Manual, msg)
			require.Equal(t, min(level+1, NumLevels-1), mp.OutputLevel, msg)
			for _, tb := range levels[level] {
				if overlaps(tb, start, end) {
					require.Contains(t, mp.Inputs, tb, msg)
				}
			}
			checkPlan(t, levels, mp, busy, msg)
		}
	}
	require.Greater(t, picked, rounds/10, "the random shapes must lead to plans")
	require.Positive(t, intra, "some shapes must lead to intra-L0 plans")
}

// checkPlan verifies the shape of any plan: nothing busy, inputs closed
// under the L0 overlap / boundary-user-key rules, Overlapping exactly the
// output level's tables meeting the inputs' range plus boundary neighbours.
func checkPlan(t *testing.T, levels [NumLevels][]*TableMeta, p *Plan, busy func(uint64) bool, msg string) {
	require.NotEmpty(t, p.Inputs, msg)
	for _, tb := range p.Tables() {
		require.False(t, busy(tb.FileNum), "%s: busy table %d in plan", msg, tb.FileNum)
	}
	in := func(set []*TableMeta, tb *TableMeta) bool { return slices.Contains(set, tb) }
	sharesUserKey := func(a, b *TableMeta) bool {
		return overlaps(a, b.Smallest.UserKey, b.Largest.UserKey)
	}
	if p.IsIntraL0() {
		require.GreaterOrEqual(t, len(p.Inputs), 2, msg)
	}
	for _, tb := range levels[p.Level] {
		if in(p.Inputs, tb) {
			continue
		}
		for _, x := range p.Inputs {
			if p.Level == 0 && tb.FileNum > x.FileNum && !p.IsIntraL0() {
				continue // a newer L0 table may stay above a base compaction's output
			}
			require.False(t, sharesUserKey(tb, x), "%s: L%d table %d shares user keys with input %d", msg, p.Level, tb.FileNum, x.FileNum)
		}
	}
	if p.OutputLevel == p.Level {
		require.Empty(t, p.Overlapping, msg)
		return
	}
	// Inputs of a sorted level are a contiguous run.
	if p.Level > 0 {
		i := slices.Index(levels[p.Level], p.Inputs[0])
		require.Equal(t, p.Inputs, levels[p.Level][i:i+len(p.Inputs)], msg)
	}
	want := bruteOverlap(levels[p.OutputLevel], p.Inputs)
	require.ElementsMatch(t, want, p.Overlapping, msg)
}

// closure widens set with the tables of level that share user keys with a
// member, transitively (brute force).
func closure(level, set []*TableMeta) []*TableMeta {
	return closureBy(level, set, func(tb, member *TableMeta) bool { return true })
}

// olderClosure widens {seed} with the L0 tables older than a member that
// share user keys with it, transitively (brute force).
func olderClosure(l0 []*TableMeta, seed *TableMeta) []*TableMeta {
	return closureBy(l0, []*TableMeta{seed}, func(tb, member *TableMeta) bool { return tb.FileNum < member.FileNum })
}

// closureBy widens set with the tables of level that share user keys with a
// member for which also joins(table, member) holds, transitively.
func closureBy(level, set []*TableMeta, joins func(tb, member *TableMeta) bool) []*TableMeta {
	set = slices.Clone(set)
	for changed := true; changed; {
		changed = false
		for _, tb := range level {
			if slices.Contains(set, tb) {
				continue
			}
			for _, s := range set {
				if joins(tb, s) && overlaps(tb, s.Smallest.UserKey, s.Largest.UserKey) {
					set = append(set, tb)
					changed = true
					break
				}
			}
		}
	}
	return set
}

// bruteOverlap returns the tables of level meeting the user key range of
// set, closed under shared user keys.
func bruteOverlap(level, set []*TableMeta) []*TableMeta {
	lo, hi := keyRange(set)
	var over []*TableMeta
	for _, tb := range level {
		if overlaps(tb, lo, hi) {
			over = append(over, tb)
		}
	}
	return closure(level, over)
}

// bruteFeasible returns, per level, nil if no compaction can start there
// (all candidates blocked by busy tables), else a one-element slice with
// the best overlap ratio (levels >= 1) found by brute force.
func bruteFeasible(levels [NumLevels][]*TableMeta, busy func(uint64) bool, base int) [NumLevels][]float64 {
	var out [NumLevels][]float64
	for l := 0; l < NumLevels-1; l++ {
		next := l + 1
		if l == 0 {
			next = base // L0 compacts into the base level
		}
		for _, seed := range levels[l] {
			set := closure(levels[l], []*TableMeta{seed})
			if l == 0 {
				set = olderClosure(levels[0], seed)
			}
			over := bruteOverlap(levels[next], set)
			if anyBusy(set, busy) || anyBusy(over, busy) {
				continue
			}
			r := float64(sumSize(over)) / float64(sumSize(set))
			if out[l] == nil || r < out[l][0] {
				out[l] = []float64{r}
			}
		}
	}
	return out
}

// TestPickConcurrentPlansDisjoint simulates a scheduler that starts plans
// while others run (their tables busy) and checks that no two running plans
// touch overlapping key ranges of a level they share: the inputs' range at
// Level, the whole plan's range at OutputLevel, where its output lands.
func TestPickConcurrentPlansDisjoint(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	rounds := 2000
	if testing.Short() {
		rounds = 400
	}
	type span struct{ lo, hi []byte }
	touched := func(p *Plan) map[int]span {
		m := map[int]span{}
		lo, hi := keyRange(p.Inputs)
		m[p.Level] = span{lo, hi}
		lo, hi = p.UserKeyRange()
		m[p.OutputLevel] = span{lo, hi}
		return m
	}
	concurrent := 0
	for round := 0; round < rounds; round++ {
		levels := randLevels(rng)
		opts := Options{L0Trigger: 1, BaseLevelBytes: 1, LevelRatio: 2}
		if rng.Intn(2) == 0 {
			opts.IntraL0Ratio = float64(1 + rng.Intn(4))
		}
		var running []*Plan
		busyNums := map[uint64]bool{}
		busy := func(n uint64) bool { return busyNums[n] }
		for attempt := 0; attempt < 8; attempt++ {
			var p *Plan
			if rng.Intn(3) == 0 {
				a := []byte(fmt.Sprintf("k%03d", rng.Intn(130)))
				p = PickRange(levels, rng.Intn(NumLevels), a, append(a, 'z'), busy)
			} else {
				p = Pick(levels, opts, busy)
			}
			if p == nil {
				continue
			}
			msg := fmt.Sprintf("seed %d round %d plan %d", seed, round, len(running))
			for _, q := range running {
				tq := touched(q)
				for l, sp := range touched(p) {
					if sq, ok := tq[l]; ok {
						disjoint := bytes.Compare(sp.hi, sq.lo) < 0 || bytes.Compare(sq.hi, sp.lo) < 0
						require.True(t, disjoint, "%s: L%d range [%s,%s] meets a running plan's [%s,%s]",
							msg, l, sp.lo, sp.hi, sq.lo, sq.hi)
					}
				}
			}
			for _, tb := range p.Tables() {
				busyNums[tb.FileNum] = true
			}
			running = append(running, p)
		}
		if len(running) > 1 {
			concurrent++
		}
	}
	require.Greater(t, concurrent, rounds/4, "the simulation must run plans side by side")
}

// TestBaseLevel: the dynamic base level follows the data (Pebble's dynamic
// level bytes): an empty tree and a small one compact L0 straight into the
// last level; a larger last level moves the base up, with targets growing
// evenly from BaseLevelBytes to the last level's share.
func TestBaseLevel(t *testing.T) {
	const mib = 1 << 20
	var levels [NumLevels][]*TableMeta
	base, targets := BaseLevel(levels, Options{})
	require.Equal(t, NumLevels-1, base, "empty tree")
	require.Equal(t, [NumLevels]uint64{}, targets)

	levels[NumLevels-1] = []*TableMeta{tm(1, 50*mib, "a", "z")}
	base, _ = BaseLevel(levels, Options{})
	require.Equal(t, NumLevels-1, base, "50 MiB fits the base level's 64 MiB")

	levels[NumLevels-1] = []*TableMeta{tm(1, 10<<30, "a", "z")}
	base, targets = BaseLevel(levels, Options{})
	// Last level's share 9 GiB: /10 per level up while above 64 MiB:
	// 900 MiB at L5, 90 MiB at L4, 9 MiB at L3.
	require.Equal(t, 3, base)
	require.Equal(t, uint64(64*mib), targets[3])
	mult := math.Pow(9*1024.0/64, 1.0/3)
	require.InEpsilon(t, 64*mib*mult, float64(targets[4]), 1e-6)
	require.InEpsilon(t, 64*mib*mult*mult, float64(targets[5]), 1e-6)
	require.Zero(t, targets[2])
	require.Zero(t, targets[NumLevels-1])

	// A populated upper level caps the base there.
	levels[2] = []*TableMeta{tm(2, mib, "a", "b")}
	base, _ = BaseLevel(levels, Options{})
	require.Equal(t, 2, base)

	// L0 compacts into the base level, with the base level's overlaps.
	var small [NumLevels][]*TableMeta
	small[NumLevels-1] = []*TableMeta{tm(1, 10*mib, "a", "f"), tm(2, 10*mib, "g", "m"), tm(3, 10*mib, "n", "z")}
	small[0] = []*TableMeta{tm(10, mib, "b", "h"), tm(11, mib, "c", "d"), tm(12, mib, "e", "i"), tm(13, mib, "b", "c")}
	p := Pick(small, Options{}, nil)
	require.NotNil(t, p)
	require.Equal(t, 0, p.Level)
	require.Equal(t, NumLevels-1, p.OutputLevel)
	require.Equal(t, []uint64{1, 2}, fileNums(p.Overlapping))
	// Static targets keep L1 as the base.
	p = Pick(small, Options{StaticLevelTargets: true}, nil)
	require.Equal(t, 1, p.OutputLevel)
}

// TestDebt: no debt while every level is within its target; L0 at its
// trigger owes its bytes and the base level's; an oversized level owes its
// excess and the share of the next level it overlaps, carried down.
func TestDebt(t *testing.T) {
	const mib = 1 << 20
	var levels [NumLevels][]*TableMeta
	require.Zero(t, Debt(levels, Options{}))
	levels[NumLevels-1] = []*TableMeta{tm(1, 50*mib, "a", "z")}
	levels[0] = []*TableMeta{tm(10, mib, "a", "z")}
	require.Zero(t, Debt(levels, Options{}), "one L0 table, small last level")
	for i := uint64(11); i < 14; i++ {
		levels[0] = append(levels[0], tm(i, mib, "a", "z"))
	}
	// Base is L6 (50 MiB is within BaseLevelBytes): L0's 4 MiB and L6's 50.
	require.Equal(t, uint64(54*mib), Debt(levels, Options{}))

	// Static targets: L1 64 MiB holding 100: 36 MiB excess, and L2 holds
	// 720 MiB against its 640: the excess carried (36+80) times (1 + L3/L2).
	var st [NumLevels][]*TableMeta
	st[1] = []*TableMeta{tm(1, 100*mib, "a", "z")}
	st[2] = []*TableMeta{tm(2, 684*mib, "a", "z")}
	st[3] = []*TableMeta{tm(3, 1000*mib, "a", "z")}
	o := Options{StaticLevelTargets: true}
	want := 36.0*(684.0/100+1) + (684+36-640)*(1000.0/(684+36)+1)
	require.InEpsilon(t, want*mib, float64(Debt(st, o)), 1e-6)
}

// TestSkipEmptyLevels: a manual plan's output passes over the levels with
// nothing in its range, to the first that has (or the last level), and
// takes that level's overlapping tables; a busy one there leaves the plan
// as it was.
func TestSkipEmptyLevels(t *testing.T) {
	var levels [NumLevels][]*TableMeta
	levels[0] = []*TableMeta{tm(20, 1, "c", "f")}
	levels[1] = []*TableMeta{tm(1, 1, "x", "z")} // outside the range
	levels[4] = []*TableMeta{tm(4, 1, "a", "d"), tm(5, 1, "p", "q")}
	levels[6] = []*TableMeta{tm(6, 1, "a", "z")}
	p := PickRange(levels, 0, nil, nil, nil)
	require.Equal(t, 1, p.OutputLevel)
	require.False(t, p.SkipEmptyLevels(levels, busySet(6)))
	require.Equal(t, 4, p.OutputLevel)
	require.Equal(t, []uint64{4}, fileNums(p.Overlapping))

	p = PickRange(levels, 0, nil, nil, nil)
	levels[4] = nil
	require.True(t, p.SkipEmptyLevels(levels, busySet(6)), "L6's table is busy")
	require.Equal(t, 1, p.OutputLevel)
	require.False(t, p.SkipEmptyLevels(levels, nil))
	require.Equal(t, NumLevels-1, p.OutputLevel)
	require.Equal(t, []uint64{6}, fileNums(p.Overlapping))
	require.True(t, p.IsBottommost(levels))
}

func TestFlushSplitKeys(t *testing.T) {
	var levels [NumLevels][]*TableMeta
	require.Empty(t, FlushSplitKeys(levels, Options{}), "empty tree")
	levels[6] = []*TableMeta{tm(1, 100, "a", "c"), tm(2, 100, "d", "f"), tm(3, 100, "g", "k")}
	keys := FlushSplitKeys(levels, Options{})
	require.Equal(t, []string{"c", "f"}, []string{string(keys[0]), string(keys[1])}, "the base level (L6 here) but its last table")
	levels[6] = levels[6][:1]
	require.Empty(t, FlushSplitKeys(levels, Options{}), "one table: nothing to split at")
}

// TestPlanGrandparents: a plan's grandparents are the overlapping tables of
// the first populated level below its output level.
func TestPlanGrandparents(t *testing.T) {
	var levels [NumLevels][]*TableMeta
	levels[2] = []*TableMeta{tm(1, 10, "c", "f")}
	levels[4] = []*TableMeta{tm(2, 10, "a", "b"), tm(3, 10, "b~", "d"), tm(4, 10, "e", "g"), tm(5, 10, "h", "k")}
	levels[6] = []*TableMeta{tm(6, 10, "a", "z")}
	p := &Plan{Level: 1, OutputLevel: 2, Inputs: []*TableMeta{tm(7, 10, "c", "e")}, Overlapping: levels[2]}
	// L3 is empty: the outputs' next compaction writes to L4.
	require.Equal(t, []uint64{3, 4}, fileNums(p.Grandparents(levels)))
	p = &Plan{Level: 4, OutputLevel: 6, Inputs: levels[4][:1], Overlapping: levels[6]}
	require.Nil(t, p.Grandparents(levels), "no level below the last")
	levels[6] = nil
	p = &Plan{Level: 4, OutputLevel: 5, Inputs: levels[4][:1]}
	require.Nil(t, p.Grandparents(levels), "nothing below the output level")
}

// TestPlanParts: a plan splits where its tables' key ranges do not meet,
// into parts of at least minBytes, and never otherwise.
func TestPlanParts(t *testing.T) {
	l0 := []*TableMeta{tm(10, 40, "m", "p"), tm(11, 40, "a", "c"), tm(12, 40, "b", "d"), tm(13, 40, "x", "z")}
	l6 := []*TableMeta{tm(1, 40, "a", "b"), tm(2, 40, "e", "f"), tm(3, 40, "p", "r")}
	p := &Plan{Level: 0, OutputLevel: 6, Inputs: l0, Overlapping: l6, Manual: true}
	parts := p.Parts(50)
	// Groups: {11,12,1} a..d, {2} e..f, {10,3} m..r, {13} x..z. Parts of
	// at least 50 bytes: {11,12,1}, {2,10,3}, and {13} (40) joined to the
	// one before.
	require.Len(t, parts, 2)
	require.Equal(t, []uint64{11, 12}, fileNums(parts[0].Inputs))
	require.Equal(t, []uint64{1}, fileNums(parts[0].Overlapping))
	require.Equal(t, []uint64{10, 13}, fileNums(parts[1].Inputs), "inputs in the plan's order")
	require.Equal(t, []uint64{2, 3}, fileNums(parts[1].Overlapping))
	for _, q := range parts {
		require.Equal(t, 0, q.Level)
		require.Equal(t, 6, q.OutputLevel)
		require.True(t, q.Manual)
	}
	require.Len(t, p.Parts(10), 4, "every group its own part")
	require.Equal(t, []*Plan{p}, p.Parts(150), "under twice minBytes: one part")

	// Tables meeting at a user key stay together (its versions may be in
	// both).
	touching := &Plan{Level: 6, OutputLevel: 6, Manual: true,
		Inputs: []*TableMeta{tm(1, 100, "a", "c"), tm(2, 100, "c", "e"), tm(3, 100, "f", "g")}}
	parts = touching.Parts(10)
	require.Len(t, parts, 2)
	require.Equal(t, []uint64{1, 2}, fileNums(parts[0].Inputs))
	require.Equal(t, []uint64{3}, fileNums(parts[1].Inputs))
	require.Empty(t, parts[1].Overlapping, "a plan within one level has no overlapping tables")

	intra := &Plan{Level: 0, OutputLevel: 0, Inputs: []*TableMeta{tm(1, 100, "a", "b"), tm(2, 100, "x", "y")}}
	require.Equal(t, []*Plan{intra}, intra.Parts(10), "an intra-L0 plan writes one table")
}

// TestPlanPartsRandom: on random plans, the parts take every table once,
// their key ranges are disjoint and ascending, and each but a lone one
// holds at least minBytes.
func TestPlanPartsRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(int64(testSeed(t))))
	for iter := 0; iter < 500; iter++ {
		var inputs, over []*TableMeta
		num := uint64(1)
		table := func() *TableMeta {
			a, b := rng.Intn(1000), rng.Intn(1000)
			if a > b {
				a, b = b, a
			}
			num++
			return tm(num, uint64(1+rng.Intn(100)), fmt.Sprintf("%04d", a), fmt.Sprintf("%04d", min(b, a+rng.Intn(60))))
		}
		for range 1 + rng.Intn(20) {
			inputs = append(inputs, table())
		}
		// The output level: sorted and disjoint.
		for k := 0; k < 1000; k += 1 + rng.Intn(100) {
			if rng.Intn(2) == 0 {
				num++
				over = append(over, tm(num, uint64(1+rng.Intn(100)), fmt.Sprintf("%04d", k), fmt.Sprintf("%04d", k+rng.Intn(40))))
			}
		}
		p := &Plan{Level: 0, OutputLevel: 6, Inputs: inputs, Overlapping: over, Manual: true}
		minBytes := uint64(1 + rng.Intn(300))
		parts := p.Parts(minBytes)
		var gotIn, gotOver []uint64
		var prevHi []byte
		for i, q := range parts {
			lo, hi := q.UserKeyRange()
			if i > 0 {
				require.Positive(t, bytes.Compare(lo, prevHi), "part %d starts at %q, the one before ends at %q", i, lo, prevHi)
			}
			prevHi = hi
			if len(parts) > 1 {
				require.GreaterOrEqual(t, sumSize(q.Tables()), minBytes)
			}
			gotIn = append(gotIn, fileNums(q.Inputs)...)
			gotOver = append(gotOver, fileNums(q.Overlapping)...)
		}
		slices.Sort(gotIn)
		slices.Sort(gotOver)
		wantIn, wantOver := fileNums(inputs), fileNums(over)
		slices.Sort(wantIn)
		slices.Sort(wantOver)
		require.Equal(t, wantIn, gotIn)
		require.Equal(t, wantOver, gotOver)
	}
}

package compaction

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/merging"
	"github.com/stretchr/testify/require"
)

// randVersions makes a random multi-version data set: for each of up to
// nKeys user keys a few versions with distinct sequence numbers, mixing sets
// and tombstones. Returned sorted.
func randVersions(rng *rand.Rand, nKeys, maxVersions int, maxSeq int) []entry {
	var es []entry
	for k := 0; k < nKeys; k++ {
		uk := []byte(fmt.Sprintf("key%04d", k))
		if rng.Intn(4) == 0 {
			uk = uk[:len(uk)-1] // prefix of the next keys, after dedup below
		}
		n := 1 + rng.Intn(maxVersions)
		seqs := rng.Perm(maxSeq)[:min(n, maxSeq)]
		for _, s := range seqs {
			kind := base.KeyKindSet
			if rng.Intn(3) == 0 {
				kind = base.KeyKindDelete
			}
			var v []byte
			if kind == base.KeyKindSet {
				v = []byte(fmt.Sprintf("v%s@%d", uk, s))
			}
			es = append(es, entry{Key: base.InternalKey{UserKey: uk, Seq: uint64(s), Kind: kind}, Value: v})
		}
	}
	sortEntries(es)
	// Keep sequence numbers unique per user key (two keys truncated to the
	// same prefix may have drawn the same one).
	out := es[:0]
	for _, e := range es {
		if len(out) > 0 && string(out[len(out)-1].Key.UserKey) == string(e.Key.UserKey) && out[len(out)-1].Key.Seq == e.Key.Seq {
			continue
		}
		out = append(out, e)
	}
	return out
}

// splitRandomly deals the entries to n children (each stays sorted).
func splitRandomly(rng *rand.Rand, es []entry, n int) [][]entry {
	children := make([][]entry, n)
	for _, e := range es {
		c := rng.Intn(n)
		children[c] = append(children[c], e)
	}
	return children
}

// groupByUserKey returns the versions of each user key, newest first, in
// user key order.
func groupByUserKey(es []entry) [][]entry {
	var groups [][]entry
	for i, e := range es {
		if i == 0 || string(es[i-1].Key.UserKey) != string(e.Key.UserKey) {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], e)
	}
	return groups
}

// modelRun is the brute-force rule: a version is kept iff it is the newest
// of its user key or, for some snapshot s, the newest with Seq < s; with
// dropTombstones, the kept tombstones with no older kept Set are removed.
func modelRun(es []entry, snapshots []uint64, dropTombstones bool) []entry {
	var out []entry
	for _, g := range groupByUserKey(es) {
		var kept []entry
		for i, v := range g {
			need := i == 0
			for _, s := range snapshots {
				// newest with Seq < s: the first in g (newest first) below s.
				for _, w := range g {
					if w.Key.Seq < s {
						if w.Key.Seq == v.Key.Seq {
							need = true
						}
						break
					}
				}
			}
			if need {
				kept = append(kept, v)
			}
		}
		if dropTombstones {
			for len(kept) > 0 && kept[len(kept)-1].Key.Kind == base.KeyKindDelete {
				kept = kept[:len(kept)-1]
			}
		}
		out = append(out, kept...)
	}
	return out
}

// read returns what a reader at snapshot s sees for userKey in es: the
// newest version with Seq < s, tombstones reading as absent.
func read(es []entry, userKey string, s uint64) (string, bool) {
	for _, e := range es {
		if string(e.Key.UserKey) == userKey && e.Key.Seq < s {
			if e.Key.Kind == base.KeyKindDelete {
				return "", false
			}
			return string(e.Value), true
		}
	}
	return "", false
}

func randSnapshots(rng *rand.Rand, maxSeq int) []uint64 {
	n := rng.Intn(6)
	s := make([]uint64, n)
	for i := range s {
		s[i] = uint64(rng.Intn(maxSeq + 2))
	}
	slices.Sort(s)
	return s
}

// TestRunZeroSeqsRandom: with ZeroSeqs a bottommost run keeps exactly the
// versions it keeps without, and writes with Seq 0 exactly the kept Sets of
// the oldest stripe (seen by every reader), which are the last version of
// their user key; every reader sees what it saw in the input.
func TestRunZeroSeqsRandom(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	rounds := 1500
	if testing.Short() {
		rounds = 300
	}
	zeroed := 0
	for round := 0; round < rounds; round++ {
		maxSeq := 2 + rng.Intn(30)
		es := randVersions(rng, rng.Intn(30), 1+rng.Intn(8), maxSeq)
		snaps := randSnapshots(rng, maxSeq)
		msg := fmt.Sprintf("seed %d round %d snapshots %v", seed, round, snaps)
		run := func(zero bool) []entry {
			it, _ := newMerged(splitRandomly(rng, es, 1+rng.Intn(4)))
			sink := &memSink{}
			metas, err := Run(it, RunOptions{Snapshots: snaps, DropTombstones: true, ZeroSeqs: zero, TargetFileSize: 64, NewOutput: sink.NewOutput})
			require.NoError(t, err, msg)
			require.NoError(t, it.Close(), msg)
			for i, o := range sink.outs {
				require.Equal(t, o.es[0].Key, metas[i].Smallest, msg)
				require.Equal(t, o.es[len(o.es)-1].Key, metas[i].Largest, msg)
			}
			return sink.finished()
		}
		ref, got := run(false), run(true)
		require.Len(t, got, len(ref), msg)
		oldest := func(seq uint64) bool { return len(snaps) == 0 || seq < snaps[0] }
		for i, r := range ref {
			g := got[i]
			require.Equal(t, r.Key.UserKey, g.Key.UserKey, msg)
			require.Equal(t, r.Key.Kind, g.Key.Kind, msg)
			require.Equal(t, r.Value, g.Value, msg)
			last := i+1 == len(ref) || string(ref[i+1].Key.UserKey) != string(r.Key.UserKey)
			if r.Key.Kind == base.KeyKindSet && oldest(r.Key.Seq) {
				require.True(t, last, "%s: %v in the oldest stripe is not its key's last version", msg, r)
				require.Zero(t, g.Key.Seq, "%s: %v not zeroed", msg, r)
				zeroed++
			} else {
				require.Equal(t, r.Key.Seq, g.Key.Seq, "%s: %v", msg, r)
			}
			if i > 0 && string(got[i-1].Key.UserKey) == string(g.Key.UserKey) {
				require.Greater(t, got[i-1].Key.Seq, g.Key.Seq, "%s: versions out of order", msg)
			}
		}
		readers := append(slices.Clone(snaps), math.MaxUint64)
		for _, g := range groupByUserKey(es) {
			uk := string(g[0].Key.UserKey)
			for _, s := range readers {
				if s == 0 {
					continue // sees nothing, and Seq 0 is not below it
				}
				wv, wok := read(es, uk, s)
				gv, gok := read(got, uk, s)
				require.Equal(t, wok, gok, "%s: key %q at snapshot %d", msg, uk, s)
				require.Equal(t, wv, gv, "%s: key %q at snapshot %d", msg, uk, s)
			}
		}
	}
	require.Greater(t, zeroed, rounds, "the rounds zeroed versions")

	_, err := Run(newSliceIter(nil), RunOptions{ZeroSeqs: true, NewOutput: (&memSink{}).NewOutput})
	require.ErrorIs(t, err, ErrInvalidOptions, "ZeroSeqs needs DropTombstones")
}

func TestRunVersionRulesRandom(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	rounds := 1500
	if testing.Short() {
		rounds = 300
	}
	for round := 0; round < rounds; round++ {
		maxSeq := 2 + rng.Intn(30)
		es := randVersions(rng, rng.Intn(30), 1+rng.Intn(8), maxSeq)
		snaps := randSnapshots(rng, maxSeq)
		drop := rng.Intn(2) == 0
		target := uint64(0)
		if rng.Intn(2) == 0 {
			target = uint64(1 + rng.Intn(200))
		}
		msg := fmt.Sprintf("seed %d round %d snapshots %v drop %v target %d", seed, round, snaps, drop, target)

		it, _ := newMerged(splitRandomly(rng, es, 1+rng.Intn(4)))
		sink := &memSink{}
		metas, err := Run(it, RunOptions{Snapshots: snaps, DropTombstones: drop, TargetFileSize: target, NewOutput: sink.NewOutput})
		require.NoError(t, err, msg)
		require.NoError(t, it.Close(), msg)
		got := sink.finished()
		require.Len(t, metas, len(sink.outs), msg)

		// Exactly the model's versions.
		want := modelRun(es, snaps, drop)
		if len(want) == 0 {
			require.Empty(t, got, msg)
			require.Empty(t, metas, msg)
		} else {
			require.Equal(t, want, got, msg)
		}

		// Every reader sees the same thing before and after.
		readers := append(slices.Clone(snaps), math.MaxUint64)
		for _, g := range groupByUserKey(es) {
			uk := string(g[0].Key.UserKey)
			for _, s := range readers {
				wv, wok := read(es, uk, s)
				gv, gok := read(got, uk, s)
				require.Equal(t, wok, gok, "%s: key %q at snapshot %d", msg, uk, s)
				require.Equal(t, wv, gv, "%s: key %q at snapshot %d", msg, uk, s)
			}
		}

		// Nothing kept that no reader needs: each kept version is what some
		// reader of the output sees, or a tombstone needed to hide an older
		// kept version from some reader.
		for _, g := range groupByUserKey(got) {
			for i, v := range g {
				seen := false
				for _, s := range readers {
					for _, w := range g {
						if w.Key.Seq < s {
							seen = seen || w.Key.Seq == v.Key.Seq
							break
						}
					}
				}
				require.True(t, seen, "%s: version %v kept but seen by no reader", msg, v)
				if drop && v.Key.Kind == base.KeyKindDelete {
					hasOlderSet := false
					for _, w := range g[i+1:] {
						hasOlderSet = hasOlderSet || w.Key.Kind == base.KeyKindSet
					}
					require.True(t, hasOlderSet, "%s: bottommost tombstone %v hides nothing", msg, v)
				}
			}
		}

		// Outputs: metadata matches contents; no user key in two outputs;
		// an output is cut only once full, and not earlier than needed.
		for i, o := range sink.outs {
			require.True(t, o.finished, msg)
			require.NotEmpty(t, o.es, msg)
			require.Equal(t, o.es[0].Key, metas[i].Smallest, msg)
			require.Equal(t, o.es[len(o.es)-1].Key, metas[i].Largest, msg)
			if i > 0 {
				require.NotEqual(t, string(sink.outs[i-1].es[len(sink.outs[i-1].es)-1].Key.UserKey),
					string(o.es[0].Key.UserKey), "%s: user key split across outputs", msg)
			}
			if target == 0 {
				require.Len(t, sink.outs, 1, msg)
				continue
			}
			if i < len(sink.outs)-1 {
				require.GreaterOrEqual(t, o.size, target, "%s: output %d cut before full", msg, i)
				groups := groupByUserKey(o.es)
				last := groups[len(groups)-1]
				withoutLast := o.size
				for _, e := range last {
					withoutLast -= uint64(len(e.Key.UserKey) + len(e.Value) + 8)
				}
				require.Less(t, withoutLast, target, "%s: output %d should have been cut earlier", msg, i)
			}
		}
	}
}

// TestRunVersionRulesExamples spells out the rules on small cases.
func TestRunVersionRulesExamples(t *testing.T) {
	set := func(k string, seq uint64) entry {
		return entry{Key: base.InternalKey{UserKey: []byte(k), Seq: seq, Kind: base.KeyKindSet}, Value: []byte(fmt.Sprintf("%s%d", k, seq))}
	}
	del := func(k string, seq uint64) entry {
		return entry{Key: base.InternalKey{UserKey: []byte(k), Seq: seq, Kind: base.KeyKindDelete}}
	}
	cases := []struct {
		name  string
		in    []entry
		snaps []uint64
		drop  bool
		want  []entry
	}{
		{"newest only", []entry{set("a", 9), set("a", 5), set("a", 1)}, nil, false, []entry{set("a", 9)}},
		{"snapshot keeps older", []entry{set("a", 9), set("a", 5), set("a", 1)}, []uint64{6}, false, []entry{set("a", 9), set("a", 5)}},
		{"snapshot equal to seq does not see it", []entry{set("a", 9), set("a", 5), set("a", 1)}, []uint64{5}, false, []entry{set("a", 9), set("a", 1)}},
		{"tombstone kept above", []entry{del("a", 9), set("a", 5)}, nil, false, []entry{del("a", 9)}},
		{"bottommost tombstone dropped", []entry{del("a", 9), set("a", 5)}, nil, true, nil},
		{"bottommost tombstone needed by snapshot", []entry{del("a", 9), set("a", 5)}, []uint64{7}, true, []entry{del("a", 9), set("a", 5)}},
		{"bottommost tombstones in oldest stripes", []entry{set("a", 12), del("a", 9), del("a", 5)}, []uint64{7, 10}, true, []entry{set("a", 12)}},
		{"snapshot below everything", []entry{del("a", 9)}, []uint64{3}, true, nil},
		{"not bottommost keeps lone tombstone", []entry{del("a", 9)}, nil, false, []entry{del("a", 9)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sink := &memSink{}
			_, err := Run(newSliceIter(c.in), RunOptions{Snapshots: c.snaps, DropTombstones: c.drop, NewOutput: sink.NewOutput})
			require.NoError(t, err)
			got := sink.finished()
			if len(c.want) == 0 {
				require.Empty(t, got)
				require.Empty(t, sink.outs, "no output opened for an all-dropped input")
			} else {
				require.Equal(t, c.want, got)
			}
		})
	}
}

func TestRunOutputCutting(t *testing.T) {
	// 100 user keys with 3 versions each, each entry 20 bytes in memOutput;
	// a snapshot keeps every version so a key is 60 bytes.
	var es []entry
	for k := 0; k < 100; k++ {
		for s := 3; s >= 1; s-- {
			es = append(es, entry{Key: base.InternalKey{UserKey: []byte(fmt.Sprintf("k%03d", k)), Seq: uint64(s*1000 + k), Kind: base.KeyKindSet}, Value: []byte("vvvvvvvv")})
		}
	}
	sortEntries(es)
	sink := &memSink{}
	metas, err := Run(newSliceIter(es), RunOptions{Snapshots: []uint64{1500, 2500}, TargetFileSize: 200, NewOutput: sink.NewOutput})
	require.NoError(t, err)
	// 60 bytes a key: cut after 4 keys (240 >= 200), so 25 tables.
	require.Len(t, metas, 25)
	for i, m := range metas {
		require.Equal(t, uint64(240), m.Size)
		require.Equal(t, fmt.Sprintf("k%03d", 4*i), string(m.Smallest.UserKey))
		require.Equal(t, fmt.Sprintf("k%03d", 4*i+3), string(m.Largest.UserKey))
		require.Equal(t, uint64(3000+4*i), m.Smallest.Seq)
		require.Equal(t, uint64(1000+4*i+3), m.Largest.Seq)
	}
	require.Equal(t, es, sink.finished())

	// One user key bigger than the target is never split.
	var big []entry
	for s := 50; s >= 1; s-- {
		big = append(big, entry{Key: base.InternalKey{UserKey: []byte("big"), Seq: uint64(s * 2), Kind: base.KeyKindSet}, Value: []byte("x")})
	}
	snaps := make([]uint64, 0, 50)
	for s := 1; s <= 50; s++ {
		snaps = append(snaps, uint64(2*s+1))
	}
	sink = &memSink{}
	metas, err = Run(newSliceIter(big), RunOptions{Snapshots: snaps, TargetFileSize: 10, NewOutput: sink.NewOutput})
	require.NoError(t, err)
	require.Len(t, metas, 1)
	require.Len(t, sink.outs[0].es, 50)
}

func TestRunErrors(t *testing.T) {
	var es []entry
	for k := 0; k < 50; k++ {
		es = append(es, entry{Key: base.InternalKey{UserKey: []byte(fmt.Sprintf("k%03d", k)), Seq: 1, Kind: base.KeyKindSet}, Value: []byte("0123456789")})
	}
	opts := func(s *memSink) RunOptions {
		return RunOptions{TargetFileSize: 100, NewOutput: s.NewOutput}
	}
	// checkAborted: every output is finished (and returned) or aborted, and
	// the last one is aborted.
	checkAborted := func(t *testing.T, s *memSink, metas []*TableMeta) {
		require.NotEmpty(t, s.outs)
		finished := 0
		for _, o := range s.outs {
			require.True(t, o.finished != o.aborted, "each output finished xor aborted")
			if o.finished {
				require.Equal(t, o.fileNum, metas[finished].FileNum)
				finished++
			}
		}
		require.Len(t, metas, finished)
		require.True(t, s.outs[len(s.outs)-1].aborted)
	}

	t.Run("input error", func(t *testing.T) {
		in := newSliceIter(es)
		in.FailAfter = 30
		s := &memSink{}
		metas, err := Run(in, opts(s))
		require.ErrorIs(t, err, errInjected)
		checkAborted(t, s, metas)
		require.Len(t, metas, 5) // 29 keys read, 22 bytes a key: 5 keys a table
	})
	t.Run("input error through merging iterator", func(t *testing.T) {
		a, b := newSliceIter(es[:25]), newSliceIter(es[25:])
		b.FailAfter = 3
		s := &memSink{}
		_, err := Run(merging.NewIter(a, b), opts(s))
		require.ErrorIs(t, err, errInjected)
	})
	t.Run("add error", func(t *testing.T) {
		s := &memSink{}
		s.setup = func(o *memOutput) {
			if o.fileNum == 3 {
				o.failAdd = 4
			}
		}
		metas, err := Run(newSliceIter(es), opts(s))
		require.ErrorIs(t, err, errInjected)
		checkAborted(t, s, metas)
		require.Len(t, metas, 2)
	})
	t.Run("new output error", func(t *testing.T) {
		s := &memSink{failNew: 2}
		metas, err := Run(newSliceIter(es), opts(s))
		require.ErrorIs(t, err, errInjected)
		require.Len(t, metas, 1)
		require.Len(t, s.outs, 1)
		require.True(t, s.outs[0].finished)
	})
	t.Run("finish error", func(t *testing.T) {
		s := &memSink{}
		s.setup = func(o *memOutput) { o.failFin = o.fileNum == 5 }
		metas, err := Run(newSliceIter(es), opts(s))
		require.ErrorIs(t, err, errInjected)
		checkAborted(t, s, metas)
		require.Len(t, metas, 4)
	})
	t.Run("final finish error", func(t *testing.T) {
		s := &memSink{}
		s.setup = func(o *memOutput) { o.failFin = true }
		metas, err := Run(newSliceIter(es[:3]), opts(s))
		require.ErrorIs(t, err, errInjected)
		checkAborted(t, s, metas)
		require.Empty(t, metas)
	})
	t.Run("out of order", func(t *testing.T) {
		bad := slices.Clone(es[:10])
		bad[4], bad[5] = bad[5], bad[4]
		s := &memSink{}
		_, err := Run(newSliceIter(bad), opts(s))
		require.ErrorIs(t, err, ErrOutOfOrder)
		require.True(t, s.outs[len(s.outs)-1].aborted)

		dup := []entry{es[0], es[0]}
		_, err = Run(newSliceIter(dup), opts(&memSink{}))
		require.ErrorIs(t, err, ErrOutOfOrder)

		seqUp := []entry{es[0], es[0]}
		seqUp[1].Key.Seq = 2
		_, err = Run(newSliceIter(seqUp), opts(&memSink{}))
		require.ErrorIs(t, err, ErrOutOfOrder)
	})
	t.Run("unsupported kind", func(t *testing.T) {
		bad := slices.Clone(es[:3])
		bad[2].Key.Kind = 2 // Pebble's merge kind
		_, err := Run(newSliceIter(bad), opts(&memSink{}))
		require.ErrorIs(t, err, ErrUnsupportedKind)
	})
	t.Run("invalid options", func(t *testing.T) {
		_, err := Run(nil, opts(&memSink{}))
		require.ErrorIs(t, err, ErrInvalidOptions)
		_, err = Run(newSliceIter(es), RunOptions{})
		require.ErrorIs(t, err, ErrInvalidOptions)
		_, err = Run(newSliceIter(es), RunOptions{Snapshots: []uint64{5, 3}, NewOutput: (&memSink{}).NewOutput})
		require.ErrorIs(t, err, ErrInvalidOptions)
		_, err = Run(newSliceIter(es), RunOptions{NewOutput: func() (Output, error) { return nil, nil }})
		require.ErrorIs(t, err, ErrInvalidOptions)
	})
	t.Run("cancel", func(t *testing.T) {
		var many []entry
		for k := 0; k < 3*cancelCheckInterval; k++ {
			many = append(many, entry{Key: base.InternalKey{UserKey: []byte(fmt.Sprintf("k%06d", k)), Seq: 1, Kind: base.KeyKindSet}})
		}
		cancel := make(chan struct{})
		close(cancel)
		s := &memSink{}
		metas, err := Run(newSliceIter(many), RunOptions{NewOutput: s.NewOutput, Cancel: cancel})
		require.ErrorIs(t, err, ErrCanceled)
		require.Empty(t, metas)
		require.True(t, s.outs[0].aborted)
	})
	t.Run("empty input", func(t *testing.T) {
		s := &memSink{}
		metas, err := Run(newSliceIter(nil), opts(s))
		require.NoError(t, err)
		require.Empty(t, metas)
		require.Empty(t, s.outs)
	})
	_ = errors.New
}

// gpKeys returns 20-byte entries (in memOutput) for user keys k000..k(n-1),
// one version each.
func gpKeys(n int) []entry {
	es := make([]entry, n)
	for i := range es {
		es[i] = entry{Key: base.InternalKey{UserKey: []byte(fmt.Sprintf("k%03d", i)), Seq: uint64(i + 1), Kind: base.KeyKindSet}, Value: []byte("vvvvvvvv")}
	}
	return es
}

// gpTables returns grandparent tables starting at the given key numbers,
// each ending just before the next.
func gpTables(starts ...int) []*TableMeta {
	var ts []*TableMeta
	for i, s := range starts {
		end := s + 1
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		ts = append(ts, tm(uint64(100+i), 1, fmt.Sprintf("k%03d", s), fmt.Sprintf("k%03d", end-1)+"~"))
	}
	return ts
}

// TestRunGrandparentCutting follows outputs cut at grandparent starts on a
// worked example: 100 keys of 20 bytes, target 200 bytes (10 keys).
func TestRunGrandparentCutting(t *testing.T) {
	run := func(gps []*TableMeta) []string {
		sink := &memSink{}
		metas, err := Run(newSliceIter(gpKeys(100)), RunOptions{TargetFileSize: 200, Grandparents: gps, NewOutput: sink.NewOutput})
		require.NoError(t, err)
		require.Equal(t, gpKeys(100), sink.finished())
		var got []string
		for _, m := range metas {
			got = append(got, fmt.Sprintf("%s-%s", m.Smallest.UserKey, m.Largest.UserKey))
		}
		return got
	}
	require.Equal(t, []string{
		"k000-k006", // at k007's start: 140 bytes, over half the target
		"k007-k018", // full at k017, but waits for k019's start (240 bytes)
		"k019-k025",
		"k026-k040",
		"k041-k059", // 380 bytes: under twice the target
		"k060-k079", // twice the target at k080: cut, though no grandparent starts there
		"k080-k084", // exactly half the target at k085's start
		"k085-k094", // past the last grandparent: by size
		"k095-k099",
	}, run(gpTables(7, 19, 26, 41, 60, 85)))

	// Dense grandparents (one every other key) raise the size wanted at a
	// start by 5% of the target for each start passed: at k006 the output
	// has passed 3 starts and holds 120 bytes, the 60% it needs.
	require.Equal(t, "k000-k005", run(gpTables(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20))[0])

	// Grandparents that all start before the input: cut by size alone.
	require.Equal(t, []string{"k000-k009", "k010-k019", "k020-k029", "k030-k039", "k040-k049",
		"k050-k059", "k060-k069", "k070-k079", "k080-k089", "k090-k099"}, run([]*TableMeta{tm(1, 1, "a", "b")}))
}

// TestRunGrandparentCuttingRandom checks, on random inputs and grandparent
// levels, that cutting at grandparent starts keeps every entry, never
// splits a user key, keeps every output but the last within [target/2,
// 2*target + one key), cuts only at a grandparent start, at twice the
// target, or past the last grandparent, and that outputs overlap fewer
// grandparents in total than outputs cut by size alone.
func TestRunGrandparentCuttingRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	const target = 400
	overlapsOf := func(metas []*TableMeta, gps []*TableMeta) int {
		n := 0
		for _, m := range metas {
			n += len(overlapping(gps, m.Smallest.UserKey, m.Largest.UserKey))
		}
		return n
	}
	aligned, bySize := 0, 0
	for iter := 0; iter < 300; iter++ {
		nKeys := 50 + rng.Intn(400)
		es := gpKeys(nKeys)
		// Grandparents: random starts over a range a bit wider than the input.
		var starts []int
		for k := rng.Intn(20) - 10; k < nKeys+10; k += 1 + rng.Intn(40) {
			starts = append(starts, max(k, 0))
		}
		starts = slices.Compact(starts)
		gps := gpTables(starts...)
		sink := &memSink{}
		metas, err := Run(newSliceIter(es), RunOptions{TargetFileSize: target, Grandparents: gps, NewOutput: sink.NewOutput})
		require.NoError(t, err)
		require.Equal(t, es, sink.finished())
		for i, m := range metas {
			if i == len(metas)-1 {
				break
			}
			require.GreaterOrEqual(t, m.Size, uint64(target/2), "output %d", i)
			require.Less(t, m.Size, uint64(2*target+20), "output %d", i)
			next := metas[i+1].Smallest.UserKey
			require.NotEqual(t, m.Largest.UserKey, next)
			atStart := false
			for _, g := range gps {
				if bytes.Compare(g.Smallest.UserKey, m.Largest.UserKey) > 0 && bytes.Compare(g.Smallest.UserKey, next) <= 0 {
					atStart = true
				}
			}
			pastLast := bytes.Compare(gps[len(gps)-1].Smallest.UserKey, m.Largest.UserKey) <= 0
			require.True(t, atStart || m.Size >= 2*target || (pastLast && m.Size >= target),
				"output %d (%s..%s, %d bytes) cut at no grandparent start", i, m.Smallest.UserKey, m.Largest.UserKey, m.Size)
		}
		aligned += overlapsOf(metas, gps)
		sizeOnly, err := Run(newSliceIter(es), RunOptions{TargetFileSize: target, NewOutput: (&memSink{}).NewOutput})
		require.NoError(t, err)
		bySize += overlapsOf(sizeOnly, gps)
	}
	t.Logf("grandparents overlapped: %d aligned, %d by size alone", aligned, bySize)
	require.Less(t, aligned, bySize)
}

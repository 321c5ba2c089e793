package compaction

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/rangedel"
	"github.com/stretchr/testify/require"
)

// readRD is read with range tombstones: the newest version below s, absent
// if a tombstone visible at s covers it.
func readRD(es []entry, set *rangedel.Set, userKey string, s uint64) (string, bool) {
	for _, e := range es {
		if string(e.Key.UserKey) == userKey && e.Key.Seq < s {
			if e.Key.Kind == base.KeyKindDelete || set.Covering(e.Key.UserKey, s) > e.Key.Seq {
				return "", false
			}
			return string(e.Value), true
		}
	}
	return "", false
}

// TestRunRangeDelsRandom: with range tombstones in the input, every reader
// (each snapshot, and the latest) sees the same thing in the outputs as in
// the input, the outputs drop every version no reader sees, and the
// outputs' key ranges, tombstones included, stay in order without overlap.
func TestRunRangeDelsRandom(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	rounds := 1500
	if testing.Short() {
		rounds = 300
	}
	for round := 0; round < rounds; round++ {
		maxSeq := 2 + rng.Intn(30)
		es := randVersions(rng, rng.Intn(30), 1+rng.Intn(8), maxSeq)
		for i := range es {
			es[i].Key.Seq = 2*es[i].Key.Seq + 2 // even, above 0: tombstones take the odd ones
		}
		var ts []rangedel.Tombstone
		for n := rng.Intn(6); n > 0; n-- {
			a, b := randUserKey(rng, 40), randUserKey(rng, 40)
			a, b = []byte("key"+string(a[1:])), []byte("key"+string(b[1:]))
			if bytes.Compare(a, b) > 0 {
				a, b = b, a
			}
			ts = append(ts, rangedel.Tombstone{Start: a, End: b, Seq: uint64(2*rng.Intn(maxSeq+1) + 1)})
		}
		in := rangedel.Build(ts)
		snaps := randSnapshots(rng, 2*maxSeq+4)
		drop := rng.Intn(2) == 0
		zero := drop && rng.Intn(2) == 0
		target := uint64(0)
		if rng.Intn(2) == 0 {
			target = uint64(1 + rng.Intn(200))
		}
		msg := fmt.Sprintf("seed %d round %d snapshots %v drop %v zero %v target %d tombstones %v", seed, round, snaps, drop, zero, target, in.Fragments())

		it, _ := newMerged(splitRandomly(rng, es, 1+rng.Intn(4)))
		sink := &memSink{}
		metas, err := Run(it, RunOptions{Snapshots: snaps, DropTombstones: drop, ZeroSeqs: zero, TargetFileSize: target,
			NewOutput: sink.NewOutput, RangeDels: in})
		require.NoError(t, err, msg)
		require.NoError(t, it.Close(), msg)
		require.Len(t, metas, len(sink.outs), msg)
		got := sink.finished()
		var sets []*rangedel.Set
		for i, o := range sink.outs {
			s, ok := rangedel.FromFragments(o.frags)
			require.True(t, ok, msg)
			sets = append(sets, s)
			require.Equal(t, len(o.frags) > 0, metas[i].HasRangeDels, msg)
			if i == 0 {
				continue
			}
			// Everything in output i-1 sorts below everything in output i.
			p := sink.outs[i-1]
			var prevMax, curMin []byte // prevMax exclusive
			if len(p.es) > 0 {
				prevMax = rangedel.Successor(p.es[len(p.es)-1].Key.UserKey)
			}
			if len(p.frags) > 0 && bytes.Compare(p.frags[len(p.frags)-1].End, prevMax) > 0 {
				prevMax = p.frags[len(p.frags)-1].End
			}
			if len(o.es) > 0 {
				curMin = o.es[0].Key.UserKey
			}
			if len(o.frags) > 0 && (curMin == nil || bytes.Compare(o.frags[0].Start, curMin) < 0) {
				curMin = o.frags[0].Start
			}
			require.LessOrEqual(t, bytes.Compare(prevMax, curMin), 0, "%s: outputs %d and %d overlap", msg, i-1, i)
		}
		out := rangedel.Merge(sets...)

		readers := append(slices.Clone(snaps), math.MaxUint64)
		keys := map[string]bool{}
		for _, e := range es {
			keys[string(e.Key.UserKey)] = true
		}
		for k := range keys {
			for _, s := range readers {
				wv, wok := readRD(es, in, k, s)
				gv, gok := readRD(got, out, k, s)
				require.Equal(t, wok, gok, "%s: key %q at snapshot %d", msg, k, s)
				require.Equal(t, wv, gv, "%s: key %q at snapshot %d", msg, k, s)
			}
		}
		// No kept Set is deleted for every reader that would see it.
		for _, e := range got {
			if e.Key.Kind != base.KeyKindSet {
				continue
			}
			seen := false
			for _, s := range readers {
				v, ok := readRD(got, out, string(e.Key.UserKey), s)
				seen = seen || (ok && v == string(e.Value))
			}
			require.True(t, seen, "%s: kept %v that no reader sees", msg, e)
		}
		// With DropTombstones, no kept tombstone is in the oldest stripe.
		if drop {
			for _, f := range out.Fragments() {
				for _, seq := range f.Seqs {
					require.True(t, len(snaps) > 0 && seq >= snaps[0], "%s: kept tombstone #%d below every snapshot", msg, seq)
				}
			}
		}
	}
}

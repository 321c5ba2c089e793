package rangedel

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func key(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }

// bruteCovering is Covering by definition, over the unfragmented tombstones.
func bruteCovering(ts []Tombstone, k []byte, readSeq uint64) uint64 {
	best := uint64(0)
	for _, t := range ts {
		if bytes.Compare(t.Start, k) <= 0 && bytes.Compare(k, t.End) < 0 && t.Seq < readSeq && t.Seq > best {
			best = t.Seq
		}
	}
	return best
}

func bruteAbove(ts []Tombstone, k []byte, seq uint64) (uint64, bool) {
	best, ok := uint64(0), false
	for _, t := range ts {
		if bytes.Compare(t.Start, k) <= 0 && bytes.Compare(k, t.End) < 0 && t.Seq > seq && (!ok || t.Seq < best) {
			best, ok = t.Seq, true
		}
	}
	return best, ok
}

func randTombstones(rng *rand.Rand, n int) []Tombstone {
	ts := make([]Tombstone, n)
	for i := range ts {
		a, b := rng.IntN(200), rng.IntN(200)
		ts[i] = Tombstone{Start: key(min(a, b)), End: key(max(a, b) + rng.IntN(2)), Seq: uint64(1 + rng.IntN(50))}
	}
	return ts
}

func checkWellFormed(t *testing.T, s *Set) {
	t.Helper()
	_, ok := FromFragments(s.Fragments())
	require.True(t, ok, "fragments not sorted, disjoint and non-empty: %v", s.Fragments())
}

func TestBuildMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		ts := randTombstones(rng, rng.IntN(30))
		s := Build(ts)
		checkWellFormed(t, s)
		for i := 0; i < 202; i++ {
			k := key(i)
			for _, readSeq := range []uint64{1, 10, 25, 51, 1 << 60} {
				require.Equal(t, bruteCovering(ts, k, readSeq), s.Covering(k, readSeq), "round %d key %s readSeq %d", round, k, readSeq)
			}
			for _, seq := range []uint64{0, 5, 30, 60} {
				w, wok := bruteAbove(ts, k, seq)
				g, gok := s.CoveringAbove(k, seq)
				require.Equal(t, wok, gok, "round %d key %s seq %d", round, k, seq)
				require.Equal(t, w, g)
			}
			// Keys between the fixed-width ones (k005\x00, k005a) too.
			mid := append(k, 'a')
			require.Equal(t, bruteCovering(ts, mid, 1<<60), s.Covering(mid, 1<<60))
		}
	}
}

func TestMergeAndClip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 100; round++ {
		a, b := randTombstones(rng, rng.IntN(10)), randTombstones(rng, rng.IntN(10))
		m := Merge(Build(a), nil, Build(b))
		checkWellFormed(t, m)
		all := append(append([]Tombstone{}, a...), b...)
		lo, hi := key(rng.IntN(200)), key(rng.IntN(200))
		if bytes.Compare(lo, hi) > 0 {
			lo, hi = hi, lo
		}
		// The clipped parts, rebuilt, cover exactly the keys of [lo, hi).
		clipped, ok := FromFragments(m.Clip(lo, hi))
		require.True(t, ok)
		for i := 0; i < 202; i++ {
			k := key(i)
			require.Equal(t, bruteCovering(all, k, 1<<60), m.Covering(k, 1<<60))
			want := uint64(0)
			if bytes.Compare(lo, k) <= 0 && bytes.Compare(k, hi) < 0 {
				want = bruteCovering(all, k, 1<<60)
			}
			require.Equal(t, want, clipped.Covering(k, 1<<60), "key %s clip [%s, %s)", k, lo, hi)
		}
		// Clip with open ends is the whole set.
		require.Equal(t, m.Fragments(), m.Clip(nil, nil))
	}
}

func TestEdgeCases(t *testing.T) {
	require.Nil(t, Build(nil))
	require.Nil(t, Build([]Tombstone{{Start: key(2), End: key(2), Seq: 1}, {Start: key(3), End: key(1), Seq: 1}}))
	var empty *Set
	require.Zero(t, empty.Len())
	require.Zero(t, empty.Covering(key(1), 10))
	_, ok := empty.CoveringAbove(key(1), 0)
	require.False(t, ok)
	require.Nil(t, empty.Clip(nil, nil))

	s := Build([]Tombstone{{Start: key(1), End: key(5), Seq: 7}, {Start: key(3), End: key(9), Seq: 9}, {Start: key(3), End: key(4), Seq: 7}})
	require.Equal(t, []Fragment{
		{Start: key(1), End: key(3), Seqs: []uint64{7}},
		{Start: key(3), End: key(4), Seqs: []uint64{9, 7}},
		{Start: key(4), End: key(5), Seqs: []uint64{9, 7}},
		{Start: key(5), End: key(9), Seqs: []uint64{9}},
	}, s.Fragments())
	start, end := s.Bounds()
	require.Equal(t, key(1), start)
	require.Equal(t, key(9), end)
	require.Zero(t, s.Covering(key(9), 100), "End is exclusive")
	require.Equal(t, uint64(7), s.Covering(key(3), 9), "a reader at 9 does not see the tombstone at 9")

	_, ok = FromFragments([]Fragment{{Start: key(2), End: key(1), Seqs: []uint64{1}}})
	require.False(t, ok, "empty range")
	_, ok = FromFragments([]Fragment{{Start: key(1), End: key(3), Seqs: []uint64{1}}, {Start: key(2), End: key(4), Seqs: []uint64{1}}})
	require.False(t, ok, "overlap")
	_, ok = FromFragments([]Fragment{{Start: key(1), End: key(3), Seqs: []uint64{1, 2}}})
	require.False(t, ok, "ascending seqs")
	_, ok = FromFragments([]Fragment{{Start: key(1), End: key(3)}})
	require.False(t, ok, "no seqs")

	require.Equal(t, []byte("a\x00"), Successor([]byte("a")))
	k := []byte("ab")
	_ = Successor(k[:1])
	require.Equal(t, []byte("ab"), k, "Successor does not write into its argument")
}

func TestSplitter(t *testing.T) {
	s := Build([]Tombstone{{Start: key(1), End: key(9), Seq: 4}, {Start: key(20), End: key(30), Seq: 5}})
	sp := NewSplitter(s)
	a := sp.Cut(key(3))  // a table ending at k003
	b := sp.Cut(key(25)) // one ending at k025
	c := sp.Rest()
	require.Equal(t, []Fragment{{Start: key(1), End: Successor(key(3)), Seqs: []uint64{4}}}, a)
	require.Equal(t, []Fragment{
		{Start: Successor(key(3)), End: key(9), Seqs: []uint64{4}},
		{Start: key(20), End: Successor(key(25)), Seqs: []uint64{5}},
	}, b)
	require.Equal(t, []Fragment{{Start: Successor(key(25)), End: key(30), Seqs: []uint64{5}}}, c)
	require.Nil(t, NewSplitter(nil).Rest())
}

package manifest

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/stretchr/testify/require"
)

// TestL0Sublevels: on random L0 shapes (split flushes and full-range ones),
// every table is in one sublevel, tables of a sublevel share no user key,
// and a read of any key that goes from the top sublevel down meets the
// tables holding the key newest first, as the old scan of L0 did.
func TestL0Sublevels(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	for round := 0; round < 500; round++ {
		var l0 []*base.TableMeta
		fn := uint64(1)
		for f := rng.IntN(8); f > 0; f-- { // flushes, oldest first
			lo := rng.IntN(100)
			for lo < 100 && rng.IntN(4) != 0 { // a flush's tables, in key order
				hi := lo + rng.IntN(30)
				l0 = append(l0, &base.TableMeta{FileNum: fn,
					Smallest: base.InternalKey{UserKey: key(lo)}, Largest: base.InternalKey{UserKey: key(hi)}})
				fn++
				lo = hi + 1 + rng.IntN(5)
			}
		}
		subs := L0Sublevels(l0)
		var all []*base.TableMeta
		for s, ts := range subs {
			for i, tb := range ts {
				all = append(all, tb)
				if i > 0 {
					require.Negative(t, bytes.Compare(ts[i-1].Largest.UserKey, tb.Smallest.UserKey),
						"round %d: sublevel %d: tables %d and %d share keys or are out of order", round, s, ts[i-1].FileNum, tb.FileNum)
				}
			}
		}
		require.ElementsMatch(t, l0, all, "round %d", round)
		for k := 0; k < 140; k++ {
			var want, got []uint64
			for i := len(l0) - 1; i >= 0; i-- {
				if bytes.Compare(l0[i].Smallest.UserKey, key(k)) <= 0 && bytes.Compare(key(k), l0[i].Largest.UserKey) <= 0 {
					want = append(want, l0[i].FileNum)
				}
			}
			for s := len(subs) - 1; s >= 0; s-- {
				for _, tb := range subs[s] {
					if bytes.Compare(tb.Smallest.UserKey, key(k)) <= 0 && bytes.Compare(key(k), tb.Largest.UserKey) <= 0 {
						got = append(got, tb.FileNum)
					}
				}
			}
			require.Equal(t, want, got, "round %d key %d", round, k)
			require.True(t, slices.IsSortedFunc(got, func(a, b uint64) int { return cmp.Compare(b, a) }))
		}
	}
}

// table is an L0 table over user keys [lo, hi].
func table(fileNum uint64, lo, hi string) *base.TableMeta {
	return &base.TableMeta{FileNum: fileNum, Size: 1,
		Smallest: base.InternalKey{UserKey: []byte(lo), Seq: 100, Kind: base.KeyKindSet},
		Largest:  base.InternalKey{UserKey: []byte(hi), Seq: 1, Kind: base.KeyKindSet}}
}

// busySet reports the file numbers given as busy.
func busySet(nums ...uint64) func(uint64) bool {
	return func(n uint64) bool { return slices.Contains(nums, n) }
}

// TestL0Depth: the most tables holding one key, busy tables left out.
func TestL0Depth(t *testing.T) {
	require.Equal(t, 0, L0Depth(nil, nil))
	l0 := []*base.TableMeta{table(1, "b", "d"), table(2, "d", "f"), table(3, "a", "z"), table(4, "g", "g")}
	require.Equal(t, 3, L0Depth(l0, nil), "d is in 1, 2 and 3 (closed ranges)")
	require.Equal(t, 2, L0Depth(l0, busySet(3)))
	require.Equal(t, 1, L0Depth(l0, busySet(1, 3)))

	// Against a count at every key, on random tables over keys 00..99.
	rng := rand.New(rand.NewPCG(1, 2))
	key := func(i int) string { return fmt.Sprintf("%02d", i) }
	for iter := 0; iter < 300; iter++ {
		var tables []*base.TableMeta
		var cover [100]int
		for i := 0; i < 1+rng.IntN(12); i++ {
			a, b := rng.IntN(100), rng.IntN(100)
			a, b = min(a, b), max(a, b)
			tables = append(tables, table(uint64(i), key(a), key(b)))
			for k := a; k <= b; k++ {
				cover[k]++
			}
		}
		require.Equal(t, slices.Max(cover[:]), L0Depth(tables, nil))
	}
}

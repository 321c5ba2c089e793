package kv

import (
	"bytes"
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
		subs := l0Sublevels(l0)
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
			require.True(t, slices.IsSortedFunc(got, func(a, b uint64) int { return cmpU64(b, a) }))
		}
	}
}

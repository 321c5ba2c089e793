package quotient

import (
	"math/rand/v2"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/stretchr/testify/require"
)

// craftFalsePositive returns a query hash that collides with the stored
// element of hash (h1, h2) under its current fingerprint but differs from
// it elsewhere: a guaranteed false positive.
func craftFalsePositive(t *testing.T, f *qf, remote filter.MemRemote, h1, h2 uint64, rng *rand.Rand) uint64 {
	start, end, ok, bad := f.findRun(quotient(h1, f.nq))
	require.True(t, ok && !bad)
	s := -1
	for i := start; i <= end; i++ {
		if remote[i] == h2 {
			s = i
			break
		}
	}
	require.GreaterOrEqual(t, s, 0, "stored element not found in its run")
	keep := f.remMask // bits of the current fingerprint
	b, i := s>>6, s&63
	switch f.variant {
	case TAF:
		var sels [64]uint8
		require.True(t, decodeSelectors(f.meta(b)>>8, 64, &sels, true))
		keep <<= uint(sels[i]) * f.r
	case UTAF:
		keep <<= uint(f.uSelAt(s)) * f.r
	case ExAF:
		var lens [64]uint8
		var pats [64]uint32
		require.True(t, decodeExtensions(f.meta(b)>>8, 64, &lens, &pats, true))
		keep |= (uint64(1)<<lens[i] - 1) << f.r
	}
	for {
		if q := h2 ^ (rng.Uint64() &^ keep); q != h2 {
			return q
		}
	}
}

// TestMassAdaptation drives adaptations directly with crafted false
// positives (every one collides with a stored element), fresh and repeated,
// until the filter has made 10M adaptations (-quotient.long, 1M keys) or
// 300k (default). Blocks overflow and rebuild constantly; afterwards every
// key is present and the local state still matches the remote exactly.
func TestMassAdaptation(t *testing.T) {
	n := sizeFor(20_000, 100_000, 1_000_000)
	adapts := sizeFor(50_000, 300_000, 10_000_000)
	rng := rand.New(rand.NewPCG(51, 52))
	keys := randKeys(rng, n, 1)
	for _, kind := range []Variant{UTAF, TAF, ExAF} {
		t.Run(kind.String(), func(t *testing.T) {
			b := NewBuilder(kind, Options{Seed: 8080}, n)
			for _, k := range keys {
				b.Add(k)
			}
			fi, remote, err := b.Finish()
			require.NoError(t, err)
			f := fi.(*qf)
			type hp struct{ h1, h2 uint64 }
			var recent [1024]hp
			calls := 0
			for a := 0; f.Stats().Adaptations < uint64(adapts) && a < 4*adapts; a++ {
				calls++
				var q hp
				if a%2 == 1 && a > len(recent) {
					q = recent[rng.IntN(len(recent))] // repeated negative
				} else {
					h1, h2 := f.hash(keys[rng.IntN(n)])
					q = hp{h1, craftFalsePositive(t, f, remote, h1, h2, rng)}
					require.True(t, f.mayContainHash(q.h1, q.h2), "crafted query must collide")
					recent[a%len(recent)] = q
				}
				require.NoError(t, f.adaptHash(q.h1, q.h2))
			}
			st := f.Stats()
			t.Logf("%v: %d adapt calls, stats %+v", kind, calls, st)
			require.GreaterOrEqual(t, st.Adaptations, uint64(adapts))
			require.Positive(t, st.Rebuilds)
			requireNoFalseNegatives(t, f, keys)
			require.NoError(t, Verify(f))
			require.NoError(t, f.validate())
		})
	}
}

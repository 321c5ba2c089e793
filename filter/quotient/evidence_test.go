package quotient

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adaptkv/adaptkv/internal/filtertest"
)

// Tests that reproduce the evidence of the TAF paper (Lee, McCauley, Singh,
// Stein): sustained false-positive rate, repeated queries, the adversarial
// stream of section 6.1, and space. Run with -v for the tables; with
// -quotient.long for the full sizes.

const eps8 = 1.0 / 256 // 2^-r at the default remainder width

// negStream yields distinct absent keys (tag 9), generated on the fly.
type negStream struct {
	rng *rand.Rand
	buf [16]byte
}

func newNegStream(seed uint64) *negStream {
	s := &negStream{rng: rand.New(rand.NewPCG(seed, 99))}
	s.buf[0] = 9
	return s
}

func (s *negStream) next() []byte {
	fillRandom(s.rng, s.buf[1:])
	return s.buf[:]
}

// binomialUpper is mean + 4 standard deviations of a Binomial(trials, p).
func binomialUpper(trials int, p float64) float64 {
	mean := float64(trials) * p
	return mean + 4*math.Sqrt(mean*(1-p)) + 1
}

// TestSustainedFalsePositiveRate: on first-time queries the rate stays at
// about load*2^-r for every kind, including while the adaptive kinds adapt
// to every false positive they meet (paper, Theorem 1).
func TestSustainedFalsePositiveRate(t *testing.T) {
	n := sizeFor(20_000, 100_000, 1_000_000)
	queries := sizeFor(200_000, 2_000_000, 20_000_000)
	rng := rand.New(rand.NewPCG(41, 42))
	keys := randKeys(rng, n, 1)
	for _, kind := range allVariants {
		f, err := New(kind, keys, Options{Seed: 4242})
		require.NoError(t, err)
		// Union bound: (elements per home slot) * 2^-r.
		p := float64(f.Len()) / float64(f.(*qf).nq) * eps8
		neg := newNegStream(uint64(kind))
		fps := 0
		for i := 0; i < queries; i++ {
			k := neg.next()
			if f.MayContain(k) {
				fps++
				if kind != RSQF {
					require.NoError(t, f.Adapt(k))
				}
			}
		}
		rate := float64(fps) / float64(queries)
		t.Logf("sustained | %-4v | n=%d | queries=%d | fp rate %.5f | bound load*2^-r %.5f | adaptations %d rebuilds %d",
			kind, n, queries, rate, p, f.Stats().Adaptations, f.Stats().Rebuilds)
		require.LessOrEqual(t, float64(fps), binomialUpper(queries, p), "%v above the bound", kind)
		lower := 0.9*p*float64(queries) - 4*math.Sqrt(p*float64(queries))
		require.GreaterOrEqual(t, float64(fps), lower, "%v suspiciously low", kind)
	}
}

// TestRepeatedQueries: each of U = A/S * n absent keys is queried 10 times
// in a random interleaving. An adaptive filter pays about once per unique
// key (TAF within 1.5x of eps*U); the RSQF pays for every repetition.
func TestRepeatedQueries(t *testing.T) {
	n := sizeFor(20_000, 20_000, 100_000)
	ratios := []int{1, 2, 5, 10, 20}
	if testing.Short() {
		ratios = []int{1, 4}
	}
	const reps = 10
	rng := rand.New(rand.NewPCG(43, 44))
	keys := randKeys(rng, n, 1)
	for _, as := range ratios {
		u := as * n
		negs := randKeys(rng, u, 2)
		order := filtertest.RepeatedOrder(rng, u, reps)
		res := map[Variant]int{}
		for _, kind := range allVariants {
			f, err := New(kind, keys, Options{Seed: 777})
			require.NoError(t, err)
			fps := 0
			for _, i := range order {
				k := negs[i]
				if f.MayContain(k) {
					fps++
					if kind != RSQF {
						require.NoError(t, f.Adapt(k))
					}
				}
			}
			res[kind] = fps
			st := f.Stats()
			t.Logf("repeated | A/S=%-2d | %-4v | unique=%d queries=%d | false positives %d = %.2f x eps*unique | rebuilds %d",
				as, kind, u, len(order), fps, float64(fps)/(eps8*float64(u)), st.Rebuilds)
		}
		epsU := eps8 * float64(u)
		bound := math.Max(1.5*epsU, epsU+4*math.Sqrt(epsU))
		require.LessOrEqual(t, float64(res[TAF]), bound, "TAF at A/S=%d", as)
		require.LessOrEqual(t, float64(res[UTAF]), bound, "uTAF at A/S=%d", as)
		require.GreaterOrEqual(t, float64(res[RSQF]), 5*0.9*epsU, "RSQF must pay for repetitions at A/S=%d", as)
		require.Less(t, 3*res[TAF], res[RSQF])
	}
}

// adversarialRun plays the adversarial stream of section 6.1
// (filtertest.Adversary; the RSQF does not adapt) and returns the
// false-positive rate of the final round, its query count and the rounds.
func adversarialRun(t *testing.T, f Filter, negs [][]byte, rng *rand.Rand) (rate float64, finalQueries, rounds int) {
	fps, queries, rounds, err := filtertest.Adversary(f, f.Variant() != RSQF, f.Len(), negs, rng)
	require.NoError(t, err)
	return float64(fps) / float64(queries), queries, rounds
}

// TestAdversarial: the final-round false-positive rate of the adversarial
// stream. TAF stays below 2 eps up to |Q|/|S| = 20; the RSQF goes to 1; the
// exAF, spending the same space less efficiently, loses fixes to rebuilds.
func TestAdversarial(t *testing.T) {
	n := sizeFor(5_000, 20_000, 100_000)
	ratios := []int{1, 2, 5, 10, 20}
	switch {
	case *longTests:
		ratios = append(ratios, 50, 100)
	case testing.Short():
		ratios = []int{1, 20}
	}
	rng := rand.New(rand.NewPCG(45, 46))
	keys := randKeys(rng, n, 1)
	for _, c := range ratios {
		negs := randKeys(rng, c*n, 2)
		rates := map[Variant]float64{}
		for _, kind := range allVariants {
			f, err := New(kind, keys, Options{Seed: 31337})
			require.NoError(t, err)
			q := append([][]byte(nil), negs...)
			rate, nq, rounds := adversarialRun(t, f, q, rand.New(rand.NewPCG(uint64(c), 1)))
			rates[kind] = rate
			t.Logf("adversarial | |Q|/|S|=%-3d | %-4v | final-round fp rate %.5f (%.2f eps) over %d queries, %d rounds | rebuilds %d",
				c, kind, rate, rate/eps8, nq, rounds, f.Stats().Rebuilds)
			switch kind {
			case RSQF:
				require.Greater(t, rate, 0.99, "RSQF keeps answering yes to its false positives")
			case TAF, UTAF:
				if c <= 20 {
					limit := 2*eps8 + 4*math.Sqrt(2*eps8/float64(nq))
					require.LessOrEqual(t, rate, limit, "%v at |Q|/|S|=%d", kind, c)
				}
			}
		}
		if c >= 20 {
			require.Greater(t, rates[ExAF], rates[TAF], "exAF should lose more fixes than TAF at |Q|/|S|=%d", c)
		}
	}
}

// TestBitsPerKey: local state of TAF and exAF at 8-bit remainders and load
// 0.95 is (log2(1/eps) + 3) / alpha <= 11.6 bits per key.
func TestBitsPerKey(t *testing.T) {
	n := sizeFor(100_000, 1_000_000, 1_000_000)
	rng := rand.New(rand.NewPCG(47, 48))
	keys := randKeys(rng, n, 1)
	for _, kind := range allVariants {
		f, err := New(kind, keys, Options{Seed: 1})
		require.NoError(t, err)
		bpk := f.BitsPerKey()
		t.Logf("space | %-4v | n=%d | %.3f bits/key | %d bytes | %d slots", kind, n, bpk, f.SizeBytes(), f.Slots())
		require.Equal(t, f.SizeBytes()*8, int(math.Round(bpk*float64(f.Len()))))
		switch kind {
		case TAF, ExAF, RSQF:
			require.LessOrEqual(t, bpk, 11.6)
			require.Greater(t, bpk, 11.0)
		case UTAF:
			require.Greater(t, bpk, 11.6+7) // a plain byte per slot
		}
	}
	f, err := New(TAF, keys[:1000], Options{RemainderBits: 12, LoadFactor: 0.9, Seed: 1})
	require.NoError(t, err)
	require.InDelta(t, (12.0+3)/0.9, f.BitsPerKey(), 1.0, fmt.Sprint("r=12 alpha=0.9"))
}

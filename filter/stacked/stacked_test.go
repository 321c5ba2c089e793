package stacked

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/stretchr/testify/require"
)

var long = flag.Bool("stacked.long", false, "run the large (n = 1M) model checks")

func posKey(i int) []byte { return fmt.Appendf(nil, "key%010d", 2*i) }
func negKey(i int) []byte { return fmt.Appendf(nil, "key%010d", 2*i+1) }

// absentKey is the a-th absent key: inside the positives' range (odd
// numbers below 2n, with a suffix for a >= n).
func absentKey(n, a int) []byte {
	if a < n {
		return negKey(a)
	}
	return fmt.Appendf(nil, "key%010d#%d", 2*(a%n)+1, a/n)
}

// zipfNegatives returns u absent keys spread over the positives' range
// (in a random order of ranks) with Zipfian counts
// of q queries (exponent theta), sorted by key, and the total count.
func zipfNegatives(seed uint64, n, u int, q float64, theta float64) ([]filter.KnownNegative, float64) {
	r := rand.New(rand.NewPCG(seed, 7))
	perm := r.Perm(u)
	norm := 0.0
	for rank := range u {
		norm += math.Pow(float64(rank+1), -theta)
	}
	negs := make([]filter.KnownNegative, 0, u)
	total := 0.0
	for rank, i := range perm {
		c := uint64(math.Round(q * math.Pow(float64(rank+1), -theta) / norm))
		if c == 0 {
			c = 1
		}
		total += float64(c)
		negs = append(negs, filter.KnownNegative{Key: absentKey(n, i), Count: c})
	}
	slices.SortFunc(negs, func(a, b filter.KnownNegative) int { return bytes.Compare(a.Key, b.Key) })
	return negs, total
}

func buildStack(t testing.TB, k Kind, n int, negs []filter.KnownNegative, seed uint64) (*Filter, []byte) {
	b := k.NewBuilder(filter.BuildOptions{Seed: seed, SizeHint: n, KnownNegatives: negs})
	for i := range n {
		b.Add(posKey(i))
	}
	local, remote, err := b.Finish()
	require.NoError(t, err)
	require.Nil(t, remote)
	f, err := k.Decode(k.Params(), seed, local, filter.NoRemote{})
	require.NoError(t, err)
	return f.(*Filter), local
}

// No false negatives: every stored key, for every forced number of layers,
// with known negatives in range, stored, and out of range; after build
// (the builder's own filter) and after decoding.
func TestNoFalseNegatives(t *testing.T) {
	n := 150_000
	if testing.Short() {
		n = 40_000
	}
	negs, _ := zipfNegatives(1, n, n/2, 1e6, 1.0)
	// Stored keys and keys outside the range among the known negatives.
	for i := 0; i < n; i += 97 {
		negs = append(negs, filter.KnownNegative{Key: posKey(i), Count: 1000})
	}
	negs = append(negs, filter.KnownNegative{Key: []byte("a"), Count: 1 << 20}, filter.KnownNegative{Key: []byte("z"), Count: 1 << 20})
	slices.SortFunc(negs, func(a, b filter.KnownNegative) int { return bytes.Compare(a.Key, b.Key) })
	for _, layers := range []int{0, 1, 3, 5} {
		k := Kind{layers: layers}
		f, _ := buildStack(t, k, n, negs, 42)
		if layers != 0 {
			require.LessOrEqual(t, f.Layers(), layers)
		}
		for i := range n {
			if !f.MayContain(posKey(i)) {
				t.Fatalf("layers=%d: stored key %d answered absent", layers, i)
			}
		}
		t.Logf("layers=%d (built %d): %.2f bits/key", layers, f.Layers(), f.BitsPerKey())
	}
}

// The known negatives' false-positive rate falls with the number of layers
// as equation (1) says (the product of the positive layers' rates), and
// unknown negatives see about the first layer's rate, for Zipfian query
// counts (theta 0.75, 1, 1.25) at 12 bits/key. Measured rates are checked
// against the planned ones with a binomial tolerance of 4 standard
// deviations plus 30% for the Bloom layers' rounding of k.
func TestFalsePositivesFollowTheModel(t *testing.T) {
	n, u := 100_000, 200_000
	if *long {
		n, u = 1_000_000, 2_000_000
	} else if testing.Short() {
		n, u = 30_000, 60_000
	}
	within := func(t *testing.T, what string, fp, trials int, want float64) {
		got := float64(fp) / float64(trials)
		sd := math.Sqrt(want * (1 - want) / float64(trials))
		hi := 1.3*want + 4*sd + 3/float64(trials)
		t.Logf("%s: %d of %d = %.3g (planned %.3g)", what, fp, trials, got, want)
		require.LessOrEqual(t, got, hi, what)
		if want*float64(trials) > 50 {
			require.GreaterOrEqual(t, got, 0.7*want-4*sd, what)
		}
	}
	unknown := func(f *Filter) (fp, trials int) {
		for i := range n {
			if f.MayContain(fmt.Appendf(nil, "key%010d!", 2*i+1)) { // never a known negative
				fp++
			}
		}
		return fp, n
	}
	for _, theta := range []float64{0.75, 1.0, 1.25} {
		negs, _ := zipfNegatives(uint64(theta*100), n, u, 100*float64(u), theta)
		var prev float64 = 2
		for _, layers := range []int{1, 3, 5} {
			t.Run(fmt.Sprintf("theta=%.2f/layers=%d", theta, layers), func(t *testing.T) {
				k := Kind{layers: layers}
				f, _ := buildStack(t, k, n, negs, uint64(layers)*1000+uint64(theta*100))
				counts := make([]uint64, len(negs))
				order := filter.MostCounted(negs)
				for i, j := range order {
					counts[i] = negs[j].Count
				}
				p := planFor(n, DefaultBitsPerKey, counts, layers)
				known := 1.0
				for i := 0; i < len(p.alphas); i += 2 {
					known *= p.alphas[i]
				}
				// The known negatives the plan used: the most counted.
				fp := 0
				for _, j := range order[:max(p.negatives, 1)] {
					if f.MayContain(negs[j].Key) {
						fp++
					}
				}
				if layers == 1 {
					fp = 0
					for _, e := range negs {
						if f.MayContain(e.Key) {
							fp++
						}
					}
					within(t, "known negatives", fp, len(negs), known)
				} else {
					within(t, "known negatives", fp, max(p.negatives, 1), known)
				}
				ufp, ut := unknown(f)
				want := p.alphas[0]
				if len(p.alphas) > 1 {
					want *= 1 - p.alphas[1]
				}
				within(t, "unknown negatives", ufp, ut, want)
				require.LessOrEqual(t, known, prev, "the planned known-negative rate falls with the layers")
				prev = known
				t.Logf("plan: rates %.3g, %d known negatives, psi %.2f, EFPR %.3g; %.2f bits/key",
					p.alphas, p.negatives, p.psi, p.efpr, f.BitsPerKey())
			})
		}
	}
}

// The planner's choice, at equal bits per key, is never worse than one
// layer by its own measure, and uses more layers the more skewed the
// known negatives are.
func TestPlannerPicksLayers(t *testing.T) {
	n := 100_000
	one := planFor(n, 12, nil, 0)
	require.Len(t, one.alphas, 1, "no known negatives: one layer")
	require.InDelta(t, 0.00314, one.alphas[0], 0.0001, "12 bits/key Bloom")
	for _, theta := range []float64{0.75, 1.25} {
		negs, _ := zipfNegatives(3, n, 2*n, 1e7, theta)
		counts := make([]uint64, len(negs))
		for i, j := range filter.MostCounted(negs) {
			counts[i] = negs[j].Count
		}
		p := planFor(n, 12, counts, 0)
		t.Logf("theta %.2f: %d layers, rates %.3g, %d negatives, EFPR %.3g (one layer %.3g)", theta, len(p.alphas), p.alphas, p.negatives, p.efpr, one.efpr)
		require.Greater(t, len(p.alphas), 1)
		require.Less(t, p.efpr, one.efpr)
		require.LessOrEqual(t, stackBits(p.alphas, float64(n), float64(p.negatives)), 12*float64(n)*1.0001)
	}
}

// The filter stays within its budget (the planner sizes layers for the
// expected sets; the built sets are close to them).
func TestBitsPerKeyWithinBudget(t *testing.T) {
	n := 50_000
	negs, _ := zipfNegatives(4, n, n, 1e6, 1.0)
	for _, bits := range []int{8, 12, 16} {
		k, err := Kind{}.Configure(filter.Options{BitsPerKey: bits})
		require.NoError(t, err)
		f, _ := buildStack(t, k.(Kind), n, negs, 5)
		require.LessOrEqual(t, f.BitsPerKey(), float64(bits)*1.05, "bits %d", bits)
		require.GreaterOrEqual(t, f.BitsPerKey(), float64(bits)*0.9, "bits %d", bits)
		plain, _ := buildStack(t, k.(Kind), n, nil, 5)
		require.Equal(t, 1, plain.Layers(), "no known negatives: one layer")
	}
}

func TestSmallAndEdgeSets(t *testing.T) {
	k := Kind{}
	for _, n := range []int{0, 1, 2, 10} {
		f, _ := buildStack(t, k, n, []filter.KnownNegative{{Key: negKey(0), Count: 5}}, 9)
		for i := range n {
			require.True(t, f.MayContain(posKey(i)))
		}
	}
	// Every known negative out of range: one layer.
	out := []filter.KnownNegative{{Key: []byte("a"), Count: 100}, {Key: []byte("zz"), Count: 100}}
	f, _ := buildStack(t, k, 1000, out, 9)
	require.Equal(t, 1, f.Layers())
	// Every known negative stored: one layer.
	stored := []filter.KnownNegative{{Key: posKey(3), Count: 100}, {Key: posKey(500), Count: 100}}
	f, _ = buildStack(t, k, 1000, stored, 9)
	require.Equal(t, 1, f.Layers())
}

func TestConfigure(t *testing.T) {
	for _, bad := range []int{-1, 1, 3, 65} {
		_, err := Kind{}.Configure(filter.Options{BitsPerKey: bad})
		require.ErrorIs(t, err, filter.ErrInvalidOptions, "bits %d", bad)
	}
	k, err := Kind{}.Configure(filter.Options{})
	require.NoError(t, err)
	require.Equal(t, uint32(DefaultBitsPerKey), k.Params().P1)
	require.Equal(t, "stacked", k.Name())
	require.Equal(t, filter.CodeStacked, k.Code())
	require.False(t, k.Adaptive())
}

func TestDecodeRejectsDamage(t *testing.T) {
	negs, _ := zipfNegatives(6, 5000, 5000, 1e5, 1.0)
	_, local := buildStack(t, Kind{}, 5000, negs, 11)
	for cut := 0; cut < len(local); cut += max(1, len(local)/97) {
		_, err := Kind{}.Decode(filter.Params{}, 11, local[:cut], nil)
		require.ErrorIs(t, err, filter.ErrCorrupt, "cut at %d", cut)
	}
	_, err := Kind{}.Decode(filter.Params{}, 11, append(append([]byte{}, local...), 0), nil)
	require.ErrorIs(t, err, filter.ErrCorrupt, "trailing byte")
	for _, off := range []int{0, 1, 10, 18} { // version, layer count, first layer's m and k
		b := append([]byte{}, local...)
		b[off] ^= 0xff
		_, err := Kind{}.Decode(filter.Params{}, 11, b, nil)
		require.ErrorIs(t, err, filter.ErrCorrupt, "byte %d", off)
	}
}

func FuzzDecode(f *testing.F) {
	negs, _ := zipfNegatives(7, 300, 300, 1e4, 1.0)
	b := Kind{}.NewBuilder(filter.BuildOptions{Seed: 3, KnownNegatives: negs})
	for i := range 300 {
		b.Add(posKey(i))
	}
	local, _, _ := b.Finish()
	f.Add(local)
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		flt, err := Kind{}.Decode(filter.Params{}, 3, data, nil)
		if err != nil {
			require.ErrorIs(t, err, filter.ErrCorrupt)
			return
		}
		flt.MayContain([]byte("x"))
		require.Equal(t, data, flt.(*Filter).appendTo(nil), "what decodes re-encodes to itself")
	})
}

func BenchmarkStacked(b *testing.B) {
	const n = 200_000
	negs, _ := zipfNegatives(8, n, n, 1e7, 1.0)
	keys := make([][]byte, n)
	absent := make([][]byte, n)
	for i := range keys {
		keys[i], absent[i] = posKey(i), fmt.Appendf(nil, "key%010d!", i)
	}
	for _, withNegs := range []bool{false, true} {
		kn := negs
		if !withNegs {
			kn = nil
		}
		name := fmt.Sprintf("negatives=%v", withNegs)
		b.Run(name+"/build", func(b *testing.B) {
			for b.Loop() {
				bl := Kind{}.NewBuilder(filter.BuildOptions{Seed: 1, SizeHint: n, KnownNegatives: kn})
				for _, k := range keys {
					bl.Add(k)
				}
				if _, _, err := bl.Finish(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/key")
		})
		f, _ := buildStack(b, Kind{}, n, kn, 1)
		b.Run(name+"/query-absent", func(b *testing.B) {
			fp := 0
			for i := 0; b.Loop(); i++ {
				if f.MayContain(absent[i%n]) {
					fp++
				}
			}
			b.ReportMetric(float64(fp)/float64(b.N), "fp")
			b.ReportMetric(f.BitsPerKey(), "bits/key")
		})
		b.Run(name+"/query-present", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if !f.MayContain(keys[i%n]) {
					b.Fatal("false negative")
				}
			}
		})
	}
}

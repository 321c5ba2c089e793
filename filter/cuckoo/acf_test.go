package cuckoo

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/stretchr/testify/require"
)

var (
	long       = flag.Bool("acf.long", false, "run the Figure 1 experiment at full size")
	longN      = flag.Int("acf.n", 0, "with -acf.long: the number of stored keys (default 100000)")
	longF      = flag.Int("acf.f", 0, "with -acf.long: one fingerprint width instead of 8, 12 and 16")
	ratiosFlag = flag.String("acf.ratios", "", "with -acf.long: comma-separated |A|/|S| values instead of 1,3,5,10,20 (the paper goes to 50 and 100)")
	seedsFlag  = flag.Int("acf.seeds", 3, "with -acf.long: seeds per point (more for f = 16, whose runs see few false positives)")
)

func key(i int) []byte    { return fmt.Appendf(nil, "key%010d", 2*i) }
func absent(i int) []byte { return fmt.Appendf(nil, "key%010d", 2*i+1) }

var allKinds = []Kind{CuckooingKind, CyclicKind, SwappingKind}

func build(t testing.TB, k Kind, n int, seed uint64) (*Filter, filter.MemRemote) {
	b := k.NewBuilder(filter.BuildOptions{Seed: seed, SizeHint: n, WithRemote: true})
	for i := range n {
		b.Add(key(i))
	}
	local, remote, err := b.Finish()
	require.NoError(t, err)
	f, err := k.Decode(k.Params(), seed, local, filter.MemRemote(remote))
	require.NoError(t, err)
	return f.(*Filter), remote
}

func configured(t testing.TB, k Kind, o filter.Options) Kind {
	c, err := k.Configure(o)
	require.NoError(t, err)
	return c.(Kind)
}

func noFalseNegatives(t *testing.T, f *Filter, n int, when string) {
	t.Helper()
	for i := range n {
		if !f.MayContain(key(i)) {
			t.Fatalf("%s: stored key %d answered absent", when, i)
		}
	}
}

// No false negatives after build, after many fixes (every false positive of
// a stream of absent keys fixed), and after encode and decode.
func TestNoFalseNegatives(t *testing.T) {
	n, queries := 100_000, 1_000_000
	if testing.Short() {
		n, queries = 20_000, 200_000
	}
	for _, k := range allKinds {
		t.Run(k.Name(), func(t *testing.T) {
			f, remote := build(t, k, n, 7)
			noFalseNegatives(t, f, n, "after build")
			r := rand.New(rand.NewPCG(1, 2))
			fixed := 0
			for range queries {
				q := absent(r.IntN(4 * n))
				if f.MayContain(q) {
					require.NoError(t, f.Adapt(q))
					fixed++
				}
			}
			noFalseNegatives(t, f, n, "after fixes")
			local, err := f.MarshalBinary()
			require.NoError(t, err)
			g, err := k.Decode(k.Params(), 7, local, remote)
			require.NoError(t, err)
			noFalseNegatives(t, g.(*Filter), n, "after decode")
			st := f.Stats()
			t.Logf("%d fixes, %d adaptations, %d rebuilds, %d remote reads, %.2f bits/key, aux %d bytes",
				fixed, st.Adaptations, st.Rebuilds, st.RemoteReads, f.BitsPerKey(), f.AuxBytes())
			require.Positive(t, st.Adaptations)
		})
	}
}

// The first-time false-positive rate is within the union bound of section
// 2.2: k*b comparisons, each matching an occupied slot's fingerprint with
// probability 1/(2^w - 1), w the fingerprint bits (f, or f-s with
// selectors). Tolerance: 4 binomial standard deviations.
func TestFirstTimeFalsePositiveRate(t *testing.T) {
	n, q := 100_000, 1_000_000
	if testing.Short() {
		n, q = 20_000, 200_000
	}
	for _, k := range allKinds {
		for _, fb := range []int{8, 12, 16} {
			c := configured(t, k, filter.Options{FingerprintBits: fb})
			f, _ := build(t, c, n, 11)
			fp := 0
			for i := range q {
				if f.MayContain(fmt.Appendf(nil, "other%d", i)) {
					fp++
				}
			}
			p := f.p
			occ := float64(n) / float64(p.slots())
			bound := float64(p.k*p.b) * occ / (math.Exp2(float64(p.f-p.s)) - 1)
			rate := float64(fp) / float64(q)
			t.Logf("%s f=%d: %.5f (bound %.5f), %.2f bits/key", k.Name(), fb, rate, bound, f.BitsPerKey())
			require.LessOrEqual(t, rate, bound+4*math.Sqrt(bound/float64(q))+2/float64(q))
			require.InDelta(t, float64(fb)/loadFactor, f.BitsPerKey(), 0.1, "bits per key at 95%% load")
		}
	}
}

// Fixed false positives stay fixed: a second round over the same absent
// keys meets a small fraction of the first round's false positives.
func TestRepeatedQueriesAdapt(t *testing.T) {
	n := 50_000
	for _, k := range allKinds {
		f, _ := build(t, k, n, 3)
		round := func() int {
			fp := 0
			for i := range 2 * n {
				q := absent(i)
				if f.MayContain(q) {
					fp++
					require.NoError(t, f.Adapt(q))
				}
			}
			return fp
		}
		first, second := round(), round()
		t.Logf("%s: round 1 %d false positives, round 2 %d", k.Name(), first, second)
		require.Positive(t, first)
		require.LessOrEqual(t, second, first/3, k.Name())
	}
}

// A remote that fails leaves the filter as it was and says so.
func TestRemoteFailure(t *testing.T) {
	for _, k := range allKinds {
		f, remote := build(t, k, 20_000, 5)
		g, err := k.Decode(k.Params(), 5, mustMarshal(t, f), filter.NoRemote{})
		require.NoError(t, err)
		var fps [][]byte
		for i := 0; len(fps) < 20; i++ {
			if g.MayContain(absent(i)) {
				fps = append(fps, absent(i))
			}
		}
		before := mustMarshal(t, g.(*Filter))
		for _, q := range fps {
			err := g.(*Filter).Adapt(q)
			require.ErrorIs(t, err, filter.ErrRemote)
			require.True(t, g.MayContain(q), "unchanged")
		}
		require.Equal(t, before, mustMarshal(t, g.(*Filter)))
		// An inconsistent remote (another table's) is detected, not trusted.
		wrong := make(filter.MemRemote, len(remote))
		for i := range wrong {
			wrong[i] = uint64(i) + 12345
		}
		h, err := k.Decode(k.Params(), 5, mustMarshal(t, f), wrong)
		require.NoError(t, err)
		require.ErrorIs(t, h.(*Filter).Adapt(fps[0]), filter.ErrRemote)
	}
}

func mustMarshal(t *testing.T, f *Filter) []byte {
	b, err := f.MarshalBinary()
	require.NoError(t, err)
	return b
}

// Readers of stored keys never see a false negative while fixers move,
// re-fingerprint and swap elements. Run with -race.
func TestConcurrentFixes(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 5_000
	}
	for _, k := range allKinds {
		f, _ := build(t, k, n, 9)
		var stop atomic.Bool
		var wg sync.WaitGroup
		var bad atomic.Int64
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 3))
				for !stop.Load() {
					if !f.MayContain(key(r.IntN(n))) {
						bad.Add(1)
					}
				}
			}()
		}
		for i := range 40 * n {
			q := absent(i % (8 * n))
			if f.MayContain(q) {
				require.NoError(t, f.Adapt(q))
			}
		}
		stop.Store(true)
		wg.Wait()
		require.Zero(t, bad.Load(), k.Name())
		noFalseNegatives(t, f, n, k.Name())
	}
}

func TestConfigure(t *testing.T) {
	bad := []filter.Options{{FingerprintBits: 3}, {FingerprintBits: 17}, {LoadFactor: 0.9}}
	for _, k := range allKinds {
		for _, o := range bad {
			_, err := k.Configure(o)
			require.ErrorIs(t, err, filter.ErrInvalidOptions, "%s %+v", k.Name(), o)
		}
	}
	_, err := CuckooingKind.Configure(filter.Options{SelectorBits: 1})
	require.ErrorIs(t, err, filter.ErrInvalidOptions)
	_, err = CyclicKind.Configure(filter.Options{SelectorBits: 4})
	require.ErrorIs(t, err, filter.ErrInvalidOptions)
	c := configured(t, CyclicKind, filter.Options{FingerprintBits: 12, SelectorBits: 2})
	require.Equal(t, filter.Params{P1: 12, P2: 2}, c.Params())
	require.Equal(t, filter.Params{P1: DefaultFingerprintBits}, CuckooingKind.Params())
	require.Equal(t, []string{"acf", "acf-cyclic", "acf-swap"}, []string{CuckooingKind.Name(), CyclicKind.Name(), SwappingKind.Name()})
}

func TestDecodeRejectsDamage(t *testing.T) {
	for _, k := range allKinds {
		f, remote := build(t, k, 3000, 1)
		for q := range 3000 { // some overlay entries
			if f.MayContain(absent(q)) {
				require.NoError(t, f.Adapt(absent(q)))
			}
		}
		local := mustMarshal(t, f)
		for cut := 0; cut < len(local); cut += max(1, len(local)/50) {
			_, err := k.Decode(k.Params(), 1, local[:cut], remote)
			require.ErrorIs(t, err, filter.ErrCorrupt, "%s cut %d", k.Name(), cut)
		}
		for _, off := range []int{0, 1, 2, 3, 4, 7} {
			b := append([]byte{}, local...)
			b[off] ^= 0xff
			_, err := k.Decode(k.Params(), 1, b, remote)
			require.ErrorIs(t, err, filter.ErrCorrupt, "%s byte %d", k.Name(), off)
		}
	}
	f, _ := build(t, CuckooingKind, 100, 1)
	_, err := CyclicKind.Decode(filter.Params{}, 1, mustMarshal(t, f), nil)
	require.ErrorIs(t, err, filter.ErrCorrupt, "another variant's state")
}

func FuzzDecode(f *testing.F) {
	for _, k := range allKinds {
		flt, _ := build(f, k, 200, 2)
		b, _ := flt.MarshalBinary()
		f.Add(uint8(k.variant), b)
	}
	f.Fuzz(func(t *testing.T, v uint8, data []byte) {
		k := allKinds[int(v)%len(allKinds)]
		flt, err := k.Decode(filter.Params{}, 2, data, filter.NoRemote{})
		if err != nil {
			require.ErrorIs(t, err, filter.ErrCorrupt)
			return
		}
		flt.MayContain([]byte("x"))
		if err := flt.(*Filter).Adapt([]byte("y")); err != nil && !errors.Is(err, filter.ErrRemote) {
			t.Fatalf("Adapt: %v", err)
		}
	})
}

// zipfQueries returns m queries over u absent keys, Zipfian (exponent
// 1.1) or uniform.
func zipfQueries(seed uint64, u, m int, zipf bool) [][]byte {
	r := rand.New(rand.NewPCG(seed, 5))
	z := rand.NewZipf(r, 1.1, 1, uint64(u-1))
	perm := r.Perm(u)
	out := make([][]byte, m)
	for i := range out {
		j := r.IntN(u)
		if zipf {
			j = perm[z.Uint64()]
		}
		out[i] = fmt.Appendf(nil, "flow%09d", j)
	}
	return out
}

// falsePositives runs queries against a fresh filter of kind k over n
// keys, fixing each false positive, and returns how many there were.
func falsePositives(t testing.TB, k Kind, n int, queries [][]byte, seed uint64) int {
	f, _ := build(t, k, n, seed)
	fp := 0
	for _, q := range queries {
		if f.MayContain(q) {
			fp++
			if err := f.Adapt(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	return fp
}

// The Figure 1 trend (section 4): at equal space, the Cuckooing ACF pays
// fewer false positives than the Cyclic ACF (s = 1, one fingerprint bit
// less) and the Swapping ACF (twice the comparisons). Queries are
// |A|/|S| x n draws over |A| absent keys, Zipfian or uniform; each point
// the mean of 3 seeds (-acf.seeds). The default run is small; -acf.long
// runs n = 100k, f = 8, 12, 16 and |A|/|S| up to 20 (75 s); -acf.n,
// -acf.f and -acf.ratios pick other points (the paper's n = 1M with
// |A|/|S| up to 100).
func TestFigure1Trend(t *testing.T) {
	ns, fs, ratios, seeds := []int{20_000}, []int{8}, []int{1, 5}, uint64(3)
	if *long {
		ns, fs, ratios = []int{100_000}, []int{8, 12, 16}, []int{1, 3, 5, 10, 20}
		if *longN > 0 {
			ns = []int{*longN}
		}
		if *longF > 0 {
			fs = []int{*longF}
		}
		if *ratiosFlag != "" {
			ratios = nil
			for _, r := range strings.Split(*ratiosFlag, ",") {
				v, err := strconv.Atoi(strings.TrimSpace(r))
				require.NoError(t, err, "-acf.ratios")
				require.Positive(t, v, "-acf.ratios")
				ratios = append(ratios, v)
			}
		}
		require.Positive(t, *seedsFlag, "-acf.seeds")
		seeds = uint64(*seedsFlag)
	}
	for _, n := range ns {
		for _, fb := range fs {
			for _, zipf := range []bool{true, false} {
				for _, ratio := range ratios {
					var sums [3]float64
					for seed := uint64(1); seed <= seeds; seed++ {
						qs := zipfQueries(seed, ratio*n, ratio*n, zipf)
						for i, k := range allKinds {
							sums[i] += float64(falsePositives(t, configured(t, k, filter.Options{FingerprintBits: fb}), n, qs, seed))
						}
					}
					nseeds := float64(seeds)
					t.Logf("n=%d f=%d zipf=%v |A|/|S|=%d seeds=%d: mean false positives cuckooing %.1f, cyclic %.1f (%.2fx), swapping %.1f (%.2fx)",
						n, fb, zipf, ratio, seeds, sums[0]/nseeds, sums[1]/nseeds, sums[1]/math.Max(sums[0], 1), sums[2]/nseeds, sums[2]/math.Max(sums[0], 1))
					// The paper's trend, as docs/BENCHMARKS.md states it: the other
					// two pay at least 1.5x the Cuckooing ACF's false
					// positives (1.7-2.0x measured) on the default run's
					// fixed seeds. The long run's f = 16 counts only 1 to 32
					// per run, too few for a ratio: there it must only pay
					// the fewest.
					if sums[0] >= 30 {
						factor := 1.5
						if *long {
							factor = 1.0
						}
						require.GreaterOrEqual(t, math.Min(sums[1], sums[2]), factor*sums[0], "cuckooing pays the fewest")
					}
				}
			}
		}
	}
}

func BenchmarkACF(b *testing.B) {
	const n = 1 << 20
	keys := make([][]byte, n)
	others := make([][]byte, n)
	for i := range keys {
		keys[i], others[i] = key(i), fmt.Appendf(nil, "other%d", i)
	}
	for _, k := range allKinds {
		b.Run(k.Name()+"/build", func(b *testing.B) {
			for b.Loop() {
				bl := k.NewBuilder(filter.BuildOptions{Seed: 1, SizeHint: n})
				for _, key := range keys {
					bl.Add(key)
				}
				if _, _, err := bl.Finish(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/key")
		})
		f, _ := build(b, k, n, 1)
		b.Run(k.Name()+"/query-absent", func(b *testing.B) {
			fp := 0
			for i := 0; b.Loop(); i++ {
				if f.MayContain(others[i&(n-1)]) {
					fp++
				}
			}
			b.ReportMetric(float64(fp)/float64(b.N), "fp")
			b.ReportMetric(f.BitsPerKey(), "bits/key")
		})
		b.Run(k.Name()+"/query-present", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if !f.MayContain(keys[i&(n-1)]) {
					b.Fatal("false negative")
				}
			}
		})
		b.Run(k.Name()+"/adapt", func(b *testing.B) {
			var fps [][]byte
			for i := 0; len(fps) < 4096; i++ {
				q := fmt.Appendf(nil, "probe%d", i)
				if f.MayContain(q) {
					fps = append(fps, q)
				}
			}
			for i := 0; b.Loop(); i++ {
				_ = f.Adapt(fps[i%len(fps)])
			}
		})
	}
}

// TestMutuallyUnfixableSet shows the ACF paper's lower bound (section 5.2,
// Theorem 12) on the Cuckooing ACF: for a stored element x, a set of k
// queries, one colliding with x in each of its k tables (same bin and
// fingerprint), is "mutually unfixable": whichever table x is in, one of
// them is a false positive, and fixing it moves x to the table where the
// next one collides. Asked in turn, every query is a false positive,
// forever: the adversary wins the adaptivity game. (The paper's adversary
// finds such sets by querying alone, a birthday search over O(n) queries;
// at our fingerprint widths it needs far more keys than a test can store,
// so the test builds the set knowing the hashes.) A taf or aprefix fix
// instead grows what the filter stores for the colliding slot (a longer
// selector code or extension), which a set of queries would have to match
// in ever more bits.
func TestMutuallyUnfixableSet(t *testing.T) {
	const n, seed = 2000, 77
	k := configured(t, CuckooingKind, filter.Options{FingerprintBits: 8})
	f, _ := build(t, k, n, seed)
	x := key(0)
	hx := elementHash(f.seed, x)
	st := f.st.Load()
	i := f.p.lookup(st, hx)
	require.GreaterOrEqual(t, i, 0)
	home := i / (f.p.bins * f.p.b) // x's table now

	// One query per table that collides with x there: bin and fingerprint.
	r := rand.New(rand.NewPCG(5, 6))
	queries := make([][]byte, f.p.k)
	for tb := range f.p.k {
		for tries := 0; ; tries++ {
			require.Less(t, tries, 1<<26, "no collision found for table %d", tb)
			q := fmt.Appendf(nil, "adversary-%d-%d", tb, r.Uint64())
			hq := elementHash(f.seed, q)
			if f.p.loc(st.salt, hq, tb) == f.p.loc(st.salt, hx, tb) && f.p.fp(hq, 0) == f.p.fp(hx, 0) {
				queries[tb] = q
				break
			}
		}
	}
	const rounds = 50
	fps := 0
	for round := range rounds {
		for j := range f.p.k {
			q := queries[(home+j)%f.p.k]
			if f.MayContain(q) {
				fps++
				require.NoError(t, f.Adapt(q), "round %d", round)
			}
		}
	}
	t.Logf("Cuckooing ACF, n=%d, 8-bit slots: %d false positives in %d queries of a mutually unfixable set of %d (%d fixes, %d rebuilds)",
		n, fps, rounds*f.p.k, f.p.k, f.Stats().Adaptations, f.Stats().Rebuilds)
	// A rebuild (a new salt) would scatter the set; short of one, every
	// query is a false positive.
	if f.Stats().Rebuilds == 0 {
		require.Equal(t, rounds*f.p.k, fps)
	} else {
		require.Greater(t, fps, rounds)
	}
	noFalseNegatives(t, f, n, "after the adversary")
}

package ycsb

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// scaled shrinks a sample count in -short mode (CI runs -race -short).
func scaled(n int) int {
	if testing.Short() {
		return n / 5
	}
	return n
}

func newRng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed+1)) }

func TestFNVHash64MatchesYCSB(t *testing.T) {
	// FNV-1a over 8 zero bytes, by hand: each step h = (h ^ 0) * prime.
	h := uint64(fnvOffset64)
	for i := 0; i < 8; i++ {
		h *= fnvPrime64
	}
	if int64(h) < 0 {
		h = uint64(-int64(h))
	}
	require.Equal(t, h, FNVHash64(0))
	require.NotEqual(t, FNVHash64(1), FNVHash64(2))
	require.True(t, bytes.HasPrefix(Key(7), []byte("user")))
	require.Less(t, int64(FNVHash64(12345)), int64(math.MaxInt64))
	require.GreaterOrEqual(t, int64(FNVHash64(12345)), int64(0))
}

func TestAbsentKeysSortBetweenStoredKeys(t *testing.T) {
	var keys [][]byte
	for i := uint64(0); i < 2000; i++ {
		keys = append(keys, Key(i))
	}
	sort.Slice(keys, func(a, b int) bool { return bytes.Compare(keys[a], keys[b]) < 0 })
	for i := uint64(0); i < 2000; i++ {
		a := AbsentKey(i, "w")
		j := sort.Search(len(keys), func(x int) bool { return bytes.Compare(keys[x], a) >= 0 })
		// The absent key sorts right after its stored key: the stored key is
		// its predecessor and it is not stored.
		require.Greater(t, j, 0)
		require.Equal(t, Key(i), keys[j-1], "absent key %q", a)
		if j < len(keys) {
			require.NotEqual(t, a, keys[j])
		}
	}
	require.NotEqual(t, AbsentKey(1, "a"), AbsentKey(1, "b"))
}

// TestZipfianRankFrequency checks the head exactly and the tail's slope:
// P(rank 0) = 1/ζ(n) (exact in Gray's method) within 4 binomial sigma, and a
// least-squares fit of log frequency against log rank over ranks 3..300 has
// slope -θ within 0.03.
func TestZipfianRankFrequency(t *testing.T) {
	for _, theta := range []float64{0.99, 0.8} {
		const n = 10_000
		samples := scaled(2_000_000)
		z := NewZipfian(newRng(1), 0, n, theta)
		counts := make([]float64, n)
		for i := 0; i < samples; i++ {
			v := z.Next()
			require.Less(t, v, uint64(n))
			counts[v]++
		}
		p0 := 1 / Zeta(n, theta)
		sigma := math.Sqrt(float64(samples) * p0 * (1 - p0))
		require.InDelta(t, float64(samples)*p0, counts[0], 4*sigma, "theta %v rank 0", theta)
		p1 := math.Pow(2, -theta) / Zeta(n, theta)
		sigma1 := math.Sqrt(float64(samples) * p1 * (1 - p1))
		require.InDelta(t, float64(samples)*p1, counts[1], 4*sigma1, "theta %v rank 1", theta)

		var sx, sy, sxx, sxy, m float64
		for r := 3; r <= 300; r++ {
			x, y := math.Log(float64(r+1)), math.Log(counts[r])
			sx, sy, sxx, sxy, m = sx+x, sy+y, sxx+x*x, sxy+x*y, m+1
		}
		slope := (m*sxy - sx*sy) / (m*sxx - sx*sx)
		require.InDelta(t, -theta, slope, 0.03, "theta %v", theta)
	}
}

func TestZipfianGrowsItemCount(t *testing.T) {
	z := NewZipfian(newRng(2), 0, 1000, 0.99)
	for i := 0; i < 10000; i++ {
		require.Less(t, z.NextN(2000), uint64(2000))
	}
	require.InDelta(t, Zeta(2000, 0.99), z.zetan, 1e-9)
}

// TestZipfianPowerAsExpLog: NextN, computing x^alpha as exp(alpha ln x),
// draws the rank YCSB's formula with pow(x, alpha) gives for the same
// uniform draw, except in the last bits of the power: over 10^6 draws over
// YCSB's 10^10 items, at most a few ranks differ (about one in 10^7 is
// expected), and by one.
func TestZipfianPowerAsExpLog(t *testing.T) {
	z := newZipfian(newRng(9), 0, scrambledItemCount, ZipfianConstant, scrambledZetan)
	ref := newRng(9) // the same uniform draws as z's
	differ := 0
	for i := 0; i < 1_000_000; i++ {
		got := z.Next()
		u := ref.Float64()
		want := uint64(0)
		switch uz := u * z.zetan; {
		case uz < 1:
		case uz < 1+math.Pow(0.5, z.theta):
			want = 1
		default:
			want = min(uint64(float64(z.countZeta)*math.Pow(z.eta*u-z.eta+1, z.alpha)), z.countZeta-1)
		}
		if got != want {
			differ++
			require.InDelta(t, float64(want), float64(got), 1)
		}
	}
	require.LessOrEqual(t, differ, 5)
}

func BenchmarkScrambledZipfian(b *testing.B) {
	s := NewScrambledZipfian(newRng(3), 0, 500_000, ZipfianConstant)
	var sum uint64
	for b.Loop() {
		sum += s.Next()
	}
	if sum == 0 {
		b.Fatal("no draws")
	}
}

// TestScrambledZipfianSpreadsHotKeys: the hottest 100 records are spread over
// the key space (every tenth of it holds some) instead of being the smallest
// record numbers, while the distribution stays as skewed as zipfian.
func TestScrambledZipfianSpreadsHotKeys(t *testing.T) {
	const n = 100_000
	samples := scaled(1_000_000)
	s := NewScrambledZipfian(newRng(3), 0, n, ZipfianConstant)
	counts := make([]int, n)
	for i := 0; i < samples; i++ {
		v := s.Next()
		require.Less(t, v, uint64(n))
		counts[v]++
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return counts[idx[a]] > counts[idx[b]] })
	deciles := map[int]bool{}
	hot := 0
	for _, i := range idx[:100] {
		deciles[i*10/n] = true
		hot += counts[i]
	}
	require.Len(t, deciles, 10, "hot keys should cover every tenth of the key space")
	require.NotEqual(t, 0, idx[0], "hottest record should not be record 0")
	// Zipfian(0.99) over 10^10 ranks: the top 100 ranks carry
	// ζ(100)/ζ(10^10) ≈ 5.18/26.47 ≈ 19.6% of draws; hashing onto 10^5
	// records only merges ranks, so the top 100 records carry at least that.
	require.Greater(t, float64(hot)/float64(samples), 0.18)
}

func TestUniformIsFlat(t *testing.T) {
	const n, samples = 100, 200_000
	u := NewUniform(newRng(4), 10, n)
	counts := make([]float64, n)
	for i := 0; i < samples; i++ {
		v := u.Next()
		require.GreaterOrEqual(t, v, uint64(10))
		counts[v-10]++
	}
	// Chi-square with 99 degrees of freedom: mean 99, sd 14; 99+6*14 = 183.
	exp := float64(samples) / n
	chi := 0.0
	for _, c := range counts {
		chi += (c - exp) * (c - exp) / exp
	}
	require.Less(t, chi, 183.0)
}

func TestSkewedLatestFavoursRecentInserts(t *testing.T) {
	const n, samples = 100_000, 200_000
	c := NewCounter(n)
	l := NewSkewedLatest(newRng(5), c, ZipfianConstant)
	recent := 0
	for i := 0; i < samples; i++ {
		v := l.Next()
		require.Less(t, v, uint64(n))
		if v >= n-n/100 {
			recent++
		}
	}
	// P(distance < 1000) ≈ ζ(1000)/ζ(10^5) ≈ 0.6 for θ = 0.99.
	require.Greater(t, float64(recent)/samples, 0.5)

	// After inserts the newest record becomes the hottest.
	for i := 0; i < 50; i++ {
		c.Ack(c.Next())
	}
	counts := map[uint64]int{}
	for i := 0; i < samples; i++ {
		counts[l.Next()]++
	}
	best, bestN := uint64(0), 0
	for k, v := range counts {
		if v > bestN {
			best, bestN = k, v
		}
	}
	require.GreaterOrEqual(t, best, uint64(n+50-3))
}

func TestCounterAck(t *testing.T) {
	c := NewCounter(10)
	a, b, d := c.Next(), c.Next(), c.Next()
	require.Equal(t, uint64(10), a)
	require.Equal(t, uint64(11), b)
	require.Equal(t, uint64(10), c.Count())
	c.Ack(b) // 10 still in flight: 11 must not be readable yet
	require.Equal(t, uint64(10), c.Count())
	c.Ack(a)
	require.Equal(t, uint64(12), c.Count())
	c.Ack(a) // repeated: no effect
	require.Equal(t, uint64(12), c.Count())
	c.Ack(d)
	require.Equal(t, uint64(13), c.Count())
}

func TestCounterConcurrent(t *testing.T) {
	c := NewCounter(0)
	var wg sync.WaitGroup
	var early atomic.Int64 // records counted while still in flight
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				n := c.Next()
				if n < c.Count() {
					early.Add(1)
				}
				c.Ack(n)
			}
		}()
	}
	wg.Wait()
	require.Zero(t, early.Load(), "a record in flight is never counted")
	require.Equal(t, uint64(4000), c.Count())
}

func TestParseWorkload(t *testing.T) {
	w, err := Parse(strings.NewReader(`
# YCSB workload A
workload=site.ycsb.workloads.CoreWorkload
recordcount=5000
operationcount = 700
readproportion=0.5
updateproportion: 0.5
scanproportion=0
insertproportion=0
requestdistribution=zipfian
fieldlength=50
fieldcount=2
negativeproportion=0.25
! comment
`), "workloada")
	require.NoError(t, err)
	require.Equal(t, "workloada", w.Name)
	require.Equal(t, uint64(5000), w.RecordCount)
	require.Equal(t, uint64(700), w.OperationCount)
	require.Equal(t, 0.5, w.ReadProportion)
	require.Equal(t, 0.5, w.UpdateProportion)
	require.Equal(t, DistZipfian, w.RequestDistribution)
	require.Equal(t, 100, w.ValueSize())
	require.Equal(t, 0.25, w.NegativeProportion)

	bad := []string{
		"readproportion=abc",
		"readproportion=1.5",
		"readproportion=-0.1",
		"recordcount=-3",
		"recordcount=0",
		"fieldlength=0",
		"requestdistribution=hotspot",
		"negativedistribution=latest",
		"adversary=maybe",
		"zipfianconstant=1.5",
		"readproportion=0\nupdateproportion=0",
		"this line has no separator",
		"maxscanlength=x",
		"scanlengthdistribution=zipfian",
	}
	for _, b := range bad {
		_, err := Parse(strings.NewReader(b), "bad")
		require.Error(t, err, b)
		require.True(t, errors.Is(err, errBadProperty), "%q: %v", b, err)
	}
}

func TestStreamMix(t *testing.T) {
	w := defaults()
	w.ReadProportion, w.UpdateProportion, w.InsertProportion = 0.5, 0.3, 0.2
	w.NegativeProportion = 0.5
	w.RequestDistribution = DistZipfian
	c := NewCounter(1000)
	s := NewStream(&w, 1000, 100_000, c, 9)
	counts := map[OpKind]int{}
	for i := 0; i < 100_000; i++ {
		op := s.Next()
		counts[op.Kind]++
		switch op.Kind {
		case OpInsert:
			c.Ack(op.Key)
		case OpRead, OpUpdate:
			require.Less(t, op.Key, c.Count())
		case OpReadAbsent:
			require.Less(t, op.Key, uint64(1000))
		}
	}
	near := func(kind OpKind, p float64) {
		sigma := math.Sqrt(100_000 * p * (1 - p))
		require.InDelta(t, 100_000*p, float64(counts[kind]), 5*sigma, kind.String())
	}
	near(OpRead, 0.25)
	near(OpReadAbsent, 0.25)
	near(OpUpdate, 0.3)
	near(OpInsert, 0.2)
}

// testdataWorkloads is the authoritative copy of the built-in workloads.
const testdataWorkloads = "../../../../testdata/workloads"

func TestShippedWorkloadFilesParse(t *testing.T) {
	want := []string{"adversary", "churn", "mixed", "neguniform", "negzipf", "shift", "shortscan", "workloada", "workloadb", "workloadc", "workloadd", "workloade", "workloadf"}
	require.Equal(t, want, BuiltinNames())
	for _, name := range want {
		w, err := ParseFile(filepath.Join(testdataWorkloads, name))
		require.NoError(t, err, name)
		require.Equal(t, name, w.Name)
		require.Equal(t, 100, w.ValueSize())

		b, err := Builtin(name)
		require.NoError(t, err, name)
		require.Equal(t, w, b, "%s: built-in parses like the testdata file", name)
	}
	// shortscan: workload E's mix, one-row scans, uniform.
	ss, err := Builtin("shortscan")
	require.NoError(t, err)
	require.Equal(t, 1, ss.MaxScanLength)
	require.Equal(t, DistUniform, ss.RequestDistribution)
	// neguniform's absent keys hardly repeat: a universe 50x the records.
	w, err := Builtin("neguniform")
	require.NoError(t, err)
	require.Equal(t, DistUniform, w.NegativeDistribution)
	require.Equal(t, 50*w.RecordCount, w.NegativeUniverseSize(w.RecordCount))
	c, err := Builtin("c")
	require.NoError(t, err)
	require.Equal(t, "workloadc", c.Name)
	adv, err := Builtin("adversary")
	require.NoError(t, err)
	require.True(t, adv.Adversary)
	shift, err := Builtin("shift")
	require.NoError(t, err)
	churn, err := Builtin("churn")
	require.NoError(t, err)
	require.Equal(t, 0.5, shift.NegativeShift)
	shift.NegativeShift, shift.Name = 0, churn.Name
	require.Equal(t, churn, shift, "shift is churn with a shift")
}

// TestBuiltinMatchesTestdata: the embedded workloads are byte for byte the
// files in testdata/workloads, no more and no fewer.
func TestBuiltinMatchesTestdata(t *testing.T) {
	const fix = "run: go generate ./cmd/kvbench/internal/ycsb"
	entries, err := os.ReadDir(testdataWorkloads)
	require.NoError(t, err)
	var onDisk []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		onDisk = append(onDisk, e.Name())
		want, err := os.ReadFile(filepath.Join(testdataWorkloads, e.Name()))
		require.NoError(t, err)
		got, err := fs.ReadFile(BuiltinFS(), BuiltinDir+"/"+e.Name())
		require.NoError(t, err, "testdata/workloads/%s has no embedded copy; %s", e.Name(), fix)
		require.True(t, bytes.Equal(want, got), "embedded %s differs from testdata/workloads/%s; %s", e.Name(), e.Name(), fix)
	}
	require.NotEmpty(t, onDisk)
	require.Equal(t, onDisk, BuiltinNames(), "embedded set differs from testdata/workloads; %s", fix)
}

func TestBuiltinUnknown(t *testing.T) {
	for _, name := range []string{"", "g", "workloadg", "workloads", "../workloads/negzipf", "workloads/negzipf", "A"} {
		_, err := Builtin(name)
		require.ErrorIs(t, err, ErrUnknownWorkload, "%q", name)
	}
}

// negativeshift: absent reads come from the first universe until the shift,
// from a disjoint second one of the same size after it.
func TestNegativeShift(t *testing.T) {
	w, err := Parse(strings.NewReader("recordcount=1000\nreadproportion=1\nupdateproportion=0\nnegativeproportion=1\nnegativeuniverse=100\nnegativeshift=0.5\n"), "shift")
	require.NoError(t, err)
	require.Equal(t, 0.5, w.NegativeShift)
	require.Equal(t, uint64(200), w.NegativeKeySpace(1000))
	s := NewStream(w, 1000, 10_000, NewCounter(1000), 3)
	s.ShiftNegativesAfter(5000)
	for i := range 10_000 {
		op := s.Next()
		require.Equal(t, OpReadAbsent, op.Kind)
		if i < 5000 {
			require.Less(t, op.Key, uint64(100), "op %d before the shift", i)
		} else {
			require.GreaterOrEqual(t, op.Key, uint64(100), "op %d after the shift", i)
			require.Less(t, op.Key, uint64(200))
		}
	}
	noShift := defaults()
	require.Equal(t, uint64(1000), noShift.NegativeKeySpace(1000))
}

package prefix

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// makeKeys returns n distinct 16-byte keys whose first byte is tag; keys
// with different tags never collide.
func makeKeys(n int, tag byte, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, uint64(tag)))
	buf := make([]byte, 16*n)
	keys := make([][]byte, n)
	for i := range keys {
		k := buf[16*i : 16*i+16 : 16*i+16]
		binary.LittleEndian.PutUint64(k[0:], rng.Uint64())
		binary.LittleEndian.PutUint64(k[8:], uint64(i))
		k[0] = tag
		keys[i] = k
	}
	return keys
}

func requireAllPresent(t *testing.T, f *Filter, keys [][]byte) {
	t.Helper()
	for i, k := range keys {
		if !f.MayContain(k) {
			require.Failf(t, "false negative", "key %d (%x) not found", i, k)
		}
	}
}

func roundTrip(t *testing.T, f *Filter) *Filter {
	t.Helper()
	data, err := f.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, data, f.SizeBytes())
	g, err := Decode(data)
	require.NoError(t, err)
	again, err := g.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, data, again)
	return g
}

func TestNoFalseNegatives(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	keys := makeKeys(n, 's', 11)
	f, err := Build(keys)
	require.NoError(t, err)
	require.Equal(t, n, f.Len())
	requireAllPresent(t, f, keys)
	requireAllPresent(t, roundTrip(t, f), keys)
}

func TestSmallSets(t *testing.T) {
	for n := 0; n <= 300; n++ {
		keys := makeKeys(n, 's', uint64(n))
		f, err := BuildWithSeed(keys, uint64(n)*7919)
		require.NoError(t, err)
		requireAllPresent(t, f, keys)
		requireAllPresent(t, roundTrip(t, f), keys)
	}
}

func TestEmptyFilter(t *testing.T) {
	for _, keys := range [][][]byte{nil, {}} {
		f, err := Build(keys)
		require.NoError(t, err)
		require.Equal(t, 0, f.Len())
		require.Zero(t, f.BitsPerKey())
		g := roundTrip(t, f)
		for _, k := range makeKeys(20000, 'a', 3) {
			require.False(t, f.MayContain(k))
			require.False(t, g.MayContain(k))
		}
		require.False(t, f.MayContain(nil))
	}
}

func TestSingleKey(t *testing.T) {
	for _, key := range [][]byte{nil, {}, []byte("x"), make([]byte, 1<<16)} {
		f, err := Build([][]byte{key})
		require.NoError(t, err)
		require.True(t, f.MayContain(key))
		require.True(t, roundTrip(t, f).MayContain(key))
	}
	// The empty key and the nil key are the same key.
	f, err := Build([][]byte{nil})
	require.NoError(t, err)
	require.True(t, f.MayContain([]byte{}))
}

func TestDuplicateKeys(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 50_000
	}
	base := makeKeys(n, 's', 21)
	rng := rand.New(rand.NewPCG(1, 1))
	var keys [][]byte
	for _, k := range base {
		for c := rng.IntN(4); c >= 0; c-- {
			keys = append(keys, k)
		}
	}
	// One key repeated many times and two keys alternating: long bin runs.
	for i := 0; i < 50_000; i++ {
		keys = append(keys, []byte("hot"), base[i%2])
	}
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	f, err := BuildWithSeed(keys, 99)
	require.NoError(t, err)
	requireAllPresent(t, f, base)
	require.True(t, f.MayContain([]byte("hot")))
	requireAllPresent(t, roundTrip(t, f), base)

	// Every key added many times: bins hold each fingerprint once.
	same := make([][]byte, 100_000)
	for i := range same {
		same[i] = []byte("same")
	}
	f, err = BuildWithSeed(same, 5)
	require.NoError(t, err)
	require.True(t, f.MayContain([]byte("same")))
	requireAllPresent(t, roundTrip(t, f), same[:1])
}

// TestForcedOverflow drives a bin far past its capacity (hashes chosen so
// every fingerprint lands in bin 0) to exercise the prefix invariant and a
// spare holding more than n' entries.
func TestForcedOverflow(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, count := range []int{25, 26, 27, 100, 2000} {
		var hashes []uint64
		seen := map[uint64]bool{}
		for len(hashes) < count {
			fp := uint64(rng.IntN(fingerprintRange))
			if seen[fp] {
				continue
			}
			seen[fp] = true
			// A high part of 0 maps to bin 0 for any bin count.
			hashes = append(hashes, fp|uint64(rng.IntN(1<<20))<<qrBits)
		}
		f := build(hashes, 1)
		_, over, ok := validatePD(f.bins[:binBytes])
		require.True(t, ok)
		require.Equal(t, count > binCapacity, over)
		for _, h := range hashes {
			require.True(t, f.containsPacked(h), "count %d fp %d", count, h&qrMask)
		}
		g := roundTrip(t, f)
		for _, h := range hashes {
			require.True(t, g.containsPacked(h))
		}
	}
}

// build builds the filter from packed hashes.
func build(hashes []uint64, seed uint64) *Filter {
	return buildGrouped(uint64(len(hashes)), seed, func(g *grouping) {
		for _, h := range hashes {
			g.add(h)
		}
	})
}

// containsPacked is MayContain for an already packed hash.
func (f *Filter) containsPacked(h uint64) bool {
	return f.contains(binOf(h, f.numBins), h&qrMask)
}

func TestPackedHashMatchesQuery(t *testing.T) {
	keys := makeKeys(100_000, 's', 5)
	f, err := BuildWithSeed(keys, 77)
	require.NoError(t, err)
	for _, k := range makeKeys(200_000, 'a', 6) {
		require.Equal(t, f.containsPacked(packedHash(k, f.hashSeed)), f.MayContain(k))
	}
}

// fpBound is the largest acceptable false-positive rate: the 0.45%
// (the paper measures 0.37-0.39%) plus four binomial standard deviations for
// the sample size.
func fpBound(queries int) float64 {
	const p = 0.0045
	return p + 4*math.Sqrt(p*(1-p)/float64(queries))
}

func TestFalsePositiveRate(t *testing.T) {
	queries := 10_000_000
	if testing.Short() {
		queries = 1_000_000
	}
	for _, n := range []int{100_000, 1_000_000} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			keys := makeKeys(n, 's', uint64(n))
			f, err := BuildWithSeed(keys, uint64(n)+1)
			require.NoError(t, err)
			bpk := f.BitsPerKey()
			require.LessOrEqual(t, bpk, 12.0)
			// A bin table alone needs 256/23.75 = 10.78 bits per key.
			require.Greater(t, bpk, 10.78)

			fp := countFalsePositives(f, queries, 'a', uint64(n))
			rate := float64(fp) / float64(queries)
			t.Logf("n=%d bits/key=%.3f fp=%.4f%% (%d/%d) spare blocks=%d", n, bpk, 100*rate, fp, queries, f.spareBlocks)
			require.LessOrEqual(t, rate, fpBound(queries))
		})
	}
}

// absentKey fills k with the i-th key of a random stream tagged tag (keys
// with another tag than the stored keys' are absent) and returns it.
func absentKey(k *[16]byte, rng *rand.Rand, i int, tag byte) []byte {
	binary.LittleEndian.PutUint64(k[0:], rng.Uint64())
	binary.LittleEndian.PutUint64(k[8:], uint64(i))
	k[0] = tag
	return k[:]
}

// countFalsePositives queries count absent keys (tag differs from the stored
// keys' tag) and returns how many the filter accepts.
func countFalsePositives(f *Filter, count int, tag byte, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 12345))
	var k [16]byte
	fp := 0
	for i := 0; i < count; i++ {
		if f.MayContain(absentKey(&k, rng, i, tag)) {
			fp++
		}
	}
	return fp
}

func TestBuilderMatchesBuild(t *testing.T) {
	keys := makeKeys(50_000, 's', 8)
	f, err := BuildWithSeed(keys, 1234)
	require.NoError(t, err)
	want, err := f.MarshalBinary()
	require.NoError(t, err)

	b := NewBuilder(1234, 0)
	for _, k := range keys {
		b.Add(k)
	}
	require.Equal(t, len(keys), b.Len())
	g, err := b.Finish()
	require.NoError(t, err)
	got, err := g.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, want, got)

	// Finish resets the builder: the same keys again give the same bytes.
	require.Zero(t, b.Len())
	for _, k := range keys {
		b.Add(k)
	}
	h, err := b.Finish()
	require.NoError(t, err)
	again, err := h.AppendBinary([]byte("prefix"))
	require.NoError(t, err)
	require.Equal(t, []byte("prefix"), again[:6])
	require.Equal(t, want, again[6:])

	// Another seed gives another filter, and the seed is in the encoding.
	other, err := BuildWithSeed(keys, 1235)
	require.NoError(t, err)
	otherBytes, err := other.MarshalBinary()
	require.NoError(t, err)
	require.NotEqual(t, want, otherBytes)
	d, err := Decode(want)
	require.NoError(t, err)
	require.Equal(t, uint64(1234), d.Seed())
	require.Equal(t, uint64(1235), other.Seed())
}

func TestDecodedQueriesDoNotCopy(t *testing.T) {
	keys := makeKeys(10_000, 's', 4)
	f, err := BuildWithSeed(keys, 3)
	require.NoError(t, err)
	data, err := f.MarshalBinary()
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(10, func() {
		g, err := Decode(data)
		if err != nil || !g.MayContain(keys[0]) {
			panic("decode failed")
		}
	})
	require.LessOrEqual(t, allocs, 1.0, "Decode allocates only the Filter header")
	allocs = testing.AllocsPerRun(1000, func() { f.MayContain(keys[1]) })
	require.Zero(t, allocs)
}

func TestConcurrentQueries(t *testing.T) {
	keys := makeKeys(20_000, 's', 10)
	f, err := Build(keys)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(keys); i += 4 {
				if !f.MayContain(keys[i]) {
					errs <- fmt.Sprintf("key %d missing", i)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		require.Fail(t, e)
	}
}

func TestBinTableAligned(t *testing.T) {
	for _, n := range []int{0, 1, 1000, 100_000} {
		f, err := Build(makeKeys(n, 's', 1))
		require.NoError(t, err)
		require.Zero(t, addrOf(f.bins)%binBytes, "n=%d", n)
	}
}

// TestSpareLoad checks Theorem 2 of the paper on a real filter: at most
// n' = 1.1·n/sqrt(2πk) fingerprints are forwarded to the spare, and a
// negative query reaches the spare with probability at most 1/sqrt(2πk).
func TestSpareLoad(t *testing.T) {
	n := 1_000_000
	queries := 2_000_000
	if testing.Short() {
		n, queries = 200_000, 500_000
	}
	f, err := BuildWithSeed(makeKeys(n, 's', 31), 31)
	require.NoError(t, err)
	entries := binary.LittleEndian.Uint64(f.data[40:])
	require.LessOrEqual(t, entries, spareCapacity(uint64(n)))
	require.Positive(t, entries)

	rng := rand.New(rand.NewPCG(5, 5))
	var k [16]byte
	spareQueries, spareHits := 0, 0
	for i := 0; i < queries; i++ {
		binary.LittleEndian.PutUint64(k[:], rng.Uint64())
		binary.LittleEndian.PutUint64(k[8:], rng.Uint64())
		h := packedHash(k[:], f.hashSeed)
		fp, b := h&qrMask, binOf(h, f.numBins)
		if fp > pdMax(f.bins[b*binBytes:b*binBytes+binBytes]) {
			spareQueries++
			if spareContains(f.spare, f.spareBlocks, b*fingerprintRange+fp, f.spareSeed) {
				spareHits++
			}
		}
	}
	p := 1 / math.Sqrt(2*math.Pi*binCapacity)
	rate := float64(spareQueries) / float64(queries)
	t.Logf("forwarded %.2f%% of keys; %.2f%% of queries reach the spare, %.3f%% of those say maybe",
		100*float64(entries)/float64(n), 100*rate, 100*float64(spareHits)/float64(spareQueries))
	require.LessOrEqual(t, rate, p+4*math.Sqrt(p*(1-p)/float64(queries)))
	// The spare has at least 12 bits per real entry: its own rate stays low.
	require.LessOrEqual(t, float64(spareHits)/float64(spareQueries), 0.015)
}

// TestTenMillionKeys builds through a Builder (keys generated on the fly, so
// the test holds only the hashes) and checks every key. Skipped with -short.
func TestTenMillionKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("10^7 keys: run without -short")
	}
	const n = 10_000_000
	key := func(i int, k *[16]byte) []byte {
		binary.LittleEndian.PutUint64(k[0:], uint64(i)*0x9e3779b97f4a7c15)
		binary.LittleEndian.PutUint64(k[8:], uint64(i))
		return k[:]
	}
	b := NewBuilder(2024, n)
	var k [16]byte
	for i := 0; i < n; i++ {
		b.Add(key(i, &k))
	}
	f, err := b.Finish()
	require.NoError(t, err)
	require.Equal(t, n, f.Len())
	require.LessOrEqual(t, f.BitsPerKey(), 12.0)
	g := roundTrip(t, f)
	for i := 0; i < n; i++ {
		if !g.MayContain(key(i, &k)) {
			require.Failf(t, "false negative", "key %d", i)
		}
	}
	fp := countFalsePositives(g, 1_000_000, 'a', 1)
	require.LessOrEqual(t, float64(fp)/1e6, fpBound(1_000_000))
}

// TestConcurrentBuilds builds from several goroutines at once (the builds
// share a pool of scratch buffers) and compares with serial builds.
func TestConcurrentBuilds(t *testing.T) {
	const workers = 4
	want := make([][]byte, workers)
	sets := make([][][]byte, workers)
	for w := range sets {
		sets[w] = makeKeys(5000+w*3000, 's', uint64(w))
		f, err := BuildWithSeed(sets[w], uint64(w))
		require.NoError(t, err)
		want[w], err = f.MarshalBinary()
		require.NoError(t, err)
	}
	got := make([][]byte, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := 0; r < 5; r++ {
				f, err := BuildWithSeed(sets[w], uint64(w))
				if err != nil {
					return
				}
				got[w], _ = f.MarshalBinary()
				if string(got[w]) != string(want[w]) {
					return
				}
			}
		}(w)
	}
	wg.Wait()
	require.Equal(t, want, got)
}

// TestPrefixInvariant recomputes every bin from the keys' hashes with a
// plain reference (sort each bin's distinct fingerprints) and checks the
// filter against it: each bin holds exactly the smallest 25 distinct
// fingerprints mapped to it (section 4.1), is marked overflowed iff more
// were mapped, and every forwarded fingerprint is in the spare.
func TestPrefixInvariant(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 50_000
	}
	keys := makeKeys(n, 's', 77)
	keys = append(keys, keys[:n/10]...) // some duplicates
	f, err := BuildWithSeed(keys, 77)
	require.NoError(t, err)

	perBin := make([][]uint16, f.numBins)
	for _, k := range keys {
		h := packedHash(k, f.hashSeed)
		b := binOf(h, f.numBins)
		perBin[b] = append(perBin[b], uint16(h&qrMask))
	}
	forwarded := 0
	for b, fps := range perBin {
		slices.Sort(fps)
		fps = slices.Compact(fps)
		pd := f.bins[b*binBytes : b*binBytes+binBytes]
		keep := min(len(fps), binCapacity)
		require.Equal(t, fps[:keep], decodePD(pd), "bin %d", b)
		count, over, ok := validatePD(pd)
		require.True(t, ok)
		require.Equal(t, keep, count)
		require.Equal(t, len(fps) > binCapacity, over, "bin %d", b)
		for _, fp := range fps[keep:] {
			forwarded++
			require.True(t, spareContains(f.spare, f.spareBlocks, uint64(b)*fingerprintRange+uint64(fp), f.spareSeed))
		}
	}
	require.Equal(t, uint64(forwarded), binary.LittleEndian.Uint64(f.data[40:]))
}

// TestBuilderBlockBoundaries checks the Builder's block storage at and
// around block boundaries, and its reuse after Finish.
func TestBuilderBlockBoundaries(t *testing.T) {
	b := NewBuilder(9, 0)
	for _, n := range []int{0, 1, hashBlockLen - 1, hashBlockLen, hashBlockLen + 1, 3 * hashBlockLen} {
		keys := makeKeys(n, 's', uint64(n))
		f, err := BuildWithSeed(keys, 9)
		require.NoError(t, err)
		want, _ := f.MarshalBinary()
		for _, k := range keys {
			b.Add(k)
		}
		require.Equal(t, n, b.Len())
		g, err := b.Finish()
		require.NoError(t, err)
		got, _ := g.MarshalBinary()
		require.Equal(t, want, got, "n=%d", n)
		requireAllPresent(t, g, keys)
	}
}

// TestChunkedBuildPath covers BuildWithSeed above fusedGroupingBins bins,
// where it hashes in chunks before grouping: same bytes as the Builder, no
// false negatives. Skipped with -short.
func TestChunkedBuildPath(t *testing.T) {
	if testing.Short() {
		t.Skip("1.6M keys: run without -short")
	}
	n := int(fusedGroupingBins*95/4) + 3*hashBlockLen + 17
	keys := makeKeys(n, 's', 5)
	f, err := BuildWithSeed(keys, 5)
	require.NoError(t, err)
	require.Greater(t, f.numBins, uint64(fusedGroupingBins))
	requireAllPresent(t, f, keys)
	b := NewBuilder(5, n)
	for _, k := range keys {
		b.Add(k)
	}
	g, err := b.Finish()
	require.NoError(t, err)
	want, _ := f.MarshalBinary()
	got, _ := g.MarshalBinary()
	require.Equal(t, want, got)
}

package prefix

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/adaptkv/adaptkv/filter"
)

// buildAdaptive builds an adaptive prefix filter over keys through the kind,
// with its remote representation in memory.
func buildAdaptive(t testing.TB, keys [][]byte, seed uint64) (*AdaptiveFilter, filter.MemRemote) {
	t.Helper()
	b := APrefixKind{}.NewBuilder(filter.BuildOptions{Seed: seed, SizeHint: len(keys), WithRemote: true})
	for _, k := range keys {
		b.Add(k)
	}
	local, remote, err := b.Finish()
	require.NoError(t, err)
	f, err := APrefixKind{}.Decode(filter.Params{}, seed, local, filter.MemRemote(remote))
	require.NoError(t, err)
	return f.(*AdaptiveFilter), remote
}

func requireAllPresentAdaptive(t *testing.T, f *AdaptiveFilter, keys [][]byte) {
	t.Helper()
	for i, k := range keys {
		if !f.MayContain(k) {
			require.Failf(t, "false negative", "key %d (%x) not found", i, k)
		}
	}
}

// adaptStream queries count absent keys (tag) and adapts every false
// positive; it returns the number of false positives.
func adaptStream(t testing.TB, f *AdaptiveFilter, count int, tag byte, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 777))
	var k [16]byte
	fps := 0
	for i := 0; i < count; i++ {
		if key := absentKey(&k, rng, i, tag); f.MayContain(key) {
			fps++
			require.NoError(t, f.Adapt(key))
		}
	}
	return fps
}

// roundTripAdaptive encodes f and decodes it over the same remote, and
// checks that the encoding is stable.
func roundTripAdaptive(t *testing.T, f *AdaptiveFilter, remote filter.Remote) *AdaptiveFilter {
	t.Helper()
	data, err := f.MarshalBinary()
	require.NoError(t, err)
	g, err := DecodeAdaptive(data, remote)
	require.NoError(t, err)
	again, err := g.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, data, again)
	require.Equal(t, f.SizeBytes(), g.SizeBytes())
	return g
}

// TestAdaptiveNoFalseNegatives: 1M keys stay present after 10M adaptation
// queries and after decoding the adapted state.
func TestAdaptiveNoFalseNegatives(t *testing.T) {
	n, queries := 1_000_000, 10_000_000
	if testing.Short() {
		n, queries = 100_000, 1_000_000
	}
	keys := makeKeys(n, 's', 21)
	f, remote := buildAdaptive(t, keys, 99)
	requireAllPresentAdaptive(t, f, keys)
	fps := adaptStream(t, f, queries, 'a', 5)
	st := f.Stats()
	t.Logf("n=%d queries=%d false positives=%d adaptations=%d rebuilds=%d bits/key=%.3f (fix %d bytes)",
		n, queries, fps, st.Adaptations, st.Rebuilds, f.BitsPerKey(), f.FixBytes())
	require.Positive(t, st.Adaptations)
	requireAllPresentAdaptive(t, f, keys)
	g := roundTripAdaptive(t, f, remote)
	requireAllPresentAdaptive(t, g, keys)
	require.LessOrEqual(t, g.BitsPerKey(), 12.5)
}

// TestAdaptiveFixesFalsePositives: after adapting, almost every false
// positive answers "no" (the rest agree with a stored key on 10 more bits,
// about 2^-10 of them), in the filter and after decode; the other absent
// keys are not disturbed and the first-time rate stays the static filter's.
func TestAdaptiveFixesFalsePositives(t *testing.T) {
	n, queries := 100_000, 1_000_000
	keys := makeKeys(n, 's', 22)
	f, remote := buildAdaptive(t, keys, 7)
	rng := rand.New(rand.NewPCG(3, 4))
	var fpKeys [][]byte
	for i := 0; i < queries; i++ {
		k := make([]byte, 16)
		binary.LittleEndian.PutUint64(k, rng.Uint64())
		binary.LittleEndian.PutUint64(k[8:], uint64(i))
		k[0] = 'a'
		if f.MayContain(k) {
			fpKeys = append(fpKeys, k)
			require.NoError(t, f.Adapt(k))
		}
	}
	rate := float64(len(fpKeys)) / float64(queries)
	const p = 0.0040 // the first-time bound (paper: 0.37-0.39%)
	require.LessOrEqual(t, rate, p+4*math.Sqrt(p/float64(queries)))
	g := roundTripAdaptive(t, f, remote)
	for _, h := range []*AdaptiveFilter{f, g} {
		still := 0
		for _, k := range fpKeys {
			if h.MayContain(k) {
				still++
			}
		}
		t.Logf("first-time fp rate %.4f%%, %d false positives, %d still positive after the fix, bits/key %.3f",
			100*rate, len(fpKeys), still, h.BitsPerKey())
		limit := float64(len(fpKeys))/1024 + 4*math.Sqrt(float64(len(fpKeys))/1024) + 1
		require.LessOrEqual(t, float64(still), limit)
	}
	// The fixes must not leak onto other absent keys: a fresh stream sees
	// at most the static rate.
	fresh := 0
	for i := 0; i < queries; i++ {
		var k [16]byte
		binary.LittleEndian.PutUint64(k[:], rng.Uint64())
		k[0] = 'b'
		if f.MayContain(k[:]) {
			fresh++
		}
	}
	require.LessOrEqual(t, float64(fresh)/float64(queries), p+4*math.Sqrt(p/float64(queries)))
}

// TestAdaptiveBudget: under a stream with many distinct false positives the
// fix information stops at its budget (local state <= 12.5 bits/key), the
// oldest fixes giving way, and no key is lost.
func TestAdaptiveBudget(t *testing.T) {
	n := 20_000
	keys := makeKeys(n, 's', 23)
	f, remote := buildAdaptive(t, keys, 8)
	adaptStream(t, f, 100*n, 'a', 9)
	st := f.Stats()
	t.Logf("adaptations %d, rebuilds %d, fix bytes %d (budget %d), bits/key %.3f", st.Adaptations, st.Rebuilds, f.FixBytes(), f.budget, f.BitsPerKey())
	require.LessOrEqual(t, f.FixBytes(), f.budget)
	require.Greater(t, f.FixBytes(), f.budget*3/4, "a stream of 100n absent keys should fill the budget")
	require.Positive(t, st.Rebuilds)
	require.LessOrEqual(t, f.BitsPerKey(), 12.5)
	requireAllPresentAdaptive(t, f, keys)
	requireAllPresentAdaptive(t, roundTripAdaptive(t, f, remote), keys)
}

// TestAdaptiveConcurrent: readers query every stored key while two
// goroutines adapt (run with -race); no reader ever sees a false negative.
func TestAdaptiveConcurrent(t *testing.T) {
	n := 100_000
	keys := makeKeys(n, 's', 24)
	f, _ := buildAdaptive(t, keys, 10)
	var done atomic.Bool
	var misses atomic.Int64
	var readers, adapters sync.WaitGroup
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for !done.Load() {
				for _, k := range keys {
					if !f.MayContain(k) {
						misses.Add(1)
					}
				}
			}
		}()
	}
	for a := 0; a < 2; a++ {
		adapters.Add(1)
		go func() {
			defer adapters.Done()
			adaptStream(t, f, 300_000, byte('a'+a), uint64(a))
		}()
	}
	adapters.Wait()
	done.Store(true)
	readers.Wait()
	require.Zero(t, misses.Load())
	require.Positive(t, f.Stats().Adaptations)
	requireAllPresentAdaptive(t, f, keys)
}

// falsePositive returns an absent key the filter accepts.
func falsePositive(t *testing.T, f *AdaptiveFilter) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	for {
		k := make([]byte, 16)
		binary.LittleEndian.PutUint64(k, rng.Uint64())
		k[0] = 'z'
		if f.MayContain(k) {
			return k
		}
	}
}

// TestAdaptiveRemoteErrors: without a remote, or with a remote that does not
// match the filter, Adapt fails with filter.ErrRemote and changes nothing.
func TestAdaptiveRemoteErrors(t *testing.T) {
	keys := makeKeys(10_000, 's', 25)
	f, remote := buildAdaptive(t, keys, 11)
	data, err := f.MarshalBinary()
	require.NoError(t, err)
	k := falsePositive(t, f)

	broken := map[string]filter.Remote{
		"none":      nil,
		"truncated": remote[:len(remote)/2],
		"index out of range": func() filter.MemRemote {
			r := append(filter.MemRemote(nil), remote...)
			for i := len(keys); i < len(r); i++ {
				r[i] = uint64(len(keys)) + 1
			}
			return r
		}(),
		"words of another bin": func() filter.MemRemote {
			r := append(filter.MemRemote(nil), remote...)
			for i := 0; i < len(keys); i++ {
				r[i] = r[len(keys)-1-i]
			}
			return r
		}(),
	}
	for name, rem := range broken {
		t.Run(name, func(t *testing.T) {
			g, err := DecodeAdaptive(data, rem)
			require.NoError(t, err)
			require.ErrorIs(t, g.Adapt(k), filter.ErrRemote)
			require.True(t, g.MayContain(k))
			require.Zero(t, g.Stats().Adaptations)
			require.Zero(t, g.FixBytes())
		})
	}
	require.NoError(t, f.Adapt(k))
	require.False(t, f.MayContain(k))
}

// TestAdaptiveDecodeCorrupt: a damaged fix section is ErrCorrupt (checksum,
// truncation, hostile records resealed with a valid checksum), never a
// panic, and a decoded filter keeps every key.
func TestAdaptiveDecodeCorrupt(t *testing.T) {
	keys := makeKeys(5_000, 's', 26)
	f, remote := buildAdaptive(t, keys, 12)
	adaptStream(t, f, 200_000, 'a', 13)
	data, err := f.MarshalBinary()
	require.NoError(t, err)
	base := int(encodedLen(data))
	require.Greater(t, len(data), base+emptyFixSize, "the test needs fixes")

	for cut := 0; cut < len(data); cut += max(1, (cut-base)/7) {
		if cut < base {
			cut = max(cut, base-100)
		}
		_, err := DecodeAdaptive(data[:cut], remote)
		require.ErrorIs(t, err, ErrCorrupt, "truncated at %d", cut)
	}
	for i := base; i < len(data); i++ {
		d := append([]byte(nil), data...)
		d[i] ^= 0x10
		_, err := DecodeAdaptive(d, remote)
		require.ErrorIs(t, err, ErrCorrupt, "flip at %d", i)
	}
	// Resealed mutations: the checksum holds, the structure must not.
	rng := rand.New(rand.NewPCG(5, 6))
	rejected := 0
	for i := 0; i < 20_000; i++ {
		d := append([]byte(nil), data...)
		sec := d[base:]
		pos := fixHeaderSize + rng.IntN(len(sec)-fixHeaderSize-checksumSize)
		sec[pos] ^= byte(1 << rng.IntN(8))
		end := len(sec) - checksumSize
		binary.LittleEndian.PutUint32(sec[end:], crc32.Checksum(sec[:end], castagnoli))
		g, err := DecodeAdaptive(d, remote)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			rejected++
			continue
		}
		// A mutation that still decodes changed only extension bits or a
		// fix's target slot; queries must not panic.
		for _, k := range keys[:100] {
			g.MayContain(k)
		}
	}
	t.Logf("resealed mutations rejected: %d of 20000", rejected)
	require.Greater(t, rejected, 1000)
}

// TestFixLongExtensions: fixes whose extension is longer than 16 bits (a
// false positive agreeing with the stored key on 16+ extension bits, 2^-16
// of the fixes) keep every bit, through the group encoding too.
func TestFixLongExtensions(t *testing.T) {
	for l := 1; l <= maxExtLen; l++ {
		stored := uint64(0xabcdef) & extMask
		ext := stored ^ 1<<(l-1) // agrees on the first l-1 bits
		set, ok := refine(fix{j: 3, slot: 7}, nil, []uint64{stored}, ext)
		require.True(t, ok)
		require.Len(t, set, 1)
		require.Equal(t, l, int(set[0].l))
		require.True(t, set[0].passes(stored), "l=%d", l)
		require.False(t, set[0].passes(ext), "l=%d", l)
		g, ok := encodeFixGroup(set)
		require.True(t, ok)
		back, err := decodeFixGroup(g.w)
		require.NoError(t, err)
		require.Equal(t, set, back)
		require.True(t, g.allows(3, 7, 0, stored))
		require.False(t, g.allows(3, 7, 0, ext))
	}
	// Equal on all 24 bits: cannot be told apart.
	_, ok := refine(fix{j: 3, slot: 7}, nil, []uint64{0x123456}, 0x123456)
	require.False(t, ok)
}

// TestAdaptiveBuilderLayout: the builder's remote representation holds
// every key's word in its bin, sorted, with the bin index after the words;
// the local state is the static filter of the same keys and seed; and a
// builder reused after Finish (its pooled blocks returned and taken again)
// builds what a new one builds.
func TestAdaptiveBuilderLayout(t *testing.T) {
	const seed = 31
	first := makeKeys(3*hashBlockLen+17, 's', 41) // several blocks, the last partial
	second := makeKeys(hashBlockLen+5, 't', 42)
	b := APrefixKind{}.NewBuilder(filter.BuildOptions{Seed: seed, WithRemote: true})
	for _, keys := range [][][]byte{first, second} {
		for _, k := range keys {
			b.Add(k)
		}
		local, remote, err := b.Finish()
		require.NoError(t, err)

		fresh := APrefixKind{}.NewBuilder(filter.BuildOptions{Seed: seed, WithRemote: true})
		for _, k := range keys {
			fresh.Add(k)
		}
		freshLocal, freshRemote, err := fresh.Finish()
		require.NoError(t, err)
		require.Equal(t, freshLocal, local)
		require.Equal(t, freshRemote, remote)

		static, err := BuildWithSeed(keys, seed)
		require.NoError(t, err)
		require.Equal(t, static.data, local[:len(static.data)])

		n, m := uint64(len(keys)), static.numBins
		require.Len(t, remote, int(n+m+1))
		words, index := remote[:n], remote[n:]
		require.Zero(t, index[0])
		require.Equal(t, n, index[m])
		want := make([]uint64, 0, n)
		for _, k := range keys {
			packed, h2 := hashKey(k, hashSeedOf(seed))
			bin := binOf(packed, m)
			want = append(want, (bin*fingerprintRange+packed&qrMask)<<(64-extShift)|extOf(h2))
		}
		slices.Sort(want)
		require.Equal(t, want, words) // sorted by bin, then fingerprint and extension
		for bin := uint64(0); bin < m; bin++ {
			for _, w := range words[index[bin]:index[bin+1]] {
				require.Equal(t, bin, w>>(64-extShift)/fingerprintRange)
			}
		}
	}
}

// TestSortSmall: sortSmall sorts runs of every length up to and past its
// insertion-sort bound, duplicates included.
func TestSortSmall(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for n := 0; n <= 200; n++ {
		s := make([]uint64, n)
		for i := range s {
			s[i] = rng.Uint64N(uint64(n/2 + 1))
		}
		want := slices.Clone(s)
		slices.Sort(want)
		sortSmall(s)
		require.Equal(t, want, s, "length %d", n)
	}
}

// TestQueryFieldsOnOneLine: the fields a query reads sit in the first
// cache line of a Filter and of an AdaptiveFilter, and both structs start a
// line (their size classes, 128 and 256 bytes, are aligned to their size):
// a query whose filter header has left the CPU caches misses once, not
// twice or three times.
func TestQueryFieldsOnOneLine(t *testing.T) {
	var f Filter
	for _, end := range []uintptr{
		unsafe.Offsetof(f.bins) + unsafe.Sizeof(f.bins),
		unsafe.Offsetof(f.numBins) + unsafe.Sizeof(f.numBins),
		unsafe.Offsetof(f.hashSeed) + unsafe.Sizeof(f.hashSeed),
		unsafe.Offsetof(f.spareBlocks) + unsafe.Sizeof(f.spareBlocks),
		unsafe.Offsetof(f.spareSeed) + unsafe.Sizeof(f.spareSeed),
	} {
		require.LessOrEqual(t, end, uintptr(filter.CacheLine))
	}
	require.LessOrEqual(t, unsafe.Sizeof(f), uintptr(128))
	require.Equal(t, uintptr(adaptiveSize), unsafe.Sizeof(AdaptiveFilter{}))
	require.Zero(t, unsafe.Offsetof(AdaptiveFilter{}.base))

	keys := makeKeys(1000, 1, 7)
	for range 50 {
		s, err := BuildWithSeed(keys, 7)
		require.NoError(t, err)
		a, _ := buildAdaptive(t, keys, 7)
		require.Zero(t, uintptr(unsafe.Pointer(s))%filter.CacheLine)
		require.Zero(t, uintptr(unsafe.Pointer(a))%filter.CacheLine)
	}
}

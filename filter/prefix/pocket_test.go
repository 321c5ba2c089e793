package prefix

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// writePD is the reference encoder the build's layoutBin is checked
// against: it encodes sorted, distinct fingerprints fps (at most
// binCapacity) into pd; overflowed marks a bin that forwarded larger
// fingerprints to the spare, and then len(fps) must be binCapacity.
func writePD(pd []byte, fps []uint16, overflowed bool) {
	pd = pd[:binBytes:binBytes]
	var zeros uint64
	for i, fp := range fps {
		zeros |= 1 << (uint(fp>>8) + uint(i))
		pd[7+i] = byte(fp)
	}
	for i := len(fps); i < binCapacity; i++ {
		pd[7+i] = 0
	}
	header := (uint64(1)<<(numQuotients+uint(len(fps))) - 1) &^ zeros
	field := uint64(binNotOverflowed)
	if overflowed {
		field = uint64(fps[binCapacity-1] >> 8)
	}
	w0 := field | header<<headerShift
	for i := 0; i < 7; i++ {
		pd[i] = byte(w0 >> (8 * i))
	}
}

// sortUnique is the reference sort: it rewrites run as its sorted distinct
// values through the same bitmap as layoutBin.
func (s *fingerprintSet) sortUnique(run []uint16) []uint16 {
	lo, hi := s.fill(run)
	k := 0
	for half, sm := range [2]uint64{lo, hi} {
		for ; sm != 0; sm &= sm - 1 {
			w := half<<6 | bits.TrailingZeros64(sm)
			x := s.words[w&127]
			s.words[w&127] = 0
			for ; x != 0; x &= x - 1 {
				run[k] = uint16(w<<6 | bits.TrailingZeros64(x))
				k++
			}
		}
	}
	return run[:k]
}

// pdContains queries a lone bin through the production query code.
func pdContains(pd []byte, q, r uint64) bool {
	f := &Filter{bins: pd, numBins: 1}
	return f.contains(0, q<<8|r)
}

// pdMax returns the bin's maximum fingerprint when it has overflowed and a
// value above every fingerprint (at least 32<<8) when it has not.
func pdMax(pd []byte) uint64 {
	return uint64(pd[0]&fieldMask)<<8 | uint64(pd[31])
}

func TestByteMaskAllPatterns(t *testing.T) {
	for p := 0; p < 256; p++ {
		var z uint64
		for j := 0; j < 8; j++ {
			if p>>j&1 == 1 {
				z |= 0x80 << (8 * j)
			}
		}
		require.Equal(t, uint64(p), byteMask(z), "pattern %08b", p)
	}
}

func TestZeroBytesExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for it := 0; it < 100000; it++ {
		x := rng.Uint64()
		// Plant zero and 0x01 bytes (the borrow case of the inexact trick).
		for j := 0; j < 8; j++ {
			switch rng.IntN(4) {
			case 0:
				x &^= 0xff << (8 * j)
			case 1:
				x = x&^(0xff<<(8*j)) | 1<<(8*j)
			}
		}
		var want uint64
		for j := 0; j < 8; j++ {
			if byte(x>>(8*j)) == 0 {
				want |= 0x80 << (8 * j)
			}
		}
		require.Equal(t, want, zeroBytes(x), "x=%016x", x)
		require.Equal(t, want != 0, hasZeroByte(x) != 0, "x=%016x", x)
	}
}

func naiveSelect(x uint64, k uint) uint {
	for i := uint(0); i < 64; i++ {
		if x>>i&1 == 1 {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return 64
}

func TestSelectBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for it := 0; it < 20000; it++ {
		x := rng.Uint64() & rng.Uint64()
		if it%3 == 0 {
			x &= headerMask
		}
		for k := uint(0); k <= uint(bits.OnesCount64(x)); k++ {
			require.Equal(t, naiveSelect(x, k), selectBit(x, k), "x=%x k=%d", x, k)
		}
	}
	require.Equal(t, uint(64), selectBit(0, 0))
	require.Equal(t, uint(63), selectBit(1<<63, 0))
}

// randomBinSet returns count distinct sorted fingerprints.
func randomBinSet(rng *rand.Rand, count int) []uint16 {
	seen := map[uint16]bool{}
	var out []uint16
	for len(out) < count {
		fp := uint16(rng.IntN(fingerprintRange))
		if rng.IntN(3) == 0 && len(out) > 0 {
			// Cluster remainders and quotients to exercise multi-match paths.
			fp = out[rng.IntN(len(out))]&0xff | uint16(rng.IntN(numQuotients))<<8
		}
		if !seen[fp] {
			seen[fp] = true
			out = append(out, fp)
		}
	}
	slices.Sort(out)
	return out
}

func TestPocketDictionaryAgainstSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	iters := 3000
	if testing.Short() {
		iters = 600
	}
	pd := make([]byte, binBytes)
	for it := 0; it < iters; it++ {
		count := it % (binCapacity + 1)
		set := randomBinSet(rng, count)
		overflowed := count == binCapacity && rng.IntN(2) == 0
		writePD(pd, set, overflowed)

		gotCount, gotOver, ok := validatePD(pd)
		require.True(t, ok, "set %v", set)
		require.Equal(t, count, gotCount)
		require.Equal(t, overflowed, gotOver)
		if overflowed {
			require.Equal(t, uint64(set[binCapacity-1]), pdMax(pd))
		} else {
			require.Greater(t, pdMax(pd), uint64(fingerprintRange-1))
		}
		for fp := 0; fp < fingerprintRange; fp++ {
			_, want := slices.BinarySearch(set, uint16(fp))
			require.Equal(t, want, pdContains(pd, uint64(fp>>8), uint64(fp&0xff)), "set %v fp %d", set, fp)
		}
	}
}

// decodePD is a reference decoder: it walks the header bit by bit.
func decodePD(pd []byte) []uint16 {
	w0 := uint64(0)
	for i := 0; i < 8; i++ {
		w0 |= uint64(pd[i]) << (8 * i)
	}
	header := w0 >> headerShift & headerMask
	var out []uint16
	q, i := 0, 0
	for pos := 0; pos < headerBits && q < numQuotients; pos++ {
		if header>>pos&1 == 1 {
			q++
			continue
		}
		out = append(out, uint16(q<<8|int(pd[7+i])))
		i++
	}
	return out
}

func TestValidatePDRejectsNonCanonical(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pd := make([]byte, binBytes)
	accepted := 0
	for it := 0; it < 200000; it++ {
		count := rng.IntN(binCapacity + 1)
		set := randomBinSet(rng, count)
		overflowed := count == binCapacity && rng.IntN(2) == 0
		writePD(pd, set, overflowed)
		// Flip one to three random bits.
		for f := 0; f <= rng.IntN(3); f++ {
			bit := rng.IntN(binBytes * 8)
			pd[bit/8] ^= 1 << (bit % 8)
		}
		n, over, ok := validatePD(pd)
		if !ok {
			continue
		}
		accepted++
		// Whatever is accepted must be exactly writePD of its contents.
		fps := decodePD(pd)
		require.Len(t, fps, n)
		again := make([]byte, binBytes)
		writePD(again, fps, over)
		require.Equal(t, again, pd)
	}
	require.Positive(t, accepted, "some flips give another valid bin")
	require.Less(t, accepted, 200000, "some flips must be rejected")
}

// TestLayoutBinMatchesWritePD checks the fused sort-and-encode of the build
// against writePD of the sorted distinct fingerprints.
func TestLayoutBinMatchesWritePD(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	var set fingerprintSet
	got := make([]byte, binBytes)
	want := make([]byte, binBytes)
	for it := 0; it < 20000; it++ {
		count := rng.IntN(60)
		if it%100 == 0 {
			count = 500
		}
		run := make([]uint16, count)
		for i := range run {
			run[i] = uint16(rng.IntN(fingerprintRange))
			if i > 0 && rng.IntN(8) == 0 {
				run[i] = run[rng.IntN(i)] // repeats
			}
		}
		sorted := slices.Clone(run)
		slices.Sort(sorted)
		sorted = slices.Compact(sorted)
		b := uint64(rng.IntN(1000))
		clear(got)
		forwarded := set.layoutBin(got, slices.Clone(run), b, nil)
		keep := min(len(sorted), binCapacity)
		writePD(want, sorted[:keep], len(sorted) > binCapacity)
		require.Equal(t, want, got, "run %v", run)
		var wantForwarded []uint64
		for _, fp := range sorted[keep:] {
			wantForwarded = append(wantForwarded, b*fingerprintRange+uint64(fp))
		}
		require.Equal(t, wantForwarded, forwarded)
		require.Equal(t, sorted, set.sortUnique(slices.Clone(run)))
		require.Equal(t, fingerprintSet{}, set, "bitmap left clean")
	}
}

package quotient

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSelect64(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 20000; trial++ {
		x := rng.Uint64()
		switch trial % 4 {
		case 1:
			x &= rng.Uint64()
		case 2:
			x &= rng.Uint64() & rng.Uint64() & rng.Uint64()
		case 3:
			x = ^uint64(0)
		}
		k := 0
		for i := 0; i < 64; i++ {
			if x>>i&1 == 1 {
				require.Equal(t, i, select64(x, k), "x=%x k=%d", x, k)
				k++
			}
		}
		require.Equal(t, bits.OnesCount64(x), k)
	}
}

func TestSelectorCodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var zero [64]uint8
	code, ok := encodeSelectors(&zero)
	require.True(t, ok)
	require.Zero(t, code, "the pristine block must code to 0")
	accepted, rejected := 0, 0
	for trial := 0; trial < 20000; trial++ {
		var sels [64]uint8
		nz := rng.IntN(20)
		for j := 0; j < nz; j++ {
			v := uint8(1)
			for v < maxSelCode && rng.IntN(4) == 0 {
				v++
			}
			sels[rng.IntN(64)] = v
		}
		code, ok := encodeSelectors(&sels)
		if !ok {
			rejected++
			continue
		}
		accepted++
		require.Less(t, code, codeRange)
		var full, lazy [64]uint8
		require.True(t, decodeSelectors(code, 64, &full, true))
		require.Equal(t, sels, full)
		n := 1 + rng.IntN(64)
		require.True(t, decodeSelectors(code, n, &lazy, false))
		require.Equal(t, sels[:n], lazy[:n])
	}
	require.Greater(t, accepted, 1000)
	require.Greater(t, rejected, 100, "overflow must be detected")
	// A block of 64 nonzero selectors cannot fit in 56 bits.
	var ones [64]uint8
	for i := range ones {
		ones[i] = 1
	}
	_, ok = encodeSelectors(&ones)
	require.False(t, ok)
	// Capacity: selectors of value 1 that always fit.
	var some [64]uint8
	for i := 0; i < 12; i++ {
		some[i*5] = 1
	}
	_, ok = encodeSelectors(&some)
	require.True(t, ok, "12 selectors of 1 must fit in a block")
}

func TestExtensionCodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var lens [64]uint8
	var pats [64]uint32
	code, ok := encodeExtensions(&lens, &pats)
	require.True(t, ok)
	require.Zero(t, code)
	accepted, rejected := 0, 0
	for trial := 0; trial < 20000; trial++ {
		var lens [64]uint8
		var pats [64]uint32
		for j := rng.IntN(10); j > 0; j-- {
			i := rng.IntN(64)
			l := 1 + rng.IntN(6)
			if rng.IntN(50) == 0 {
				l = 1 + rng.IntN(maxExtCode)
			}
			lens[i], pats[i] = uint8(l), uint32(rng.Uint64()&(1<<l-1))
		}
		code, ok := encodeExtensions(&lens, &pats)
		if !ok {
			rejected++
			continue
		}
		accepted++
		var l2 [64]uint8
		var p2 [64]uint32
		require.True(t, decodeExtensions(code, 64, &l2, &p2, true))
		require.Equal(t, lens, l2)
		require.Equal(t, pats, p2)
		n := 1 + rng.IntN(64)
		require.True(t, decodeExtensions(code, n, &l2, &p2, false))
		require.Equal(t, lens[:n], l2[:n])
	}
	require.Greater(t, accepted, 1000)
	require.Greater(t, rejected, 100)
}

// hashAt returns an h1 whose home slot is q in a filter of nq home slots.
func hashAt(q, nq uint64) uint64 {
	h, rem := bits.Div64(q, 0, nq)
	if rem != 0 {
		h++
	}
	return h
}

// TestClusters builds from crafted hashes: a cluster of 1000 keys on one
// home slot (offsets far above 255, stored saturated), a cluster on the last
// home slot (runs overflow past the quotient range), duplicate hashes, and
// random keys; then queries and adapts inside the clusters.
func TestClusters(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n = 6000
	opts, err := Options{Seed: 1}.normalize()
	require.NoError(t, err)
	nq := uint64(math.Ceil(float64(n+50) / opts.LoadFactor)) // n keys + 50 duplicates
	hs := make([]hashPair, 0, n+100)
	for i := 0; i < 1000; i++ {
		hs = append(hs, hashPair{hashAt(70, nq), rng.Uint64()})
	}
	for i := 0; i < 300; i++ {
		hs = append(hs, hashPair{hashAt(nq-1, nq), rng.Uint64()})
	}
	for len(hs) < n {
		hs = append(hs, hashPair{rng.Uint64(), rng.Uint64()})
	}
	// Exact duplicates collapse into one element.
	hs = append(hs, hs[:50]...)
	for _, kind := range allVariants {
		t.Run(kind.String(), func(t *testing.T) {
			in := append([]hashPair(nil), hs...)
			f, tails := build(kind, opts, in)
			f.remote = tails
			require.Equal(t, uint64(nq), f.nq)
			require.Equal(t, n, f.n)
			require.Greater(t, f.Slots(), int(nq)+250, "the last cluster overflows the quotient range")
			saturated := 0
			for b := 0; b < f.nblocks; b++ {
				if f.meta(b)&0xff == offsetSat {
					saturated++
				}
			}
			require.Greater(t, saturated, 5)
			require.NoError(t, f.validate())
			check := func() {
				for _, h := range hs {
					require.True(t, f.mayContainHash(h.h1, h.h2))
				}
			}
			check()
			// Negatives landing in the clusters and everywhere.
			fps := 0
			for i := 0; i < sizeFor(20_000, 200_000, 1_000_000); i++ {
				h1 := rng.Uint64()
				switch i % 4 {
				case 0:
					h1 = hashAt(70, nq)
				case 1:
					h1 = hashAt(nq-1, nq)
				}
				h2 := rng.Uint64()
				if f.mayContainHash(h1, h2) {
					fps++
					err := f.adaptHash(h1, h2)
					if kind == RSQF {
						continue
					}
					require.NoError(t, err)
				}
			}
			require.Greater(t, fps, 100, "queries on a 1000-key run must collide")
			check()
			require.NoError(t, f.validate())
			if kind != RSQF {
				require.Greater(t, f.Stats().Rebuilds, uint64(0))
			}
			data, err := f.MarshalBinary()
			require.NoError(t, err)
			g, err := Decode(data, tails)
			require.NoError(t, err)
			for _, h := range hs {
				require.True(t, g.(*qf).mayContainHash(h.h1, h.h2))
			}
		})
	}
}

func TestEmptyAndTiny(t *testing.T) {
	for _, kind := range allVariants {
		f, err := New(kind, nil, Options{Seed: 3})
		require.NoError(t, err)
		require.Equal(t, 0, f.Len())
		require.Equal(t, 64, f.Slots())
		require.False(t, f.MayContain([]byte("x")))
		require.Zero(t, f.BitsPerKey())
		data, err := f.MarshalBinary()
		require.NoError(t, err)
		g, err := Decode(data, nil)
		require.NoError(t, err)
		require.False(t, g.MayContain([]byte("x")))

		keys := [][]byte{{}, []byte("a"), []byte("a"), make([]byte, 1<<16)}
		f, err = New(kind, keys, Options{Seed: 4})
		require.NoError(t, err)
		require.Equal(t, 3, f.Len(), "duplicates are stored once")
		requireNoFalseNegatives(t, f, keys)
	}
}

func TestOptionsValidation(t *testing.T) {
	bad := []Options{
		{RemainderBits: 3}, {RemainderBits: 17}, {RemainderBits: -1},
		{LoadFactor: -0.5}, {LoadFactor: 1}, {LoadFactor: 0.995},
	}
	for _, o := range bad {
		_, err := New(TAF, nil, o)
		require.ErrorIs(t, err, ErrInvalidOptions, "%+v", o)
	}
	_, err := New(Variant(0), nil, Options{})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = New(Variant(9), nil, Options{})
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.Equal(t, "taf", TAF.String())
	require.Equal(t, "Variant(9)", Variant(9).String())

	// Random seeds differ per filter; explicit ones are kept.
	f1, err := New(RSQF, nil, Options{})
	require.NoError(t, err)
	f2, err := New(RSQF, nil, Options{})
	require.NoError(t, err)
	require.NotEqual(t, f1.(*qf).seed, f2.(*qf).seed)
	require.NotZero(t, f1.(*qf).seed)
}

// TestRemainderBits checks every remainder width end to end (packed
// remainders straddle words when r does not divide 64).
func TestRemainderBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	keys := randKeys(rng, 5000, 1)
	negs := randKeys(rng, sizeFor(20_000, 100_000, 1_000_000), 2)
	for r := MinRemainderBits; r <= MaxRemainderBits; r++ {
		for _, kind := range allVariants {
			f, err := New(kind, keys, Options{RemainderBits: r, Seed: uint64(r)})
			require.NoError(t, err)
			requireNoFalseNegatives(t, f, keys)
			fp := 0
			for _, k := range negs {
				if f.MayContain(k) {
					fp++
					if kind != RSQF {
						require.NoError(t, f.Adapt(k))
					}
				}
			}
			requireNoFalseNegatives(t, f, keys)
			p := float64(f.Len()) / float64(f.(*qf).nq) / float64(uint64(1)<<r)
			mean := p * float64(len(negs))
			require.LessOrEqual(t, float64(fp), mean+4*sqrtf(mean)+1, "r=%d kind=%v", r, kind)
			data, err := f.MarshalBinary()
			require.NoError(t, err)
			_, err = Decode(data, nil)
			require.NoError(t, err)
		}
	}
}

// TestExtensionAt: the single-position decoder agrees with the full one.
func TestExtensionAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for trial := 0; trial < 5000; trial++ {
		var lens [64]uint8
		var pats [64]uint32
		for j := rng.IntN(8); j > 0; j-- {
			i, l := rng.IntN(64), 1+rng.IntN(12)
			lens[i], pats[i] = uint8(l), uint32(rng.Uint64()&(1<<l-1))
		}
		code, ok := encodeExtensions(&lens, &pats)
		if !ok {
			continue
		}
		for pos := 0; pos < 64; pos++ {
			l, p, ok := extensionAt(code, pos)
			require.True(t, ok)
			require.Equal(t, lens[pos], l)
			require.Equal(t, pats[pos], p)
		}
	}
}

// TestBuildOrderIndependent builds from the same hash pairs in sorted and in
// shuffled order, with runs of every length up to 40 in one home slot
// (longer than sortRun's insertion-sort limit) and repeated pairs: the
// filters and their remotes must be identical, with the repeats dropped.
func TestBuildOrderIndependent(t *testing.T) {
	opts, err := Options{Seed: 3}.normalize()
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(7, 8))
	var hs []hashPair
	var runs [][]uint64 // each run's h2s
	distinct := 0
	const slots = 41
	for run := 1; run < slots; run++ {
		// Every pair of this run has the same h1, so the same home slot
		// (and they sort by h2); h1 spreads the runs over the quotients.
		h1 := uint64(run) << 57
		for i := 0; i < run; i++ {
			p := hashPair{h1, rng.Uint64()}
			hs = append(hs, p)
			if i == 0 {
				runs = append(runs, nil)
			}
			runs[len(runs)-1] = append(runs[len(runs)-1], p.h2)
			distinct++
			if i%3 == 0 {
				hs = append(hs, p)
			}
		}
	}
	for i := 0; i < 50; i++ {
		hs = append(hs, hashPair{rng.Uint64(), rng.Uint64()})
		distinct++
	}
	sorted := slices.Clone(hs)
	slices.SortFunc(sorted, comparePairs)
	want, wantTails := build(TAF, opts, sorted)
	require.Equal(t, distinct, want.n)
	// Each run's tails lie in consecutive slots, ascending.
	for _, run := range runs {
		slices.Sort(run)
		at := slices.Index(wantTails, run[0])
		require.GreaterOrEqual(t, at, 0)
		require.Equal(t, run, []uint64(wantTails[at:at+len(run)]))
	}
	wantBytes, err := want.MarshalBinary()
	require.NoError(t, err)
	for trial := 0; trial < 5; trial++ {
		shuffled := slices.Clone(hs)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got, gotTails := build(TAF, opts, shuffled)
		gotBytes, err := got.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, wantBytes, gotBytes)
		require.Equal(t, wantTails, gotTails)
	}
}

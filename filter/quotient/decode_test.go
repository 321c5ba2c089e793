package quotient

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/stretchr/testify/require"
)

// adaptedEncoding returns the encoding of a small filter of the given kind
// that has adapted to some false positives (so its codes are nonzero).
func adaptedEncoding(t testing.TB, kind Variant, n int) ([]byte, [][]byte) {
	rng := rand.New(rand.NewPCG(uint64(kind), uint64(n)))
	keys := randKeys(rng, n, 1)
	f, err := New(kind, keys, Options{Seed: 1234})
	require.NoError(t, err)
	if kind != RSQF {
		for _, k := range randKeys(rng, 50*n, 2) {
			if f.MayContain(k) {
				require.NoError(t, f.Adapt(k))
			}
		}
	}
	data, err := f.MarshalBinary()
	require.NoError(t, err)
	return data, keys
}

func reseal(data []byte) []byte {
	out := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(out[len(out)-4:], crc32.Checksum(out[:len(out)-4], crcTable))
	return out
}

func TestDecodeRoundTrip(t *testing.T) {
	for _, kind := range allVariants {
		data, keys := adaptedEncoding(t, kind, 3000)
		f, err := Decode(data, nil)
		require.NoError(t, err)
		requireNoFalseNegatives(t, f, keys)
		again, err := f.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, data, again, "decode then marshal must be the identity")
		if kind != RSQF {
			require.Positive(t, f.Stats().Adaptations, "stats survive the encoding")
		}
	}
}

func TestDecodeCorrupt(t *testing.T) {
	for _, kind := range allVariants {
		t.Run(kind.String(), func(t *testing.T) {
			data, _ := adaptedEncoding(t, kind, 700)
			// Every truncation.
			for n := 0; n < len(data); n++ {
				_, err := Decode(data[:n], nil)
				require.ErrorIs(t, err, ErrCorrupt, "truncated to %d", n)
			}
			_, err := Decode(append(append([]byte(nil), data...), 0), nil)
			require.ErrorIs(t, err, ErrCorrupt, "trailing byte")
			// Every single-bit flip is caught (by the checksum at least).
			for i := 0; i < len(data); i++ {
				bad := append([]byte(nil), data...)
				bad[i] ^= 1 << (i % 8)
				_, err := Decode(bad, nil)
				require.ErrorIs(t, err, ErrCorrupt, "flip at %d", i)
			}
			// Flips behind a valid checksum: structural validation must
			// catch header and metadata damage, and never panic.
			rng := rand.New(rand.NewPCG(1, uint64(kind)))
			caught := 0
			for trial := 0; trial < 3000; trial++ {
				bad := append([]byte(nil), data...)
				i := rng.IntN(len(bad) - 4)
				bad[i] ^= byte(1 + rng.IntN(255))
				g, err := Decode(reseal(bad), nil)
				if err != nil {
					require.ErrorIs(t, err, ErrCorrupt)
					caught++
					continue
				}
				// Accepted: it must still be usable without panicking.
				for _, k := range randKeys(rng, 20, 5) {
					g.MayContain(k)
				}
			}
			require.Positive(t, caught)
			for _, off := range []int{0, 4, 5, 6, 7, 23, 24, 32, 40} {
				bad := append([]byte(nil), data...)
				bad[off] ^= 0x80
				_, err := Decode(reseal(bad), nil)
				require.ErrorIs(t, err, ErrCorrupt, "header byte %d", off)
			}
		})
	}
}

// FuzzDecode: Decode never panics; what it accepts re-encodes to the same
// bytes and answers queries and adaptations without panicking.
func FuzzDecode(f *testing.F) {
	for _, kind := range allVariants {
		data, _ := adaptedEncoding(f, kind, 200)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzDecodeOne(t, data) })
}

// FuzzDecodeResealed fixes up the checksum of each input so the fuzzer
// explores the structural validation behind it.
func FuzzDecodeResealed(f *testing.F) {
	for _, kind := range allVariants {
		data, _ := adaptedEncoding(f, kind, 200)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= encHeader+4 {
			data = reseal(data)
		}
		fuzzDecodeOne(t, data)
	})
}

func fuzzDecodeOne(t *testing.T, data []byte) {
	{
		g, err := Decode(data, filter.MemRemote(make([]uint64, 1<<12)))
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		again, err := g.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, data, again)
		for i := 0; i < 50; i++ {
			k := []byte{byte(i), 1, 2}
			if g.MayContain(k) {
				_ = g.Adapt(k)
			}
		}
	}
}

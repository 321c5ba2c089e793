package prefix

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/spaolacci/murmur3"
	"github.com/stretchr/testify/require"
)

func TestMurmur128MatchesLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 9))
	buf := make([]byte, 300)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for l := 0; l <= len(buf); l++ {
		for _, seed := range []uint32{0, 1, 0xffffffff, rng.Uint32()} {
			w1, w2 := murmur3.Sum128WithSeed(buf[:l], seed)
			g1, g2 := murmur128(buf[:l], seed)
			require.Equal(t, [2]uint64{w1, w2}, [2]uint64{g1, g2}, "len %d seed %d", l, seed)
		}
	}
	require.Equal(t, func() [2]uint64 { a, b := murmur3.Sum128WithSeed(nil, 7); return [2]uint64{a, b} }(),
		func() [2]uint64 { a, b := murmur128(nil, 7); return [2]uint64{a, b} }())
}

// BenchmarkMurmur128 measures the filter's per-key hash on the key lengths
// of the store's benchmarks (12: kv's benchKey) and kvbench's (23: "user"
// and 19 digits), and on a 16-byte key (no tail).
func BenchmarkMurmur128(b *testing.B) {
	key := []byte("user0123456789012345678")
	for _, n := range []int{12, 16, 23} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var sink uint64
			for b.Loop() {
				h1, _ := murmur128(key[:n], 7)
				sink += h1
			}
			_ = sink
		})
	}
}

package quotient

import (
	"math/rand/v2"
	"testing"
)

func BenchmarkDecodeSelectors(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	codes := make([]uint64, 1024)
	for i := range codes {
		var s [64]uint8
		for j := 0; j < 3; j++ {
			s[rng.IntN(64)] = 1
		}
		c, _ := encodeSelectors(&s)
		codes[i] = c
	}
	var out [64]uint8
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		decodeSelectors(codes[i&1023], 1+(i*7)&63, &out, false)
	}
}

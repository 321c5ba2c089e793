package quotient

import "github.com/spaolacci/murmur3"

// murmur3Sum is the filters' hash: 128-bit MurmurHash3 with a 32-bit seed
// folded from the 64-bit filter seed.
func murmur3Sum(key []byte, seed uint32) (h1, h2 uint64) {
	return murmur3.Sum128WithSeed(key, seed)
}

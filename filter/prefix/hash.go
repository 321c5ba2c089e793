package prefix

import (
	"encoding/binary"
	"math/bits"
)

// murmur128 computes MurmurHash3_x64_128 of data with a 32-bit seed. It
// returns exactly what murmur3.Sum128WithSeed(data, seed) from
// github.com/spaolacci/murmur3 returns (a test checks this on many lengths
// and seeds); it is written out here without the library's digest object so
// that the per-key hash of builds and queries costs less.
func murmur128(data []byte, seed uint32) (uint64, uint64) {
	const (
		c1 = 0x87c37b91114253d5
		c2 = 0x4cf5ad432745937f
	)
	h1, h2 := uint64(seed), uint64(seed)
	length := uint64(len(data))
	for len(data) >= 16 {
		k1 := binary.LittleEndian.Uint64(data[0:8])
		k2 := binary.LittleEndian.Uint64(data[8:16])
		data = data[16:]

		k1 *= c1
		k1 = bits.RotateLeft64(k1, 31)
		k1 *= c2
		h1 ^= k1
		h1 = bits.RotateLeft64(h1, 27)
		h1 += h2
		h1 = h1*5 + 0x52dce729

		k2 *= c2
		k2 = bits.RotateLeft64(k2, 33)
		k2 *= c1
		h2 ^= k2
		h2 = bits.RotateLeft64(h2, 31)
		h2 += h1
		h2 = h2*5 + 0x38495ab5
	}
	if len(data) > 0 {
		var k1 uint64
		if len(data) > 8 {
			k2 := loadTail(data[8:])
			k2 *= c2
			k2 = bits.RotateLeft64(k2, 33)
			k2 *= c1
			h2 ^= k2
			k1 = binary.LittleEndian.Uint64(data)
		} else {
			k1 = loadTail(data)
		}
		k1 *= c1
		k1 = bits.RotateLeft64(k1, 31)
		k1 *= c2
		h1 ^= k1
	}
	h1 ^= length
	h2 ^= length
	h1 += h2
	h2 += h1
	h1 = mix64(h1)
	h2 = mix64(h2)
	h1 += h2
	h2 += h1
	return h1, h2
}

// loadTail returns b's 1 to 8 bytes as a little-endian word (the bytes
// past len(b) zero), the value murmur3 reads from a block's tail byte by
// byte, with at most three loads: two overlapping 4-byte loads for 4 to 7
// bytes (the overlapping bytes are the same bytes, so or-ing them is
// harmless), the first, middle and last byte below 4. Every key whose
// length is not a multiple of 16 ends in such a tail.
func loadTail(b []byte) uint64 {
	n := len(b)
	switch {
	case n >= 8:
		return binary.LittleEndian.Uint64(b)
	case n >= 4:
		lo := uint64(binary.LittleEndian.Uint32(b))
		hi := uint64(binary.LittleEndian.Uint32(b[n-4:]))
		return lo | hi<<(8*(n-4))
	default:
		return uint64(b[0]) | uint64(b[n/2])<<(8*(n/2)) | uint64(b[n-1])<<(8*(n-1))
	}
}

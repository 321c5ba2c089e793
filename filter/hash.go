package filter

import "encoding/binary"

// Hash64 is a fast seeded 64-bit hash of key for filters and sketches
// that need one word per key: 8-byte words folded by xor and a
// Murmur3-style finalizer (Mix64) per word, the length and the seed mixed
// in first. It spreads keys well; it does not resist an adversary who
// knows the seed (a seed per table, kept private, is the defense).
func Hash64(seed uint64, key []byte) uint64 {
	h := seed ^ uint64(len(key))*0x9E3779B97F4A7C15
	for len(key) >= 8 {
		h = Mix64(h ^ binary.LittleEndian.Uint64(key))
		key = key[8:]
	}
	var tail uint64
	for i, c := range key {
		tail |= uint64(c) << (8 * i)
	}
	return Mix64(h ^ tail ^ 0xff)
}

// Mix64 is the 64-bit finalizer of MurmurHash3 (fmix64): a bijection
// whose output bits each depend on every input bit.
func Mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

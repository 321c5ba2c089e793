package prefix

import (
	"encoding/binary"
	"math/bits"
)

// The spare (paper section 4.2) is a split-block Bloom filter over the
// fingerprints a full bin forwarded: blocks of 64 bytes (eight 64-bit words,
// one cache line), one bit set per word, so a lookup reads one cache line.
// Its universe is the fingerprint pairs (bin, fp), identified as
// bin*fingerprintRange + fp.
//
// Sizing (section 4.2.1): n' = 1.1·n/sqrt(2πk) entries, the bound on the
// number of forwarded fingerprints (about 8.8% of n for k = 25; with load
// 0.95 about 6% are actually forwarded). It gets spareBitsPerEntry bits per
// entry of n' (about 12 bits per entry actually stored), or of the real count
// if that is larger, so it never fails; its own false-positive rate is about
// 0.8%. The spare answers only the queries whose bin overflowed and whose
// fingerprint exceeds the bin's maximum: about 5.5% of negative queries at
// load 0.95 (the paper's bound is 1/sqrt(2πk) = 8%), so it adds about 0.04%
// to the filter's false-positive rate (0.35% from the bins, 0.39% in all).
const (
	spareBlockBytes   = 64
	spareBlockWords   = spareBlockBytes / 8
	spareBitsPerEntry = 8
	// spareExpectedPer1e7 is 1.1/sqrt(2π·25) = 0.0877673 in parts per 10^7.
	spareExpectedPer1e7 = 877673
)

// spareSalts are odd multipliers: word j of a block gets bit
// (low32(hash)·salt[j]) >> 26, a multiply-shift hash per word (Dietzfelbinger).
var spareSalts = [spareBlockWords]uint32{
	0x9e3779b1, 0x85ebca77, 0xc2b2ae3d, 0x27d4eb2f,
	0x165667b1, 0xd3a2646d, 0xfd7046c5, 0xb55a4f09,
}

// spareCapacity is n' of section 4.2.1 for n keys: ceil(1.1·n/sqrt(2πk)).
func spareCapacity(n uint64) uint64 {
	return (n*spareExpectedPer1e7 + 1e7 - 1) / 1e7
}

// spareBlocksFor returns the number of spare blocks for a filter of n keys
// that forwarded entries distinct fingerprints (no spare when none were).
func spareBlocksFor(n, entries uint64) uint64 {
	if entries == 0 {
		return 0
	}
	capacity := max(spareCapacity(n), entries)
	return (capacity*spareBitsPerEntry + spareBlockBytes*8 - 1) / (spareBlockBytes * 8)
}

// mix64 is the MurmurHash3 64-bit finalizer: a bijective avalanche mix.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// spareHash hashes fingerprint id under the filter's spare seed.
func spareHash(id, seed uint64) uint64 {
	return mix64(id ^ seed)
}

// spareInsert sets the fingerprint's bits in spare (blocks > 0).
func spareInsert(spare []byte, blocks, id, seed uint64) {
	h := spareHash(id, seed)
	b, _ := bits.Mul64(h, blocks)
	blk := spare[b*spareBlockBytes : b*spareBlockBytes+spareBlockBytes : b*spareBlockBytes+spareBlockBytes]
	lo := uint32(h)
	for j := 0; j < spareBlockWords; j++ {
		bit := (lo * spareSalts[j]) >> 26
		w := binary.LittleEndian.Uint64(blk[8*j:])
		binary.LittleEndian.PutUint64(blk[8*j:], w|1<<bit)
	}
}

// spareContains reports whether the fingerprint may be in spare.
func spareContains(spare []byte, blocks, id, seed uint64) bool {
	if blocks == 0 {
		return false
	}
	h := spareHash(id, seed)
	b, _ := bits.Mul64(h, blocks)
	blk := spare[b*spareBlockBytes : b*spareBlockBytes+spareBlockBytes : b*spareBlockBytes+spareBlockBytes]
	lo := uint32(h)
	for j := 0; j < spareBlockWords; j++ {
		bit := (lo * spareSalts[j]) >> 26
		if binary.LittleEndian.Uint64(blk[8*j:])&(1<<bit) == 0 {
			return false
		}
	}
	return true
}

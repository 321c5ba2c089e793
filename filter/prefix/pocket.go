package prefix

import (
	"encoding/binary"
	"math/bits"
)

// Pocket dictionary PD(Q=25, R=8, k=25) in 32 bytes (paper section 5.2.1).
//
// The bin is read as four little-endian 64-bit words w0..w3:
//
//	w0 bits 0-5   field: the maximum quotient (0..24) once the bin has
//	              overflowed; binNotOverflowed (bit 5 alone) while it has not
//	w0 bits 6-55  the 50-bit unary header: for quotients 0..24 in order, one 0
//	              per element of that quotient's list followed by a 1
//	w0 byte 7 and w1..w3 (bytes 8-31)
//	              the body: 25 one-byte remainders, sorted by (quotient,
//	              remainder); unused tail bytes are zero
//
// Because the bin keeps its fingerprints sorted, the maximum fingerprint of a
// full bin is (field, body[24]) (the relaxed invariant of section 5.2.3).
// Setting bit 5 while not overflowed makes field<<8|body[24] exceed every
// fingerprint, so one comparison decides whether a query needs the spare.
const (
	binBytes         = 32
	binCapacity      = 25 // k: fingerprints per bin
	numQuotients     = 25 // Q: quotient range
	fingerprintRange = numQuotients << 8
	headerShift      = 6
	headerBits       = numQuotients + binCapacity // 50
	headerMask       = 1<<headerBits - 1
	fieldMask        = 1<<headerShift - 1
	binNotOverflowed = 1 << 5

	lowBits  = 0x7f7f7f7f7f7f7f7f
	highBits = 0x8080808080808080
	byteOnes = 0x0101010101010101
	// body[0] is byte 7 of w0; the rest of w0 is the header.
	w0BodyMask = 0x8000000000000000
)

// zeroBytes returns a word with the high bit of every byte of x that is
// zero set, and no other bit (exact, no borrow propagation; Hacker's Delight
// 6-1).
func zeroBytes(x uint64) uint64 {
	y := (x & lowBits) + lowBits
	return ^(y | x | lowBits)
}

// hasZeroByte is non-zero iff some byte of x is zero (the high bits it sets
// are exact only up to the lowest zero byte).
func hasZeroByte(x uint64) uint64 {
	return (x - byteOnes) &^ x & highBits
}

// byteMask packs the high bit of each byte of z (as produced by zeroBytes)
// into the low 8 bits: bit j is set when byte j of z has its high bit set.
func byteMask(z uint64) uint64 {
	return ((z >> 7) * 0x0102040810204080) >> 56
}

// selectInByte[r][b] is the position of the (r+1)-th set bit of byte b
// (8 when b has at most r set bits).
var selectInByte = func() (t [8][256]uint8) {
	for b := 0; b < 256; b++ {
		for r := range t {
			t[r][b] = 8
		}
		r := 0
		for i := 0; i < 8; i++ {
			if b>>i&1 == 1 {
				t[r][b] = uint8(i)
				r++
			}
		}
	}
	return t
}()

// selectBit returns the position of the (k+1)-th set bit of x (k counts from
// zero), or 64 when x has at most k set bits. It is branch-free broadword
// select: per-byte popcounts, their prefix sums by one multiplication, a SWAR
// comparison to find the byte, and a table for the bit within the byte.
func selectBit(x uint64, k uint) uint {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	if k >= 64 {
		return 64
	}
	c := x - (x>>1)&0x5555555555555555
	c = c&0x3333333333333333 + (c>>2)&0x3333333333333333
	c = (c + c>>4) & 0x0f0f0f0f0f0f0f0f
	c *= ones // byte j: set bits in bytes 0..j (at most 64)
	// High bit of byte j set iff c_j > k (no carries: c_j + 127 - k < 256).
	gt := (c + (127-uint64(k))*ones) & highs
	if gt == 0 {
		return 64
	}
	shift := uint(bits.TrailingZeros64(gt)) &^ 7 // 8 × the byte's index
	before := uint(c<<8>>shift) & 0xff
	return shift + uint(selectInByte[(k-before)&7][uint8(x>>shift)])
}

// listContains reports whether any match in v (bit i: body[i] matched) lies
// in list q of the header, finding the list's body range with select.
func listContains(header, q, v uint64) bool {
	start := uint64(0)
	if q > 0 {
		start = uint64(selectBit(header, uint(q-1))) + 1 - q
	}
	end := uint64(selectBit(header, uint(q))) - q
	if end <= start || end > binCapacity {
		return false
	}
	return v&(1<<end-1)>>start<<start != 0
}

// validatePD checks that pd is exactly what layoutBin produces for some set
// of fingerprints. It returns the number of fingerprints and
// whether the bin overflowed.
func validatePD(pd []byte) (count int, overflowed bool, ok bool) {
	pd = pd[:binBytes:binBytes]
	w0 := binary.LittleEndian.Uint64(pd[0:8])
	header := (w0 >> headerShift) & headerMask
	if bits.OnesCount64(header) != numQuotients {
		return 0, false, false
	}
	// The header ends with the 25th one; everything after it is zero by
	// construction of the bit length.
	t := bits.Len64(header) - numQuotients
	if t < 0 || t > binCapacity {
		return 0, false, false
	}
	for i := t; i < binCapacity; i++ {
		if pd[7+i] != 0 {
			return 0, false, false
		}
	}
	// Visit the elements (the header's zeros): element i at header position
	// pos has quotient pos-i. Fingerprints must be strictly increasing.
	prev := -1
	last := 0
	elements := ^header & (1<<(numQuotients+uint(t)) - 1)
	for i := 0; elements != 0; i++ {
		pos := bits.TrailingZeros64(elements)
		elements &= elements - 1
		q := pos - i
		fp := q<<8 | int(pd[(7+i)&31])
		if fp <= prev {
			return 0, false, false
		}
		prev = fp
		last = q
	}
	field := int(pd[0] & fieldMask)
	switch {
	case field == binNotOverflowed:
		return t, false, true
	case field < numQuotients && t == binCapacity && field == last:
		return t, true, true
	}
	return 0, false, false
}

package stacked

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/adaptkv/adaptkv/filter"
)

// layer is one Bloom filter of the stack: m bits in 64-bit words, k probes
// by double hashing (Kirsch and Mitzenmacher) from the key's 64-bit hash
// remixed with the layer's salt, so layers make independent mistakes.
type layer struct {
	words []uint64
	m     uint64 // bits
	k     int
	salt  uint64
}

// minLayerBits is the smallest layer, as in the authors' code (FILTER-NOTES:
// at least 2000 bits), rounded to whole words.
const minLayerBits = 2048

// maxProbes bounds k (a rate of 2^-30 and below gains nothing here).
const maxProbes = 30

// newLayer sizes a layer for n elements at rate alpha: m = n s(alpha) bits
// (at least minLayerBits), k = round(-log2 alpha) probes (FILTER-NOTES).
func newLayer(n int, alpha float64, salt uint64) *layer {
	m := uint64(math.Ceil(float64(n) * bloomBits(alpha)))
	m = max(m, minLayerBits)
	m = (m + 63) &^ 63
	k := int(math.Round(-math.Log2(alpha)))
	k = min(max(k, 1), maxProbes)
	return &layer{words: make([]uint64, m/64), m: m, k: k, salt: salt}
}

// probes returns the double-hashing start and step of h in this layer.
func (l *layer) probes(h uint64) (a, b uint64) {
	x := filter.Mix64(h ^ l.salt)
	return x, filter.Mix64(x) | 1
}

// reduce maps a 64-bit value to [0, m) by multiply-shift.
func (l *layer) reduce(x uint64) uint64 {
	hi, _ := bits.Mul64(x, l.m)
	return hi
}

func (l *layer) add(h uint64) {
	a, b := l.probes(h)
	for i := 0; i < l.k; i++ {
		p := l.reduce(a)
		l.words[p>>6] |= 1 << (p & 63)
		a += b
	}
}

func (l *layer) contains(h uint64) bool {
	a, b := l.probes(h)
	for i := 0; i < l.k; i++ {
		p := l.reduce(a)
		if l.words[p>>6]&(1<<(p&63)) == 0 {
			return false
		}
		a += b
	}
	return true
}

// Layer encoding: m (bits) u64 | k u8 | salt u64 | words.
const layerHeader = 8 + 1 + 8

func (l *layer) appendTo(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, l.m)
	b = append(b, byte(l.k))
	b = binary.LittleEndian.AppendUint64(b, l.salt)
	for _, w := range l.words {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return b
}

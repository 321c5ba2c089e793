package prefix

import (
	"errors"
	"math/bits"
)

// A fix group holds the fix information of fixGroupBins consecutive bins as
// one immutable bit string, so that a fix costs about 10 bits (most
// extensions are 1 or 2 bits long) and a bin about 3 bits of bookkeeping:
//
//	words 0-3   mask: bit j set when bin j of the group has fixes
//	words 4-7   directory: 16 offsets of 16 bits, where the entries of the
//	            first fixed bin of each run of 16 bins start in the stream
//	words 8-    the entry stream, bins in order, a bin's entries oldest
//	            first, each entry:
//	              slot (5 bits; 31: a fingerprint in the spare)
//	              L in unary (L-1 zero bits then a one for a slot fix,
//	              which has L >= 1; L zero bits then a one for a spare fix)
//	              the L extension bits
//	              the fingerprint (13 bits; spare entries only)
//	              a last-of-its-bin flag (1 bit)
//
// A query skips at most 15 bins' entries to reach its own.
const (
	fixGroupBins  = 256
	fixSubBins    = 16
	fixMaskWords  = fixGroupBins / 64
	fixDirWords   = fixGroupBins / fixSubBins / 4
	fixHeadWords  = fixMaskWords + fixDirWords
	slotBits      = 5
	fpBits        = 13
	maxStreamBits = 1<<16 - 1
	// maxBinFixes bounds one bin's fixes; a fix beyond it drops the bin's
	// oldest first (the bin's fix information is rebuilt, as a TAF block
	// whose selectors overflow).
	maxBinFixes = 8
)

// fix is one fix of a bin: a prefix of L extension bits. The fixes of one
// slot (of one spare fingerprint) form a set, consecutive in the bin: every
// key stored at the slot matches one of them, and a query matching none is
// rejected. Usually the set is one prefix; a slot that stores several keys
// (equal fingerprints) may need one per key. L = 0 (spare only) says that
// no key has the fingerprint.
type fix struct {
	j    uint8 // the bin's index in its group
	slot uint8
	l    uint8
	bits uint32 // the L <= maxExtLen (24) extension bits
	fp   uint16 // spare fixes only
}

// same reports whether x and y belong to the same slot's set (the same
// spare fingerprint) of the same bin.
func (x fix) same(y fix) bool {
	return x.j == y.j && x.slot == y.slot && (x.slot != spareSlot || x.fp == y.fp)
}

// passes reports whether a key with extension bits ext survives x.
// An exclusion (L = 0) lets no key through.
func (x fix) passes(ext uint64) bool {
	return x.l > 0 && x.matches(ext)
}

// matches reports whether ext starts with x's prefix (always, for L = 0).
func (x fix) matches(ext uint64) bool {
	return (ext^uint64(x.bits))&(1<<x.l-1) == 0
}

// fixGroup is an encoded group; see above.
type fixGroup struct {
	w []uint64
}

// fixGroupOverhead is a group's memory besides its words: the struct with
// its slice header, the group pointer's share and allocation rounding.
const fixGroupOverhead = 40

func (g *fixGroup) size() int { return fixGroupOverhead + 8*len(g.w) }

// allows reports whether bin j's fixes let a key whose fingerprint matched
// slot (for spareSlot, fingerprint fp in the spare) with extension bits ext
// through: true when the slot has no fixes or one of them matches ext. It
// is the query path: lock-free, no allocation.
func (g *fixGroup) allows(j uint64, slot uint8, fp, ext uint64) bool {
	word := g.w[j/64]
	if word>>(j%64)&1 == 0 {
		return true
	}
	s := j / fixSubBins
	r := bitReader{w: g.w, pos: fixHeadWords*64 + uint(g.w[fixMaskWords+s/4]>>(16*(s%4))&0xffff)}
	before := bits.OnesCount64(word >> (16 * (j % 64 / 16)) & (1<<(j%fixSubBins) - 1))
	for ; before > 0; before-- {
		for !r.entry(nil) {
		}
	}
	fixed := false
	var x fix
	for {
		last := r.entry(&x)
		if x.slot == slot && (slot != spareSlot || uint64(x.fp) == fp) {
			if x.passes(ext) {
				return true
			}
			fixed = true
		}
		if last {
			return !fixed
		}
	}
}

// fixes appends all fixes of the group to dst, bins in order.
func (g *fixGroup) fixes(dst []fix) []fix {
	if g == nil {
		return dst
	}
	r := bitReader{w: g.w, pos: fixHeadWords * 64}
	for wi := 0; wi < fixMaskWords; wi++ {
		for m := g.w[wi]; m != 0; m &= m - 1 {
			j := uint8(wi*64 + bits.TrailingZeros64(m))
			for {
				x := fix{j: j}
				last := r.entry(&x)
				dst = append(dst, x)
				if last {
					break
				}
			}
		}
	}
	return dst
}

// encodeFixGroup encodes fixes (sorted by bin, a bin's oldest first) as a
// group; nil for none. It fails when the stream would exceed its 16-bit
// offsets.
func encodeFixGroup(fixes []fix) (*fixGroup, bool) {
	if len(fixes) == 0 {
		return nil, true
	}
	w := bitWriter{w: make([]uint64, fixHeadWords, fixHeadWords+1+len(fixes)/5), pos: fixHeadWords * 64}
	for i, x := range fixes {
		j := uint64(x.j)
		if i == 0 || fixes[i-1].j != x.j {
			if w.pos-fixHeadWords*64 > maxStreamBits {
				return nil, false
			}
			w.w[j/64] |= 1 << (j % 64)
			s := j / fixSubBins
			if prev := int(fixes[max(i-1, 0)].j) / fixSubBins; i == 0 || uint64(prev) != s {
				w.w[fixMaskWords+s/4] |= uint64(w.pos-fixHeadWords*64) << (16 * (s % 4))
			}
		}
		w.write(uint64(x.slot), slotBits)
		u := uint(x.l) - minExtLen(x.slot)
		w.write(1<<u, u+1)
		w.write(uint64(x.bits), uint(x.l))
		if x.slot == spareSlot {
			w.write(uint64(x.fp), fpBits)
		}
		last := uint64(0)
		if i == len(fixes)-1 || fixes[i+1].j != x.j {
			last = 1
		}
		w.write(last, 1)
	}
	return &fixGroup{w: w.w}, true
}

// minExtLen is the shortest extension of a fix of slot: 1 for a slot of
// the bin, 0 for the spare (where L = 0 is an exclusion).
func minExtLen(slot uint8) uint {
	if slot == spareSlot {
		return 0
	}
	return 1
}

// bitReader reads a group's bit string, low bits first.
type bitReader struct {
	w   []uint64
	pos uint
}

// read returns the next n (<= 32) bits.
func (r *bitReader) read(n uint) uint64 {
	i, off := r.pos/64, r.pos%64
	v := r.w[i] >> off
	if off+n > 64 {
		v |= r.w[i+1] << (64 - off)
	}
	r.pos += n
	return v & (1<<n - 1)
}

// unary returns the number of zero bits before the next one bit and moves
// past that one.
func (r *bitReader) unary() uint {
	n := uint(0)
	for {
		i, off := r.pos/64, r.pos%64
		if x := r.w[i] >> off; x != 0 {
			z := uint(bits.TrailingZeros64(x))
			r.pos += z + 1
			return n + z
		}
		n += 64 - off
		r.pos += 64 - off
	}
}

// entry reads one entry into x (nil: skip it) and returns its last flag.
func (r *bitReader) entry(x *fix) bool {
	slot := uint8(r.read(slotBits))
	l := r.unary() + minExtLen(slot)
	b := r.read(l)
	var fp uint64
	if slot == spareSlot {
		fp = r.read(fpBits)
	}
	if x != nil {
		x.slot, x.l, x.bits, x.fp = slot, uint8(l), uint32(b), uint16(fp)
	}
	return r.read(1) == 1
}

// bitWriter appends bits to a word slice, low bits first.
type bitWriter struct {
	w   []uint64
	pos uint
}

func (w *bitWriter) write(v uint64, n uint) {
	for n > 0 {
		i, off := w.pos/64, w.pos%64
		if int(i) == len(w.w) {
			w.w = append(w.w, 0)
		}
		k := min(n, 64-off)
		w.w[i] |= (v & (1<<k - 1)) << off
		v >>= k
		n -= k
		w.pos += k
	}
}

var errBadGroup = errors.New("malformed fix group")

// decodeFixGroup parses and validates an encoded group read from a file:
// every entry well formed, the directory and the mask consistent with the
// stream, no trailing bits. It returns the group's fixes.
func decodeFixGroup(w []uint64) ([]fix, error) {
	if len(w) <= fixHeadWords {
		return nil, errBadGroup
	}
	total := uint(len(w)) * 64
	r := bitReader{w: w, pos: fixHeadWords * 64}
	need := func(n uint) bool { return r.pos+n <= total }
	var out []fix
	for wi := 0; wi < fixMaskWords; wi++ {
		for m := w[wi]; m != 0; m &= m - 1 {
			j := uint8(wi*64 + bits.TrailingZeros64(m))
			count := 0
			for {
				if !need(slotBits) {
					return nil, errBadGroup
				}
				x := fix{j: j, slot: uint8(r.read(slotBits))}
				l := minExtLen(x.slot)
				for {
					if !need(1) {
						return nil, errBadGroup
					}
					if r.read(1) == 1 {
						break
					}
					if l++; l > maxExtLen {
						return nil, errBadGroup
					}
				}
				if !need(l) {
					return nil, errBadGroup
				}
				x.l, x.bits = uint8(l), uint32(r.read(l))
				if x.slot == spareSlot {
					if !need(fpBits + 1) {
						return nil, errBadGroup
					}
					x.fp = uint16(r.read(fpBits))
				}
				if !need(1) {
					return nil, errBadGroup
				}
				out = append(out, x)
				count++
				if r.read(1) == 1 {
					break
				}
			}
			if count > maxBinFixes {
				return nil, errBadGroup
			}
		}
	}
	again, ok := encodeFixGroup(out)
	if !ok || len(again.w) != len(w) {
		return nil, errBadGroup
	}
	for i := range w {
		if w[i] != again.w[i] {
			return nil, errBadGroup
		}
	}
	return out, nil
}

package quotient

// Integer arithmetic codes that pack the per-slot adaptivity state of one
// 64-slot block into 56 bits (paper, section 5 and appendix C).
//
// A code is the low end of a nested interval of [0, 2^56): each of the 64
// symbols narrows the current range r to the sub-interval of its symbol, whose
// bounds are sums of right shifts of r (probabilities approximated by sums of
// powers of two), so encoder and decoder compute bit-identical intervals.
// Encoding fails (the block must be rebuilt) when a symbol's width reaches 0.
// Symbol 0 (selector 0, empty extension) always takes the bottom of the
// interval, so a block in its pristine state codes to 0 and, while decoding, a
// remaining value of 0 means every later symbol is 0.

const (
	codeBits  = 56
	codeRange = uint64(1) << codeBits
	codeMask  = codeRange - 1
	// maxSelCode is the largest selector the TAF code can represent.
	maxSelCode = 6
	// maxExtCode is the longest extension the exAF code can represent (its
	// per-pattern width r>>(2l+4) must stay positive for r <= 2^56).
	maxExtCode = 24
)

// selInterval returns the start and width of selector value s within a range
// of width r (appendix C.2 probability table).
func selInterval(r uint64, s uint8) (lo, w uint64) {
	p := (r >> 1) + (r >> 2) + (r >> 5) // 0.78125
	if s == 0 {
		return 0, p
	}
	lo = p
	p = (r >> 3) + (r >> 4) + (r >> 7) + (r >> 9) // 0.19727
	if s == 1 {
		return lo, p
	}
	lo += p
	p = (r >> 6) + (r >> 8) // 0.01953
	if s == 2 {
		return lo, p
	}
	lo += p
	p = (r >> 10) + (r >> 11) // 0.001465
	if s == 3 {
		return lo, p
	}
	lo += p
	p = (r >> 14) + (r >> 16) // 7.6e-5
	if s == 4 {
		return lo, p
	}
	lo += p
	p = (r >> 19) + (r >> 20) + (r >> 23) // 3.0e-6
	if s == 5 {
		return lo, p
	}
	lo += p
	p = (r >> 24) + (r >> 25) + (r >> 26) // 1.0e-7
	if s == 6 {
		return lo, p
	}
	return 0, 0
}

// leadingZeroSymbols returns how many symbols at the start of code are 0,
// the largest k with code < zr[k] (zr is decreasing and code < zr[0]): a
// branch-free binary search.
func leadingZeroSymbols(code uint64, zr *[65]uint64) int {
	lo := 0
	for step := 32; step > 0; step >>= 1 {
		if code < zr[lo+step] {
			lo += step
		}
	}
	if code < zr[64] {
		lo = 64
	}
	return lo
}

// selZeroRange[k] is the range left after coding k zero selectors.
var selZeroRange = func() (z [65]uint64) {
	z[0] = codeRange
	for k := 1; k <= 64; k++ {
		_, z[k] = selInterval(z[k-1], 0)
	}
	return
}()

// encodeSelectors codes 64 selector values; ok is false on overflow.
func encodeSelectors(sel *[64]uint8) (code uint64, ok bool) {
	low, r := uint64(0), codeRange
	for i := 0; i < 64; i++ {
		lo, w := selInterval(r, sel[i])
		if w == 0 {
			return 0, false
		}
		low += lo
		r = w
	}
	return low, true
}

// decodeSelectors decodes the selectors of positions [0, n) into out. With
// full it checks every position (validation); otherwise it stops as soon as
// the remaining value is 0 (all later selectors are 0). ok is false when the
// code is not a valid selector code.
func decodeSelectors(code uint64, n int, out *[64]uint8, full bool) bool {
	return decodeSelectorsFrom(code, 0, n, out, full)
}

// decodeSelectorsFrom is decodeSelectors for callers that only read
// positions [from, n): it may leave out[0:from] unwritten.
func decodeSelectorsFrom(code uint64, from, n int, out *[64]uint8, full bool) bool {
	v, r := code, codeRange
	i := 0
	if !full {
		// Leading zero selectors cost nothing to skip: every code starts
		// from the same range, so the range after k zeros is the constant
		// selZeroRange[k], and the first k symbols are all 0 exactly when
		// code < selZeroRange[k].
		lo := leadingZeroSymbols(code, &selZeroRange)
		for j := from; j < min(lo, n); j++ {
			out[j] = 0
		}
		if lo >= n {
			return true
		}
		i, r = lo, selZeroRange[lo]
	}
	for ; i < n; i++ {
		if v == 0 && !full {
			for j := max(i, from); j < n; j++ {
				out[j] = 0
			}
			return true
		}
		p := (r >> 1) + (r >> 2) + (r >> 5)
		if v < p {
			out[i], r = 0, p
			continue
		}
		v -= p
		p = (r >> 3) + (r >> 4) + (r >> 7) + (r >> 9)
		if v < p {
			out[i], r = 1, p
			continue
		}
		v -= p
		var s uint8 = 2
		for ; s <= maxSelCode; s++ {
			_, p = selInterval(r, s)
			if v < p {
				break
			}
			v -= p
		}
		if s > maxSelCode || p == 0 {
			return false
		}
		out[i], r = s, p
	}
	return v < r
}

// Extension code (appendix C.4): the empty extension has probability
// 1/2+1/4+1/8+1/32; length l >= 1 has (2^-5+2^-6)*2^-(l-1) in total, split
// evenly over its 2^l bit patterns.

func extWidth0(r uint64) uint64 { return (r >> 1) + (r >> 2) + (r >> 3) + (r >> 5) }

func extLenBlock(r uint64, l uint) uint64 { return (r >> (4 + l)) + (r >> (5 + l)) }

func extUnit(r uint64, l uint) uint64 { return (r >> (2*l + 4)) + (r >> (2*l + 5)) }

// extInterval returns the sub-interval of extension (l, x), x < 2^l.
func extInterval(r uint64, l uint8, x uint32) (lo, w uint64) {
	if l == 0 {
		return 0, extWidth0(r)
	}
	lo = extWidth0(r)
	for i := uint(1); i < uint(l); i++ {
		lo += extLenBlock(r, i)
	}
	u := extUnit(r, uint(l))
	return lo + uint64(x)*u, u
}

// extZeroRange[k] is the range left after coding k empty extensions.
var extZeroRange = func() (z [65]uint64) {
	z[0] = codeRange
	for k := 1; k <= 64; k++ {
		z[k] = extWidth0(z[k-1])
	}
	return
}()

// encodeExtensions codes the 64 extensions (lengths and bit patterns).
func encodeExtensions(lens *[64]uint8, pats *[64]uint32) (code uint64, ok bool) {
	low, r := uint64(0), codeRange
	for i := 0; i < 64; i++ {
		if lens[i] > maxExtCode {
			return 0, false
		}
		lo, w := extInterval(r, lens[i], pats[i])
		if w == 0 {
			return 0, false
		}
		low += lo
		r = w
	}
	return low, true
}

// decodeExtensions decodes positions [0, n); see decodeSelectors.
func decodeExtensions(code uint64, n int, lens *[64]uint8, pats *[64]uint32, full bool) bool {
	v, r := code, codeRange
	i := 0
	if !full {
		// Skip the leading empty extensions in one step (see
		// decodeSelectors).
		lo := leadingZeroSymbols(code, &extZeroRange)
		k := min(lo, n)
		for j := 0; j < k; j++ {
			lens[j], pats[j] = 0, 0
		}
		if k == n {
			return true
		}
		i, r = lo, extZeroRange[lo]
	}
	for ; i < n; i++ {
		if v == 0 && !full {
			for j := i; j < n; j++ {
				lens[j], pats[j] = 0, 0
			}
			return true
		}
		w0 := extWidth0(r)
		if v < w0 {
			lens[i], pats[i], r = 0, 0, w0
			continue
		}
		v -= w0
		found := false
		for l := uint(1); l <= maxExtCode; l++ {
			blk := extLenBlock(r, l)
			if v < blk {
				u := extUnit(r, l)
				if u == 0 {
					return false
				}
				var x uint64
				if l <= 8 {
					// Short patterns: find x = v/u bit by bit with
					// multiplications (cheaper than a 64-bit division).
					for bit := l; bit > 0; bit-- {
						if c := x | 1<<(bit-1); c*u <= v {
							x = c
						}
					}
					if (x+1)*u <= v {
						return false // v lies past the last pattern
					}
				} else {
					x = v / u
				}
				if x >= 1<<l {
					return false
				}
				v -= x * u
				lens[i], pats[i], r = uint8(l), uint32(x), u
				found = true
				break
			}
			v -= blk
		}
		if !found {
			return false
		}
	}
	return v < r
}

// extensionAt decodes only the extension at position pos (queries). ok is
// false on an invalid code.
func extensionAt(code uint64, pos int) (l uint8, pat uint32, ok bool) {
	lo := leadingZeroSymbols(code, &extZeroRange)
	if lo > pos {
		return 0, 0, true
	}
	v, r := code, extZeroRange[lo]
	for i := lo; i <= pos; i++ {
		if v == 0 {
			return 0, 0, true
		}
		w0 := extWidth0(r)
		if v < w0 {
			l, pat, r = 0, 0, w0
			continue
		}
		v -= w0
		found := false
		for ll := uint(1); ll <= maxExtCode; ll++ {
			blk := extLenBlock(r, ll)
			if v < blk {
				u := extUnit(r, ll)
				if u == 0 {
					return 0, 0, false
				}
				var x uint64
				if ll <= 8 {
					for bit := ll; bit > 0; bit-- {
						if c := x | 1<<(bit-1); c*u <= v {
							x = c
						}
					}
				} else {
					x = v / u
				}
				if x >= 1<<ll {
					return 0, 0, false
				}
				v -= x * u
				l, pat, r = uint8(ll), uint32(x), u
				found = true
				break
			}
			v -= blk
		}
		if !found {
			return 0, 0, false
		}
	}
	return l, pat, true
}

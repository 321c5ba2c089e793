package quotient

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/internal/seqlock"
	"github.com/spaolacci/murmur3"
)

// Block layout, in 64-bit words (wpb = words per block):
//
//	0          occupieds: bit i set when some key has home slot 64b+i
//	1          runends:   bit i set when slot 64b+i ends a run
//	2          low 8 bits: offset (saturated at 255); high 56 bits: code
//	3..3+r-1   64 packed r-bit remainders, slot i at bits [i*r, (i+1)*r)
//	3+r..3+r+7 (uTAF only) 64 selector bytes
const (
	wOcc      = 0
	wRunends  = 1
	wMeta     = 2
	wRems     = 3
	offsetSat = 255
)

// qf is the quotient filter every variant shares; v is what its variant adds
// (scheme.go).
type qf struct {
	variant Variant
	v       scheme
	static  bool   // !v.adaptive(): queries need no seqlock
	r       uint   // remainder bits
	remMask uint64 // (1<<r)-1
	seed    uint64
	hseed   uint32
	load    float64
	nq      uint64 // quotient range (home slots)
	nblocks int
	wpb     int // words per block
	n       int // distinct elements
	maxSel  uint8
	maxExt  uint8
	words   []uint64 // every access goes through sync/atomic

	sl     seqlock.Lock // adaptations publish under it; queries read under it
	mu     sync.Mutex   // serializes Adapt (taken before sl)
	remote filter.Remote

	forceRebuild bool // tests: rebuild the block on every adaptation

	adaptations atomic.Uint64
	rebuilds    atomic.Uint64
	remoteReads atomic.Uint64
}

func hashSeed(seed uint64) uint32 { return uint32(seed) ^ uint32(seed>>32) }

// params derived from kind and r.
func (f *qf) initParams() {
	f.remMask = uint64(1)<<f.r - 1
	f.hseed = hashSeed(f.seed)
	f.v = schemeOf(f.variant)
	f.static = !f.v.adaptive()
	f.wpb = wRems + int(f.r) + f.v.extraWords()
	chunks := 64 / f.r
	f.maxSel = uint8(min(uint(maxSelCode), chunks-1))
	f.maxExt = uint8(min(uint(maxExtCode), 64-f.r))
}

func (f *qf) hash(key []byte) (h1, h2 uint64) {
	return murmur3.Sum128WithSeed(key, f.hseed)
}

// quotient maps h1 onto [0, nq) by multiply-shift.
func quotient(h1, nq uint64) uint64 {
	hi, _ := bits.Mul64(h1, nq)
	return hi
}

// chunk is the remainder of tail under selector sel (section 3).
func (f *qf) chunk(tail uint64, sel uint8) uint64 {
	return (tail >> (uint(sel) * f.r)) & f.remMask
}

func (f *qf) load64(i int) uint64 { return atomic.LoadUint64(&f.words[i]) }

func (f *qf) meta(b int) uint64 { return f.load64(b*f.wpb + wMeta) }

// remAt returns the remainder stored in slot s.
func (f *qf) remAt(s int) uint64 {
	base := (s>>6)*f.wpb + wRems
	i := uint(s & 63)
	if f.r == 8 {
		return (f.load64(base+int(i>>3)) >> ((i & 7) * 8)) & 0xff
	}
	bit := i * f.r
	w, off := base+int(bit>>6), bit&63
	v := f.load64(w) >> off
	if off+f.r > 64 {
		v |= f.load64(w+1) << (64 - off)
	}
	return v & f.remMask
}

// uSelAt returns the plain selector of slot s (uTAF).
func (f *qf) uSelAt(s int) uint8 {
	base := (s>>6)*f.wpb + wRems + int(f.r)
	i := uint(s & 63)
	return uint8(f.load64(base+int(i>>3)) >> ((i & 7) * 8))
}

// Helpers on a private copy of one block's words (adaptation, build).

func getRemW(bw []uint64, r uint, i int) uint64 {
	bit := uint(i) * r
	w, off := wRems+int(bit>>6), bit&63
	v := bw[w] >> off
	if off+r > 64 {
		v |= bw[w+1] << (64 - off)
	}
	return v & (uint64(1)<<r - 1)
}

func setRemW(bw []uint64, r uint, i int, v uint64) {
	mask := uint64(1)<<r - 1
	v &= mask
	bit := uint(i) * r
	w, off := wRems+int(bit>>6), bit&63
	bw[w] = bw[w]&^(mask<<off) | v<<off
	if off+r > 64 {
		sh := 64 - off
		bw[w+1] = bw[w+1]&^(mask>>sh) | v>>sh
	}
}

func getSelW(bw []uint64, r uint, i int) uint8 {
	return uint8(bw[wRems+int(r)+i>>3] >> (uint(i&7) * 8))
}

func setSelW(bw []uint64, r uint, i int, s uint8) {
	w := wRems + int(r) + i>>3
	sh := uint(i&7) * 8
	bw[w] = bw[w]&^(0xff<<sh) | uint64(s)<<sh
}

// select64 returns the position of the k-th (0-based) set bit of x; x must
// have more than k set bits. Broadword: byte popcounts, their prefix sums,
// a parallel compare against k to find the byte, then a table (Vigna,
// "Broadword implementation of rank/select queries").
func select64(x uint64, k int) int {
	const l8, h8 = 0x0101010101010101, 0x8080808080808080
	s := x - ((x >> 1) & 0x5555555555555555)
	s = (s & 0x3333333333333333) + ((s >> 2) & 0x3333333333333333)
	s = (s + (s >> 4)) & 0x0f0f0f0f0f0f0f0f
	sums := s * l8 // byte j = set bits in bytes 0..j (at most 64: no carries)
	kk := uint64(k) & 63
	// Bytes whose prefix sum is <= k have their high bit set here.
	le := ((kk*l8 | h8) - sums) & h8
	place := uint(bits.OnesCount64(le)) * 8
	rank := kk - (((sums << 8) >> place) & 0xff)
	return int(place) + int(selectInByte[(x>>place)&0xff][rank&7])
}

var selectInByte = func() (t [256][8]uint8) {
	for b := 0; b < 256; b++ {
		k := 0
		for i := 0; i < 8; i++ {
			if b>>i&1 == 1 {
				t[b][k] = uint8(i)
				k++
			}
		}
	}
	return
}()

// selectRunend returns the position of the t-th (1-based) runend at or after
// slot pos, or -1 if there is none.
func (f *qf) selectRunend(pos, t int) int {
	b := pos >> 6
	if b >= f.nblocks || t <= 0 {
		return -1
	}
	x := f.load64(b*f.wpb+wRunends) &^ (uint64(1)<<uint(pos&63) - 1)
	for {
		c := bits.OnesCount64(x)
		if t <= c {
			return b*64 + select64(x, t-1)
		}
		t -= c
		b++
		if b >= f.nblocks {
			return -1
		}
		x = f.load64(b*f.wpb + wRunends)
	}
}

// blockOffset returns F_b, the number of slots at the start of block b taken
// by runs of quotients < 64b (RSQF offset, section 5). Offsets of 255 or
// more are stored saturated and recomputed from earlier blocks. -1 means the
// structure is inconsistent.
func (f *qf) blockOffset(b int) int {
	o := int(f.meta(b) & 0xff)
	if o < offsetSat {
		return o
	}
	b0 := b - 1
	for b0 > 0 && f.meta(b0)&0xff >= offsetSat {
		b0--
	}
	if b0 < 0 {
		return -1
	}
	F := int(f.meta(b0) & 0xff)
	if F >= offsetSat {
		return -1
	}
	for ; b0 < b; b0++ {
		F = f.nextOffset(b0, F)
		if F < 0 {
			return -1
		}
	}
	return F
}

// nextOffset computes F_{b+1} from F_b.
func (f *qf) nextOffset(b, F int) int {
	occ := f.load64(b*f.wpb + wOcc)
	if occ == 0 {
		return max(0, F-64)
	}
	e := f.selectRunend(b*64+F, bits.OnesCount64(occ))
	if e < 0 {
		return -1
	}
	return max(0, e-(b+1)*64+1)
}

// findRun returns the slots [start, end] of the run of quotient q; ok is
// false when q is not occupied. bad reports an inconsistent structure.
func (f *qf) findRun(q uint64) (start, end int, ok, bad bool) {
	b := int(q >> 6)
	i := uint(q & 63)
	occ := f.load64(b*f.wpb + wOcc)
	if occ>>i&1 == 0 {
		return 0, 0, false, false
	}
	t := bits.OnesCount64(occ & (uint64(2)<<i - 1))
	F := f.blockOffset(b)
	if F < 0 {
		return 0, 0, false, true
	}
	end = f.selectRunend(b*64+F, t)
	if end < int(q) {
		return 0, 0, false, true
	}
	// Start: one past the previous runend if it lies in [q, end), else q.
	start = int(q)
	for w := end >> 6; w >= int(q>>6); w-- {
		x := f.load64(w*f.wpb + wRunends)
		if w == end>>6 {
			x &= uint64(1)<<uint(end&63) - 1
		}
		if x != 0 {
			p := w*64 + 63 - bits.LeadingZeros64(x)
			if p >= int(q) {
				start = p + 1
			}
			break
		}
	}
	return start, end, true, false
}

// MayContain implements Filter.
func (f *qf) MayContain(key []byte) bool {
	h1, h2 := f.hash(key)
	return f.mayContainHash(h1, h2)
}

func (f *qf) mayContainHash(h1, h2 uint64) bool {
	if f.static {
		return f.query(h1, h2)
	}
	if s, ok := f.sl.Begin(); ok { // the common case, inline
		if res := f.query(h1, h2); f.sl.Valid(s) {
			return res
		}
	}
	return seqlock.Read(&f.sl, func() bool { return f.query(h1, h2) })
}

// mayContainUnsync is the query without the sequence check (benchmarks).
func (f *qf) mayContainUnsync(key []byte) bool {
	h1, h2 := f.hash(key)
	return f.query(h1, h2)
}

// query answers from the local state; callers handle concurrency.
func (f *qf) query(h1, h2 uint64) bool {
	q := quotient(h1, f.nq)
	start, end, ok, bad := f.findRun(q)
	if bad {
		return true
	}
	if !ok {
		return false
	}
	// Every query that finds a run ends here: the known variants are
	// called directly (a type switch, no indirect call on the hot path;
	// measured: the interface call cost table Gets 2.5-4%); a variant
	// without a case here works through the interface.
	switch v := f.v.(type) {
	case tafScheme:
		return v.matchRun(f, q, h2, start, end)
	case exafScheme:
		return v.matchRun(f, q, h2, start, end)
	case rsqfScheme:
		return v.matchRun(f, q, h2, start, end)
	case utafScheme:
		return v.matchRun(f, q, h2, start, end)
	case cafScheme:
		return v.matchRun(f, q, h2, start, end)
	}
	return f.v.matchRun(f, q, h2, start, end)
}

// matchRun of the TAF: a slot matches when its remainder is the chunk of
// h2 its selector picks.
func (tafScheme) matchRun(f *qf, _, h2 uint64, start, end int) bool {
	var sels [64]uint8
	cur := -1
	zero := true
	for s := start; s <= end; s++ {
		if b := s >> 6; b != cur {
			cur = b
			code := f.meta(b) >> 8
			zero = code == 0
			if !zero {
				upto := min(end-b*64, 63) + 1
				if !decodeSelectorsFrom(code, max(start-b*64, 0), upto, &sels, false) {
					return true
				}
			}
		}
		var sel uint8
		if !zero {
			sel = sels[s&63]
		}
		if f.remAt(s) == f.chunk(h2, sel) {
			return true
		}
	}
	return false
}

// matchRun of the exAF: a slot matches when its remainder and its
// extension (if any) are h2's.
func (exafScheme) matchRun(f *qf, _, h2 uint64, start, end int) bool {
	want := h2 & f.remMask
	ext := h2 >> f.r
	for s := end; s >= start; s-- {
		if f.remAt(s) != want {
			continue
		}
		// Quotient and remainder match: only now look at the extension.
		b := s >> 6
		code := f.meta(b) >> 8
		if code == 0 {
			return true
		}
		l, pat, ok := extensionAt(code, s&63)
		if !ok || extMatches(ext, l, pat) {
			return true
		}
	}
	return false
}

// Variant implements Filter.
func (f *qf) Variant() Variant { return f.variant }

// Len implements Filter.
func (f *qf) Len() int { return f.n }

// Slots implements Filter.
func (f *qf) Slots() int { return f.nblocks * 64 }

// SizeBytes implements Filter.
func (f *qf) SizeBytes() int { return len(f.words) * 8 }

// BitsPerKey implements Filter.
func (f *qf) BitsPerKey() float64 {
	if f.n == 0 {
		return 0
	}
	return float64(f.SizeBytes()*8) / float64(f.n)
}

// Stats implements filter.Adaptive. Rebuilds counts blocks reset because
// their code overflowed; RemoteReads counts one read per fixed false
// positive (the colliding run), one more per rebuilt TAF/uTAF block (its 64
// tails), and one per block read by Verify.
func (f *qf) Stats() filter.Stats {
	return filter.Stats{
		Adaptations: f.adaptations.Load(),
		Rebuilds:    f.rebuilds.Load(),
		RemoteReads: f.remoteReads.Load(),
	}
}

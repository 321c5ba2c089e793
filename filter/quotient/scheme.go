package quotient

import (
	"fmt"

	"github.com/adaptkv/adaptkv/filter"
)

// scheme is what one Variant of the family adds to the rank-and-select
// quotient filter they share (filter.go): what a slot holds beyond its
// remainder (nothing, selectors, extensions, a block cache), and so how a
// query tells a matching remainder from a present key, how an adaptation
// reads, checks and fixes a block, and how Decode and Verify check it.
// Each variant has one implementation, chosen once by schemeOf when a
// filter is built or decoded; adding a variant is one type here and one case
// there (the taf and exaf queries, matchRun, sit in filter.go beside the
// shared query). docs/ARCHITECTURE.md, "Filter kinds", says where kinds
// register.
type scheme interface {
	// adaptive reports whether Adapt fixes false positives (the rsqf's
	// local state never changes, so its queries skip the seqlock).
	adaptive() bool
	// extraWords is the words per block beyond the shared layout.
	extraWords() int
	// matchRun answers the query with tail h2 whose home slot q has the
	// run [start, end] (the run exists: the rsqf part said "maybe").
	matchRun(f *qf, q, h2 uint64, start, end int) bool
	// adapt fixes the false positive (h1, h2), under f.mu.
	adapt(f *qf, h1, h2 uint64) error
	// decodeBlock reads the per-slot state of block b, whose words are bw,
	// into st (strict: reject non-canonical codes, as Verify does).
	decodeBlock(f *qf, b int, bw []uint64, st *slotState, strict bool) error
	// matches reports whether slot i, holding remainder rem with state st,
	// answers "present" for a key with tail t.
	matches(f *qf, st *slotState, i int, rem, t uint64) bool
	// verifySlot reports whether slot i of home slot q, holding rem, agrees
	// with its stored key's tail t (Verify).
	verifySlot(f *qf, st *slotState, i int, q, rem, t uint64) bool
	// fixBlock fixes the colliding slots mine of block w (adapt's shared
	// path, adaptRun); it only changes w.bw.
	fixBlock(f *qf, w *blockWork, mine []int, tails []uint64, start int, h2 uint64) (changed bool, rebuilds int, err error)
	// validateCode checks the code word (and any extra words) of block b,
	// whose words are bw (Decode).
	validateCode(f *qf, b int, bw []uint64) error
}

// slotState is the decoded adaptivity state of one block's 64 slots.
type slotState struct {
	sels [64]uint8  // taf, utaf: selector of each slot
	lens [64]uint8  // exaf: extension length of each slot
	pats [64]uint32 // exaf: extension bits of each slot
}

// schemeOf returns the scheme of a valid variant.
func schemeOf(k Variant) scheme {
	switch k {
	case TAF:
		return tafScheme{}
	case UTAF:
		return utafScheme{}
	case ExAF:
		return exafScheme{}
	case CAF:
		return cafScheme{}
	}
	return rsqfScheme{}
}

// rsqfScheme is the plain RSQF: a remainder per slot, static.
type rsqfScheme struct{}

func (rsqfScheme) adaptive() bool  { return false }
func (rsqfScheme) extraWords() int { return 0 }
func (rsqfScheme) matchRun(f *qf, _, h2 uint64, start, end int) bool {
	want := h2 & f.remMask
	for s := end; s >= start; s-- {
		if f.remAt(s) == want {
			return true
		}
	}
	return false
}
func (rsqfScheme) adapt(*qf, uint64, uint64) error { return filter.ErrNotAdaptive }
func (rsqfScheme) decodeBlock(*qf, int, []uint64, *slotState, bool) error {
	return nil
}
func (rsqfScheme) matches(f *qf, _ *slotState, _ int, rem, t uint64) bool {
	return rem == t&f.remMask
}
func (rsqfScheme) verifySlot(f *qf, _ *slotState, _ int, _, rem, t uint64) bool {
	return rem == t&f.remMask
}
func (rsqfScheme) fixBlock(*qf, *blockWork, []int, []uint64, int, uint64) (bool, int, error) {
	return false, 0, nil
}
func (rsqfScheme) validateCode(_ *qf, b int, bw []uint64) error { return noCode(b, bw) }

// noCode checks that a kind without a code word left it zero.
func noCode(b int, bw []uint64) error {
	if bw[wMeta]>>8 != 0 {
		return corrupt("block %d: code set on a kind without codes", b)
	}
	return nil
}

// selectorSlots is what the TAF and the uTAF share: a slot matches a tail
// when its remainder is the chunk of the tail its selector picks, and a
// false positive is fixed in the slots it collides with (adaptRun).
type selectorSlots struct{}

func (selectorSlots) adaptive() bool                   { return true }
func (selectorSlots) adapt(f *qf, h1, h2 uint64) error { return f.adaptRun(h1, h2) }
func (selectorSlots) matches(f *qf, st *slotState, i int, rem, t uint64) bool {
	return rem == f.chunk(t, st.sels[i])
}
func (v selectorSlots) verifySlot(f *qf, st *slotState, i int, _, rem, t uint64) bool {
	return v.matches(f, st, i, rem, t)
}

// tafScheme is the TAF: a selector per slot, arithmetic-coded per block
// (section 3; adaptation section 4 and appendix B).
type tafScheme struct{ selectorSlots }

func (tafScheme) extraWords() int { return 0 }
func (tafScheme) decodeBlock(_ *qf, b int, bw []uint64, st *slotState, strict bool) error {
	if !decodeSelectors(bw[wMeta]>>8, 64, &st.sels, strict) {
		return fmt.Errorf("%w: block %d: bad selector code", ErrCorrupt, b)
	}
	return nil
}
func (tafScheme) fixBlock(f *qf, w *blockWork, mine []int, tails []uint64, start int, h2 uint64) (bool, int, error) {
	return f.adaptBlockSelectors(w, mine, tails, start, h2, f.storeSelectorCode)
}
func (tafScheme) validateCode(f *qf, b int, bw []uint64) error {
	code := bw[wMeta] >> 8
	var sels [64]uint8
	if !decodeSelectors(code, 64, &sels, true) {
		return corrupt("block %d: invalid selector code", b)
	}
	for _, s := range sels {
		if s > f.maxSel {
			return corrupt("block %d: selector above %d", b, f.maxSel)
		}
	}
	if c, ok := encodeSelectors(&sels); !ok || c != code {
		return corrupt("block %d: non-canonical selector code", b)
	}
	return nil
}

// utafScheme is the uTAF: the TAF with a plain selector byte per slot in
// 8 extra words per block.
type utafScheme struct{ selectorSlots }

func (utafScheme) extraWords() int { return 8 }
func (utafScheme) matchRun(f *qf, _, h2 uint64, start, end int) bool {
	for s := end; s >= start; s-- {
		if f.remAt(s) == f.chunk(h2, f.uSelAt(s)) {
			return true
		}
	}
	return false
}
func (utafScheme) decodeBlock(f *qf, _ int, bw []uint64, st *slotState, _ bool) error {
	for i := 0; i < 64; i++ {
		st.sels[i] = getSelW(bw, f.r, i)
	}
	return nil
}
func (utafScheme) fixBlock(f *qf, w *blockWork, mine []int, tails []uint64, start int, h2 uint64) (bool, int, error) {
	return f.adaptBlockSelectors(w, mine, tails, start, h2, f.storeSelectorBytes)
}
func (utafScheme) validateCode(f *qf, b int, bw []uint64) error {
	if err := noCode(b, bw); err != nil {
		return err
	}
	for i := 0; i < 64; i++ {
		if getSelW(bw, f.r, i) > f.maxSel {
			return corrupt("block %d: selector above %d", b, f.maxSel)
		}
	}
	return nil
}

// exafScheme is the exAF (the broom filter): fingerprint extensions,
// arithmetic-coded per block (section 5, appendix C.4).
type exafScheme struct{}

func (exafScheme) adaptive() bool                   { return true }
func (exafScheme) extraWords() int                  { return 0 }
func (exafScheme) adapt(f *qf, h1, h2 uint64) error { return f.adaptRun(h1, h2) }
func (exafScheme) decodeBlock(_ *qf, b int, bw []uint64, st *slotState, strict bool) error {
	if !decodeExtensions(bw[wMeta]>>8, 64, &st.lens, &st.pats, strict) {
		return fmt.Errorf("%w: block %d: bad extension code", ErrCorrupt, b)
	}
	return nil
}
func (exafScheme) matches(f *qf, st *slotState, i int, rem, t uint64) bool {
	return rem == t&f.remMask && extMatches(t>>f.r, st.lens[i], st.pats[i])
}
func (v exafScheme) verifySlot(f *qf, st *slotState, i int, _, rem, t uint64) bool {
	return v.matches(f, st, i, rem, t)
}
func (exafScheme) fixBlock(f *qf, w *blockWork, mine []int, tails []uint64, start int, h2 uint64) (bool, int, error) {
	return f.adaptBlockExAF(w, mine, tails, start, h2)
}
func (exafScheme) validateCode(f *qf, b int, bw []uint64) error {
	code := bw[wMeta] >> 8
	var lens [64]uint8
	var pats [64]uint32
	if !decodeExtensions(code, 64, &lens, &pats, true) {
		return corrupt("block %d: invalid extension code", b)
	}
	for _, l := range lens {
		if l > f.maxExt {
			return corrupt("block %d: extension longer than %d", b, f.maxExt)
		}
	}
	if c, ok := encodeExtensions(&lens, &pats); !ok || c != code {
		return corrupt("block %d: non-canonical extension code", b)
	}
	return nil
}

// cafScheme is the cache-augmented filter: the RSQF plus a cache of false
// positives in each block's code word (caf.go).
type cafScheme struct{}

func (cafScheme) adaptive() bool  { return true }
func (cafScheme) extraWords() int { return 0 }
func (cafScheme) matchRun(f *qf, q, h2 uint64, start, end int) bool {
	want := h2 & f.remMask
	for s := end; s >= start; s-- {
		if f.remAt(s) == want {
			return !f.cafCached(q, h2)
		}
	}
	return false
}
func (cafScheme) adapt(f *qf, h1, h2 uint64) error { return f.adaptCAF(h1, h2) }
func (cafScheme) decodeBlock(*qf, int, []uint64, *slotState, bool) error {
	return nil
}
func (cafScheme) matches(f *qf, _ *slotState, _ int, rem, t uint64) bool {
	return rem == t&f.remMask
}
func (cafScheme) verifySlot(f *qf, _ *slotState, _ int, q, rem, t uint64) bool {
	return rem == t&f.remMask && !f.cafCached(q, t)
}
func (cafScheme) fixBlock(*qf, *blockWork, []int, []uint64, int, uint64) (bool, int, error) {
	return false, 0, nil
}
func (cafScheme) validateCode(_ *qf, b int, bw []uint64) error {
	if bw[wMeta]>>8>>cafUsedBits != 0 {
		return corrupt("block %d: cache code uses bits above %d", b, cafUsedBits)
	}
	return nil
}

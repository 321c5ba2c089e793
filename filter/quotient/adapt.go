package quotient

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/filter"
)

// blockWork is a private copy of one block being changed by an adaptation.
type blockWork struct {
	b    int
	orig []uint64 // words as read
	bw   []uint64 // words to publish
	slotState
}

// Adapt implements Filter (section 4 and appendix B for the TAF, section 5
// and appendix C.4 for the exAF).
func (f *qf) Adapt(key []byte) error {
	if f.static {
		return filter.ErrNotAdaptive
	}
	h1, h2 := f.hash(key)
	return f.adaptHash(h1, h2)
}

func (f *qf) adaptHash(h1, h2 uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.v.adapt(f, h1, h2)
}

// adaptRun is the adaptation of the variants that fix the slots a false
// positive collides with (taf, utaf, exaf), under f.mu.
func (f *qf) adaptRun(h1, h2 uint64) error {
	q := quotient(h1, f.nq)
	start, end, ok, bad := f.findRun(q)
	if bad {
		return fmt.Errorf("%w: inconsistent run structure", ErrCorrupt)
	}
	if !ok {
		return nil // the key is a negative: nothing to fix
	}
	if f.remote == nil {
		return fmt.Errorf("%w: no remote representation", filter.ErrRemote)
	}
	works, err := f.loadBlocks(start>>6, end>>6)
	if err != nil {
		return err
	}
	work := func(s int) *blockWork { return works[(s>>6)-(start>>6)] }

	// The colliding slots: those that answer "present" for this key.
	var collide []int
	for s := start; s <= end; s++ {
		w := work(s)
		i := s & 63
		if f.v.matches(f, &w.slotState, i, getRemW(w.orig, f.r, i), h2) {
			collide = append(collide, s)
		}
	}
	if len(collide) == 0 {
		return nil // already fixed (e.g. by a concurrent Adapt)
	}
	tails := make([]uint64, end-start+1)
	if err := f.readRemote(start, tails); err != nil {
		return err
	}
	// Check the remote against the local state before trusting it: a wrong
	// tail would write a wrong remainder (a false negative).
	for _, s := range collide {
		w, i, t := work(s), s&63, tails[s-start]
		if !f.v.matches(f, &w.slotState, i, getRemW(w.orig, f.r, i), t) {
			return fmt.Errorf("%w: slot %d: tail does not match its fingerprint", filter.ErrRemote, s)
		}
	}

	changed, rebuilds := false, 0
	for _, w := range works {
		var mine []int
		for _, s := range collide {
			if s>>6 == w.b {
				mine = append(mine, s)
			}
		}
		if len(mine) == 0 {
			continue
		}
		c, rb, err := f.v.fixBlock(f, w, mine, tails, start, h2)
		if err != nil {
			return err
		}
		changed = changed || c
		rebuilds += rb
	}
	if !changed {
		return nil
	}
	f.publish(works)
	f.adaptations.Add(1)
	f.rebuilds.Add(uint64(rebuilds))
	return nil
}

func extMatches(ext uint64, l uint8, pat uint32) bool {
	return l == 0 || uint32(ext&(uint64(1)<<l-1)) == pat
}

// loadBlocks copies blocks [b0, b1] and decodes their adaptivity state.
func (f *qf) loadBlocks(b0, b1 int) ([]*blockWork, error) {
	works := make([]*blockWork, 0, b1-b0+1)
	for b := b0; b <= b1; b++ {
		w := &blockWork{b: b, orig: make([]uint64, f.wpb), bw: make([]uint64, f.wpb)}
		for j := range w.orig {
			w.orig[j] = f.load64(b*f.wpb + j)
		}
		copy(w.bw, w.orig)
		if err := f.v.decodeBlock(f, b, w.orig, &w.slotState, false); err != nil {
			return nil, err
		}
		works = append(works, w)
	}
	return works, nil
}

func (f *qf) readRemote(first int, dst []uint64) error {
	f.remoteReads.Add(1)
	if err := f.remote.ReadSlots(first, dst); err != nil {
		if errors.Is(err, filter.ErrRemote) {
			return err
		}
		return errors.Join(filter.ErrRemote, err)
	}
	return nil
}

// adaptBlockSelectors fixes the colliding slots mine of block w (taf, utaf:
// store writes the selectors), rebuilding the block
// when its code overflows. It only changes w.bw (nothing is published).
func (f *qf) adaptBlockSelectors(w *blockWork, mine []int, tails []uint64, start int, h2 uint64, store func(*blockWork, *[64]uint8) bool) (changed bool, rebuilds int, err error) {
	sels := w.sels
	overflow := f.forceRebuild
	for _, s := range mine {
		i, t := s&63, tails[s-start]
		if t == h2 {
			continue // same 64-bit tail: no selector separates them
		}
		if sels[i] >= f.maxSel {
			overflow = true
			break
		}
		sels[i]++
		setRemW(w.bw, f.r, i, f.chunk(t, sels[i]))
		changed = true
	}
	if !overflow && changed {
		if store(w, &sels) {
			return true, 0, nil
		}
	} else if !overflow {
		return false, 0, nil
	}
	// Rebuild (section 4): reset every selector of the block to 0 and
	// recompute those remainders from the remote representation, then fix
	// the false positive again.
	copy(w.bw, w.orig)
	btails := make([]uint64, 64)
	if err := f.readRemote(w.b*64, btails); err != nil {
		return false, 0, err
	}
	var zero [64]uint8
	for i := 0; i < 64; i++ {
		if w.sels[i] == 0 {
			continue
		}
		if f.chunk(btails[i], w.sels[i]) != getRemW(w.orig, f.r, i) {
			return false, 0, fmt.Errorf("%w: slot %d: tail does not match its remainder", filter.ErrRemote, w.b*64+i)
		}
		setRemW(w.bw, f.r, i, f.chunk(btails[i], 0))
	}
	sels = zero
	for _, s := range mine {
		i, t := s&63, tails[s-start]
		if t == h2 {
			continue
		}
		sels[i] = 1
		setRemW(w.bw, f.r, i, f.chunk(t, 1))
		if !store(w, &sels) {
			sels[i] = 0
			setRemW(w.bw, f.r, i, f.chunk(t, 0))
		}
	}
	if !store(w, &sels) {
		return false, 0, fmt.Errorf("%w: block %d: empty selector code overflows", ErrCorrupt, w.b)
	}
	return true, 1, nil
}

// storeSelectorBytes writes sels into w.bw as plain bytes (utaf).
func (f *qf) storeSelectorBytes(w *blockWork, sels *[64]uint8) bool {
	for i := 0; i < 64; i++ {
		setSelW(w.bw, f.r, i, sels[i])
	}
	return true
}

// storeSelectorCode writes sels into w.bw's code word (taf); false on code
// overflow.
func (f *qf) storeSelectorCode(w *blockWork, sels *[64]uint8) bool {
	code, ok := encodeSelectors(sels)
	if !ok {
		return false
	}
	w.bw[wMeta] = w.bw[wMeta]&0xff | code<<8
	return true
}

func (f *qf) adaptBlockExAF(w *blockWork, mine []int, tails []uint64, start int, h2 uint64) (changed bool, rebuilds int, err error) {
	lens, pats := w.lens, w.pats
	qext := h2 >> f.r
	type ext struct {
		i   int
		l   uint8
		pat uint32
	}
	var news []ext
	for _, s := range mine {
		i := s & 63
		a := tails[s-start] >> f.r
		if a == qext {
			continue // same tail bits: no extension separates them
		}
		// Shortest prefix of the further bits that differs (appendix C.4).
		l := bits.TrailingZeros64(a^qext) + 1
		if l > int(f.maxExt) {
			continue
		}
		news = append(news, ext{i, uint8(l), uint32(a & (uint64(1)<<l - 1))})
	}
	if len(news) == 0 {
		return false, 0, nil
	}
	for _, e := range news {
		lens[e.i], pats[e.i] = e.l, e.pat
	}
	if code, ok := encodeExtensions(&lens, &pats); ok && !f.forceRebuild {
		w.bw[wMeta] = w.bw[wMeta]&0xff | code<<8
		return true, 0, nil
	}
	// Rebuild: drop every extension of the block (remainders are chunk 0
	// already), then add the new ones while they fit.
	lens, pats = [64]uint8{}, [64]uint32{}
	code := uint64(0)
	for _, e := range news {
		lens[e.i], pats[e.i] = e.l, e.pat
		c, ok := encodeExtensions(&lens, &pats)
		if !ok {
			lens[e.i], pats[e.i] = 0, 0
			continue
		}
		code = c
	}
	w.bw[wMeta] = w.bw[wMeta]&0xff | code<<8
	return true, 1, nil
}

// publish stores the changed words under the sequence counter so readers
// either see none or all of the change (they retry when seq moved).
func (f *qf) publish(works []*blockWork) {
	f.sl.BeginWrite()
	for _, w := range works {
		base := w.b * f.wpb
		for j, v := range w.bw {
			if v != w.orig[j] {
				atomic.StoreUint64(&f.words[base+j], v)
			}
		}
	}
	f.sl.EndWrite()
}

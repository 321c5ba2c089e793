package adaptive

import (
	"fmt"
	"math/bits"
)

// Verify checks a filter's local state against its remote representation:
// the remainder (and, for the exAF, the extension) stored in every used slot
// must be the one its tail gives under the slot's selector. It reads the
// whole remote once, so it is meant for opening state of uncertain
// provenance, not for every query. Errors wrap ErrRemote (mismatch or
// unreadable remote) or ErrCorrupt. Verify holds the adaptation lock.
func Verify(f Filter) error {
	q, ok := f.(*qf)
	if !ok {
		return fmt.Errorf("%w: not a filter of this package", ErrCorrupt)
	}
	return q.verify()
}

func (f *qf) verify() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.remote == nil {
		return fmt.Errorf("%w: no remote representation", ErrRemote)
	}
	tails := make([]uint64, 64)
	var sels [64]uint8
	var lens [64]uint8
	var pats [64]uint32
	loaded := -1
	load := func(b int) error {
		if b == loaded {
			return nil
		}
		loaded = b
		if err := f.readRemote(b*64, tails); err != nil {
			return err
		}
		code := f.meta(b) >> 8
		switch f.kind {
		case KindTAF:
			if !decodeSelectors(code, 64, &sels, true) {
				return fmt.Errorf("%w: block %d: bad selector code", ErrCorrupt, b)
			}
		case KindUTAF:
			for i := 0; i < 64; i++ {
				sels[i] = f.uSelAt(b*64 + i)
			}
		case KindExAF:
			if !decodeExtensions(code, 64, &lens, &pats, true) {
				return fmt.Errorf("%w: block %d: bad extension code", ErrCorrupt, b)
			}
		}
		return nil
	}
	prevEnd := -1
	for b := 0; b < f.nblocks; b++ {
		occ := f.load64(b*f.wpb + wOcc)
		F := f.blockOffset(b)
		t := 0
		for x := occ; x != 0; x &= x - 1 {
			t++
			q := b*64 + bits.TrailingZeros64(x)
			e := f.selectRunend(b*64+F, t)
			if F < 0 || e < q || e <= prevEnd {
				return fmt.Errorf("%w: quotient %d: bad run", ErrCorrupt, q)
			}
			for s := max(q, prevEnd+1); s <= e; s++ {
				if err := load(s >> 6); err != nil {
					return err
				}
				i, tail, rem := s&63, tails[s&63], f.remAt(s)
				good := true
				switch f.kind {
				case KindRSQF:
					good = tail&f.remMask == rem
				case KindCAF:
					good = tail&f.remMask == rem && !f.cafCached(uint64(q), tail)
				case KindTAF, KindUTAF:
					good = f.chunk(tail, sels[i]) == rem
				case KindExAF:
					good = tail&f.remMask == rem && extMatches(tail>>f.r, lens[i], pats[i])
				}
				if !good {
					return fmt.Errorf("%w: slot %d does not match its tail", ErrRemote, s)
				}
			}
			prevEnd = e
		}
	}
	return nil
}

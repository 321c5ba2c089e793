package quotient

import (
	"fmt"
	"math/bits"

	"github.com/adaptkv/adaptkv/filter"
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
		return fmt.Errorf("%w: no remote representation", filter.ErrRemote)
	}
	tails := make([]uint64, 64)
	var st slotState
	bw := make([]uint64, f.wpb)
	loaded := -1
	load := func(b int) error {
		if b == loaded {
			return nil
		}
		loaded = b
		if err := f.readRemote(b*64, tails); err != nil {
			return err
		}
		for j := range bw {
			bw[j] = f.load64(b*f.wpb + j)
		}
		return f.v.decodeBlock(f, b, bw, &st, true)
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
				good := f.v.verifySlot(f, &st, i, uint64(q), rem, tail)
				if !good {
					return fmt.Errorf("%w: slot %d does not match its tail", filter.ErrRemote, s)
				}
			}
			prevEnd = e
		}
	}
	return nil
}

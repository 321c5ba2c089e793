package quotient

import (
	"fmt"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/filter"
)

// The cache-augmented filter (caf) answers the broom filter paper's "adapt
// or cache?" question at equal space: a static RSQF with taf's remainder
// size whose blocks spend the 56-bit code word that taf fills with
// selectors on a cache of recent false positives instead.
//
// Each block's cache holds up to four 12-bit entries: the slot offset of a
// false positive's home quotient in the block (6 bits) and 6 further bits
// of its hash beyond the remainder. A query that the RSQF answers "maybe"
// answers "absent" when its own entry is cached in its home block. Layout
// of the code word: entries at bits 12i..12i+11 (i = 0..3), a valid mask
// at bits 48..51, the FIFO position at bits 52..53.
//
// Replacement is first-in first-out over false positives. The broom paper
// (section 4.1) caches false positives with LRU; an LRU would have to
// write the block on every cache hit, a write on the query path that the
// lock-free contract forbids, while FIFO writes only when a false
// positive is fixed, as the adaptive filters do.
//
// No false negatives: a stored key reaches the cache check of its home
// block with its own entry only if it has the home quotient of a cached
// false positive and the same 6 extra hash bits. Before caching, the fix
// reads the remote representation of the whole run of that quotient (every
// stored key with it) and refuses the entry if any key there shares those
// bits (then the false positive stays, as a static filter's would).
const (
	cafEntries  = 4
	cafEntryW   = 12
	cafExtraW   = 6
	cafValidAt  = cafEntries * cafEntryW // 48
	cafPosAt    = cafValidAt + cafEntries
	cafUsedBits = cafPosAt + 2 // 54
)

// cafEntry is the cache entry of a key with home quotient q and hash h2.
func (f *qf) cafEntry(q, h2 uint64) uint64 {
	return (q&63)<<cafExtraW | (h2>>f.r)&(1<<cafExtraW-1)
}

// cafCached reports whether the entry of (q, h2) is in q's block cache.
func (f *qf) cafCached(q, h2 uint64) bool {
	code := f.meta(int(q>>6)) >> 8
	valid := code >> cafValidAt & (1<<cafEntries - 1)
	if valid == 0 {
		return false
	}
	e := f.cafEntry(q, h2)
	for i := range cafEntries {
		if valid>>i&1 == 1 && code>>(i*cafEntryW)&(1<<cafEntryW-1) == e {
			return true
		}
	}
	return false
}

// adaptCAF caches the false positive (h1, h2) in its home block, if that
// is safe (see the type doc). Under f.mu.
func (f *qf) adaptCAF(h1, h2 uint64) error {
	q := quotient(h1, f.nq)
	start, end, ok, bad := f.findRun(q)
	if bad {
		return fmt.Errorf("%w: inconsistent run structure", ErrCorrupt)
	}
	if !ok || !f.query(h1, h2) {
		return nil // not a false positive (any more)
	}
	if f.remote == nil {
		return fmt.Errorf("%w: no remote representation", filter.ErrRemote)
	}
	tails := make([]uint64, end-start+1)
	if err := f.readRemote(start, tails); err != nil {
		return err
	}
	e := f.cafEntry(q, h2)
	for i, t := range tails {
		if t&f.remMask != f.remAt(start+i) {
			return fmt.Errorf("%w: slot %d: tail does not match its remainder", filter.ErrRemote, start+i)
		}
		if f.cafEntry(q, t) == e {
			return nil // a stored key shares the entry: caching would hide it
		}
	}
	b := int(q >> 6)
	w := b*f.wpb + wMeta
	meta := f.load64(w)
	code := meta >> 8
	valid := code >> cafValidAt & (1<<cafEntries - 1)
	pos := int(code >> cafPosAt & 3)
	slot := -1
	for i := range cafEntries {
		if valid>>i&1 == 0 {
			slot = i
			break
		}
	}
	if slot < 0 { // full: replace the oldest
		slot = pos
		pos = (pos + 1) % cafEntries
	}
	code &^= (1<<cafEntryW - 1) << (slot * cafEntryW)
	code |= e << (slot * cafEntryW)
	valid |= 1 << slot
	code = code&(1<<cafValidAt-1) | valid<<cafValidAt | uint64(pos)<<cafPosAt
	f.sl.BeginWrite()
	atomic.StoreUint64(&f.words[w], meta&0xff|code<<8)
	f.sl.EndWrite()
	f.adaptations.Add(1)
	return nil
}

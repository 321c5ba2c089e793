// Package cuckoo is the cuckoo family of filter kinds: the adaptive cuckoo
// filters of Kuszmaul, Mitzenmacher
// and others ("Adaptive Cuckoo Filters", paper sections 2-4), as three
// filter kinds:
//
//   - acf, the Cuckooing ACF (section 2.3): k = 4 tables of one slot per
//     bin, no metadata; a false positive is fixed by moving each colliding
//     element to its next table (hash index + 1 mod k), cuckooing the
//     occupants on as an insert does;
//   - acf-cyclic (section 2.4): the same tables with s hash-selector bits
//     per slot (1..3, default 1) taken from the fingerprint, so space is
//     equal; a fix increments the selector of the colliding slot, which
//     re-fingerprints its element;
//   - acf-swap (section 2.5): k = 2 tables of 4-slot bins, the fingerprint
//     depending on the slot; a fix swaps the colliding element with a
//     random other slot of its bin.
//
// All run at 95% load with f-bit slots (FingerprintBits, default 11: the
// 11.58 bits per key of taf). A slot's element is known by its 64-bit hash,
// from which its locations and fingerprints derive.
//
// The remote representation is the table's record of the element hash of
// every slot as built. Fixes move or re-fingerprint elements, but the
// table file is immutable, so the filter keeps what moved apart from the
// query path: an overlay from slot to element hash for every slot whose
// occupant changed since the build (empty slots as hash 0), consulted
// before the remote when a fix needs a slot's element. It is persisted with
// the adaptive state (MarshalBinary) and reported by AuxBytes, not in
// BitsPerKey. A fix or insert whose cuckoo path exceeds maxKicks rebuilds
// the filter with new location salts, as the paper says (section 2.2); a
// rebuild moves every element, so the overlay then holds every slot.
//
// Queries take no lock: the slot words are read atomically under a
// sequence lock (internal/seqlock) that a fix holds while it writes (a
// reader that overlapped a write retries, and after a few overlaps waits
// for the write in progress); fixes are serialized by a mutex.
package cuckoo

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/internal/seqlock"
)

// Variant is one of the three adaptive cuckoo filters.
type Variant uint8

// The variants.
const (
	Cuckooing Variant = 1
	Cyclic    Variant = 2
	Swapping  Variant = 3
)

func (v Variant) String() string {
	switch v {
	case Cuckooing:
		return "acf"
	case Cyclic:
		return "acf-cyclic"
	case Swapping:
		return "acf-swap"
	}
	return fmt.Sprintf("acf-variant(%d)", uint8(v))
}

// geometry returns k (tables) and b (slots per bin) of a variant.
func (v Variant) geometry() (k, b int) {
	if v == Swapping {
		return 2, 4
	}
	return 4, 1
}

const (
	// loadFactor is the paper's occupancy (section 4: gamma = 1/0.95).
	loadFactor = 0.95
	// maxKicks bounds a cuckoo path (Theta(log n) in section 2.2; 500 as
	// cuckoo filter implementations use).
	maxKicks = 500
)

// params are the fixed parameters of one filter.
type params struct {
	variant Variant
	f       int // bits per slot
	s       int // selector bits (Cyclic)
	k, b    int
	bins    int // bins per table
}

func (p params) slots() int { return p.k * p.bins * p.b }

// state is what queries read: the slot words and the location salt. A
// rebuild publishes a new state.
type state struct {
	words []atomic.Uint64
	salt  uint64
}

// Filter is an adaptive cuckoo filter. Safe for concurrent use: queries
// are lock-free, Adapt is serialized.
type Filter struct {
	p      params
	n      uint64 // elements
	seed   uint64
	st     atomic.Pointer[state]
	sl     seqlock.Lock // fixes and rebuilds publish under it
	remote filter.Remote

	mu      sync.Mutex
	overlay map[uint32]uint64 // slot -> element hash where it differs from the remote
	stats   struct{ adaptations, rebuilds, remoteReads atomic.Uint64 }
}

// elementHash is the element hash of key (never 0: 0 marks an empty slot).
func elementHash(seed uint64, key []byte) uint64 {
	h := filter.Hash64(seed, key)
	if h == 0 {
		h = 1
	}
	return h
}

// saltedMix mixes hash h with the salt and a counter n (a table number, a
// fix count) into a new 64-bit hash.
func saltedMix(h, salt, n uint64) uint64 {
	return filter.Mix64(h ^ salt ^ n*0x9E3779B97F4A7C15)
}

// loc is the bin of hash h in table t under salt.
func (p params) loc(salt, h uint64, t int) int {
	x := saltedMix(h, salt, uint64(t+1))
	hi, _ := bits.Mul64(x, uint64(p.bins))
	return int(hi)
}

// slot is the index of slot j of bin of table t.
func (p params) slot(t, bin, j int) int { return (t*p.bins+bin)*p.b + j }

// fp is the f-bit (or f-s-bit with a selector) fingerprint of h for
// selector or slot index v; never 0 (0 marks an empty slot).
func (p params) fp(h uint64, v int) uint64 {
	w := p.f - p.s
	x := filter.Mix64(h*0xD6E8FEB86659FD93 ^ uint64(v)*0xA0761D6478BD642F)
	x &= 1<<w - 1
	if x == 0 {
		x = 1
	}
	return x
}

// value is what slot index j (within its bin) stores for element h with
// selector sel.
func (p params) value(h uint64, j, sel int) uint64 {
	switch p.variant {
	case Cyclic:
		return uint64(sel)<<(p.f-p.s) | p.fp(h, sel)
	case Swapping:
		return p.fp(h, j)
	}
	return p.fp(h, 0)
}

// matches reports whether slot value v (at index j in its bin) matches h.
func (p params) matches(v, h uint64, j int) bool {
	if v == 0 {
		return false
	}
	switch p.variant {
	case Cyclic:
		sel := int(v >> (p.f - p.s))
		return v&(1<<(p.f-p.s)-1) == p.fp(h, sel)
	case Swapping:
		return v == p.fp(h, j)
	}
	return v == p.fp(h, 0)
}

// get reads slot i's f bits (atomic word loads).
func (p params) get(words []atomic.Uint64, i int) uint64 {
	off := i * p.f
	w, sh := off>>6, off&63
	v := words[w].Load() >> sh
	if sh+p.f > 64 {
		v |= words[w+1].Load() << (64 - sh)
	}
	return v & (1<<p.f - 1)
}

// set writes slot i's f bits (writers hold the mutex).
func (p params) set(words []atomic.Uint64, i int, v uint64) {
	off := i * p.f
	w, sh := off>>6, off&63
	mask := uint64(1<<p.f-1) << sh
	words[w].Store(words[w].Load()&^mask | v<<sh&mask)
	if sh+p.f > 64 {
		rest := p.f - (64 - sh)
		m2 := uint64(1<<rest - 1)
		words[w+1].Store(words[w+1].Load()&^m2 | v>>(64-sh)&m2)
	}
}

func wordsFor(p params) int { return (p.slots()*p.f + 63) / 64 }

// MayContain implements filter.Filter.
func (f *Filter) MayContain(key []byte) bool {
	h := elementHash(f.seed, key)
	if s, ok := f.sl.Begin(); ok { // the common case, inline
		if hit := f.p.lookup(f.st.Load(), h) >= 0; f.sl.Valid(s) {
			return hit
		}
	}
	return seqlock.Read(&f.sl, func() bool { return f.p.lookup(f.st.Load(), h) >= 0 })
}

// lookup returns the first slot whose value matches h, or -1. The
// values h may take (one per slot index for Swapping, per selector for
// Cyclic) are computed once per query.
func (p params) lookup(st *state, h uint64) int {
	var want [8]uint64
	nv := 1
	switch p.variant {
	case Swapping:
		nv = p.b
	case Cyclic:
		nv = 1 << p.s
	}
	for v := range nv {
		want[v] = p.value(h, v, v)
	}
	for t := range p.k {
		bin := p.loc(st.salt, h, t)
		for j := range p.b {
			i := p.slot(t, bin, j)
			v := p.get(st.words, i)
			if v == 0 {
				continue
			}
			switch p.variant {
			case Swapping:
				if v == want[j] {
					return i
				}
			case Cyclic:
				if v == want[v>>(p.f-p.s)] {
					return i
				}
			default:
				if v == want[0] {
					return i
				}
			}
		}
	}
	return -1
}

// BitsPerKey implements filter.Filter: the slot words per element.
func (f *Filter) BitsPerKey() float64 { return filter.BitsPerKey(f.SizeBytes(), f.n) }

// SizeBytes implements filter.Filter.
func (f *Filter) SizeBytes() int { return len(f.st.Load().words) * 8 }

// AuxBytes implements filter.Auxiliary: the overlay of moved elements.
func (f *Filter) AuxBytes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.overlay) * 24 // slot, hash and map overhead
}

// Stats implements filter.Adaptive.
func (f *Filter) Stats() filter.Stats {
	return filter.Stats{Adaptations: f.stats.adaptations.Load(), Rebuilds: f.stats.rebuilds.Load(), RemoteReads: f.stats.remoteReads.Load()}
}

// Len is the number of elements.
func (f *Filter) Len() uint64 { return f.n }

// Slots is the number of slots (the length of the remote representation).
func (f *Filter) Slots() int { return f.p.slots() }

// hashAt returns the element hash stored in slot i (0: empty), from the
// overlay or the remote. Under mu.
func (f *Filter) hashAt(i int) (uint64, error) {
	if h, ok := f.overlay[uint32(i)]; ok {
		return h, nil
	}
	var buf [1]uint64
	f.stats.remoteReads.Add(1)
	if err := f.remote.ReadSlots(i, buf[:]); err != nil {
		return 0, err
	}
	return buf[0], nil
}

// write is one planned slot write.
type write struct {
	slot int
	h    uint64 // element (0: empty)
	val  uint64
}

// Adapt implements filter.Adaptive: every element colliding with key is
// moved (Cuckooing), re-fingerprinted (Cyclic) or swapped (Swapping). A
// remote failure leaves the filter unchanged and returns an error wrapping
// filter.ErrRemote.
func (f *Filter) Adapt(key []byte) error {
	h := elementHash(f.seed, key)
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st.Load()
	changed := false
	for t := range f.p.k {
		bin := f.p.loc(st.salt, h, t)
		for j := range f.p.b {
			i := f.p.slot(t, bin, j)
			v := f.p.get(st.words, i)
			if !f.p.matches(v, h, j) {
				continue
			}
			x, err := f.hashAt(i)
			if err != nil {
				return fmt.Errorf("%w: acf: slot %d: %w", filter.ErrRemote, i, err)
			}
			if x == 0 || f.p.loc(st.salt, x, t) != bin || !f.p.matches(v, x, j) {
				return fmt.Errorf("%w: acf: slot %d holds %#x, which does not belong there", filter.ErrRemote, i, x)
			}
			if x == h {
				continue // the key is stored (or shares the full hash): nothing to fix
			}
			plan, err := f.planFix(st, i, t, bin, j, v, x)
			if err != nil {
				return err
			}
			if plan == nil { // no path: rebuild with new salts
				if err := f.rebuild(); err != nil {
					return err
				}
				f.stats.adaptations.Add(1)
				return nil
			}
			f.apply(st, plan)
			changed = true
		}
	}
	if changed {
		f.stats.adaptations.Add(1)
	}
	return nil
}

// planFix returns the writes that fix the collision of element x (hash
// x, value v) at slot i (table t, bin, index j), or nil if the cuckoo path
// is too long. Writes are ordered so that each element's new copy is
// written before its old slot is overwritten; the sequence counter covers
// the rest.
func (f *Filter) planFix(st *state, i, t, bin, j int, v, x uint64) ([]write, error) {
	p := f.p
	switch p.variant {
	case Cyclic:
		sel := int(v >> (p.f - p.s))
		sel = (sel + 1) & (1<<p.s - 1)
		return []write{{slot: i, h: x, val: p.value(x, j, sel)}}, nil
	case Swapping:
		// Section 2.5: swap with a random other slot of the bin. The
		// choice is a hash of the element, the salt and the fix counter,
		// not a global random draw: random enough that repeated fixes of
		// one element try other slots, and the same adaptations give the
		// same filter (reproducible state files and golden tests).
		o := int(saltedMix(x, st.salt, f.sl.Seq()) % uint64(p.b-1))
		if o >= j {
			o++
		}
		oi := p.slot(t, bin, o)
		y, err := f.hashAt(oi)
		if err != nil {
			return nil, fmt.Errorf("%w: acf: slot %d: %w", filter.ErrRemote, oi, err)
		}
		ws := []write{{slot: oi, h: x, val: p.value(x, o, 0)}}
		if y == 0 {
			ws = append(ws, write{slot: i})
		} else {
			ws = append(ws, write{slot: i, h: y, val: p.value(y, j, 0)})
		}
		return ws, nil
	}
	// Cuckooing (section 2.3): x goes to its next table; an occupant it
	// displaces moves as in an insert (section 2.2): to an empty slot among
	// its locations if there is one, else to its next table, displacing
	// that slot's occupant in turn. The moves are simulated on a scratch
	// map of slot contents, then written.
	moved := map[int]uint64{i: 0}
	occupied := func(sl int) bool {
		if h, ok := moved[sl]; ok {
			return h != 0
		}
		return p.get(st.words, sl) != 0
	}
	cur, curT := x, (t+1)%p.k
	for range maxKicks {
		ns := p.slot(curT, p.loc(st.salt, cur, curT), 0)
		var occ uint64
		if h, ok := moved[ns]; ok {
			occ = h
		} else if p.get(st.words, ns) != 0 {
			var err error
			if occ, err = f.hashAt(ns); err != nil {
				return nil, fmt.Errorf("%w: acf: slot %d: %w", filter.ErrRemote, ns, err)
			}
		}
		moved[ns] = cur
		if occ == 0 {
			ws := make([]write, 0, len(moved))
			for sl, h := range moved {
				w := write{slot: sl, h: h}
				if h != 0 {
					w.val = p.value(h, 0, 0)
				}
				ws = append(ws, w)
			}
			return ws, nil
		}
		// The displaced element: an empty slot among its locations, else
		// its next table.
		cur, curT = occ, (curT+1)%p.k
		for tt := range p.k {
			sl := p.slot(tt, p.loc(st.salt, occ, tt), 0)
			if !occupied(sl) {
				curT = tt
				break
			}
		}
	}
	return nil, nil
}

// apply writes a plan under the sequence counter and records the moved
// elements in the overlay.
func (f *Filter) apply(st *state, ws []write) {
	f.sl.BeginWrite()
	for _, w := range ws {
		f.p.set(st.words, w.slot, w.val)
		f.overlay[uint32(w.slot)] = w.h
	}
	f.sl.EndWrite()
}

// rebuild re-places every element with new salts (the paper's rebuild on
// a failed insert or fix) and publishes the new state. Under mu.
func (f *Filter) rebuild() error {
	total := f.p.slots()
	orig := make([]uint64, total)
	for first := 0; first < total; first += 64 {
		f.stats.remoteReads.Add(1)
		if err := f.remote.ReadSlots(first, orig[first:min(first+64, total)]); err != nil {
			return fmt.Errorf("%w: acf: rebuild: %w", filter.ErrRemote, err)
		}
	}
	hashes := make([]uint64, 0, f.n)
	for i, h := range orig {
		if o, ok := f.overlay[uint32(i)]; ok {
			h = o
		}
		if h != 0 {
			hashes = append(hashes, h)
		}
	}
	old := f.st.Load()
	for attempt := uint64(1); ; attempt++ {
		st, slots, ok := place(f.p, hashes, filter.Mix64(old.salt+attempt))
		if !ok {
			continue
		}
		overlay := make(map[uint32]uint64, len(hashes))
		for i, h := range slots {
			if h != orig[i] {
				overlay[uint32(i)] = h
			}
		}
		f.sl.BeginWrite()
		f.st.Store(st)
		f.overlay = overlay
		f.sl.EndWrite()
		f.stats.rebuilds.Add(1)
		return nil
	}
}

// place builds a state holding hashes under salt by cuckoo insertion and
// returns it with the element hash of every slot; ok is false if an insert
// needed more than maxKicks moves.
func place(p params, hashes []uint64, salt uint64) (*state, []uint64, bool) {
	st := &state{words: make([]atomic.Uint64, wordsFor(p)), salt: salt}
	slots := make([]uint64, p.slots())
	r := rand.New(rand.NewPCG(salt, 1))
	for _, h := range hashes {
		if !insert(p, st, slots, h, r) {
			return nil, nil, false
		}
	}
	return st, slots, true
}

// insert places h (section 2.2): an empty slot among its bins if there is
// one, else a random walk of evictions.
func insert(p params, st *state, slots []uint64, h uint64, r *rand.Rand) bool {
	cur := h
	for kick := 0; kick <= maxKicks; kick++ {
		for t := range p.k {
			bin := p.loc(st.salt, cur, t)
			for j := range p.b {
				i := p.slot(t, bin, j)
				if slots[i] == 0 {
					slots[i] = cur
					p.set(st.words, i, p.value(cur, j, 0))
					return true
				}
			}
		}
		t, j := r.IntN(p.k), r.IntN(p.b)
		i := p.slot(t, p.loc(st.salt, cur, t), j)
		victim := slots[i]
		slots[i] = cur
		p.set(st.words, i, p.value(cur, j, 0))
		cur = victim
	}
	return false
}

package prefix

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/adaptkv/adaptkv/filter"
)

// The adaptive prefix filter (kind "aprefix") is a Prefix Filter whose bins
// learn their false positives, exAF-style (TAF paper section 5, the
// extension filter): the pocket dictionaries and the spare stay exactly as
// the static filter built them, and a bin that was fixed carries, beside
// them, a short extension of the stored fingerprint that the false positive
// matched. An extension is L more hash bits of the stored element (L = 1 to
// maxExtLen, the shortest that tells the false positive apart); a query
// whose fingerprint matched then also compares its own L bits. A fix in the
// spare is an extension of the forwarded fingerprint or, when no stored key
// has that fingerprint at all (the spare's own Bloom false positive), an
// exclusion of it. See docs/ARCHITECTURE.md, "The adaptive prefix filter".
//
// Why extensions and not TAF's selectors: a selector changes the stored
// remainder, which would make the bins mutable (a seqlock on every query),
// break the sorted-bin invariant that decides when the spare is read
// (section 5.2.3), and cost every negative query in a fixed bin one SWAR
// pass per selector value. Extensions are read only after the one-line
// query said "maybe" (about 10% of negative queries, and positives), so a
// negative query that ends in the bin costs what the static filter's does,
// fixed bin or not.
//
// Fix information lives in immutable group records, one per fixGroupBins
// bins, published with an atomic pointer: a query loads the pointer of its
// group (nil until a bin in the group is fixed), an adaptation (serialized
// by a mutex) builds a new record and swaps it in. Queries never lock.
//
// The remote representation is every key's hash word in bin order:
// (bin·6400 + fingerprint)<<24 | 24 extension bits, sorted, followed by
// m+1 words giving where each bin's words start. An adaptation reads the
// index words of its bin and then that bin's words (about 24).
const (
	// extShift takes a key's 24 extension bits from the top of the second
	// MurmurHash3 half, independent of the bin (first half) and of the
	// fingerprint (low 32 bits of the second half).
	extShift = 40
	extMask  = 1<<(64-extShift) - 1
	// maxExtLen is the longest extension a fix stores: all 24 bits. Two
	// keys that agree on their fingerprint and 24 more bits are not told
	// apart (2^-24 of the fixes); such a false positive stays.
	maxExtLen = 64 - extShift
	// spareSlot is the slot of a fix for a fingerprint in the spare;
	// noSlot says a bin does not store a fingerprint.
	spareSlot = 31
	noSlot    = 30
	// maxCentiBitsPerKey caps the local state, fix information included,
	// at 12.5 bits per key by default (11.48 for the static filter): about
	// 1 bit per key, some 11 bits per fix, for fixes (APrefixKind's
	// BitsPerKey option sets another cap). A fix beyond the budget drops
	// the oldest fixes of its own bin, or is not made.
	maxCentiBitsPerKey = 1250
	minFixBudgetBytes  = 1024
	// maxRemoteBinWords bounds what one bin's remote range may claim (a
	// bin holds about 24 keys; a corrupt index must not make Adapt read a
	// whole file).
	maxRemoteBinWords = 1 << 12
)

// atomicGroup publishes one group's fixes to lock-free queries.
type atomicGroup = atomic.Pointer[fixGroup]

// AdaptiveFilter is a Prefix Filter that fixes its false positives. Queries
// are lock-free and safe concurrently with Adapt. Make one with
// APrefixKind's builder and Decode.
type AdaptiveFilter struct {
	adaptiveFields
	// The padding puts an AdaptiveFilter in the 256-byte size class, whose
	// objects start a cache line: the fields a query reads (base's first
	// ones) then share one line.
	_ [adaptiveSize - unsafe.Sizeof(adaptiveFields{})]byte
}

// adaptiveSize is an AdaptiveFilter's size (a compile error if its fields
// outgrow it).
const adaptiveSize = 256

// adaptiveFields are an AdaptiveFilter's fields. The static filter is held
// by value, first: a query reads its header without following a pointer
// to another line.
type adaptiveFields struct {
	base   Filter
	groups []atomicGroup
	remote filter.Remote
	budget int // bytes all group records may take

	mu       sync.Mutex // serializes adaptations
	fixBytes atomic.Int64
	stats    filter.Stats
}

var (
	_ filter.Adaptive = (*AdaptiveFilter)(nil)

	errNoElement = errors.New("the remote holds no key for a fingerprint the bin stores")
)

func newAdaptive(base *Filter, remote filter.Remote, maxCenti uint64) *AdaptiveFilter {
	if remote == nil {
		remote = filter.NoRemote{}
	}
	groups := (base.numBins + fixGroupBins - 1) / fixGroupBins
	return &AdaptiveFilter{adaptiveFields: adaptiveFields{
		base:   *base,
		groups: make([]atomicGroup, groups),
		remote: remote,
		budget: fixBudget(base.numKeys, maxCenti, uint64(len(base.data))+8*groups),
	}}
}

// fixBudget is the byte budget of the fix information of a filter of n keys
// whose local state may take maxCenti hundredths of a bit per key, of which
// the rest takes fixed bytes.
func fixBudget(n, maxCenti, fixed uint64) int {
	limit := n * maxCenti / 800
	if limit < fixed+minFixBudgetBytes {
		return minFixBudgetBytes
	}
	return int(limit - fixed)
}

// extOf returns a key's extension bits from its second hash half.
func extOf(h2 uint64) uint64 { return h2 >> extShift }

// MayContain reports whether key may be in the set. A key the filter was
// built from always gets true, whatever was adapted.
func (f *AdaptiveFilter) MayContain(key []byte) bool {
	// Written out as Filter.MayContain does (hashKey measured 10% slower
	// on this path).
	h1, h2 := murmur128(key, f.base.hashSeed)
	fp := (uint64(uint32(h2)) * fingerprintRange) >> 32
	b, _ := bits.Mul64(h1&^qrMask, f.base.numBins)
	if !f.base.contains(b, fp) {
		return false
	}
	g := f.groups[b/fixGroupBins].Load()
	if g == nil {
		return true
	}
	return g.allows(b%fixGroupBins, f.base.slotOf(b, fp), fp, extOf(h2))
}

// slotOf returns the body index (0..24) of fingerprint fp in bin b, spareSlot
// when fp is above the bin's maximum (only the spare may hold it), or noSlot
// when the bin does not store it.
func (f *Filter) slotOf(b, fp uint64) uint8 {
	pd := f.bins[b*binBytes : b*binBytes+binBytes : b*binBytes+binBytes]
	w0 := binary.LittleEndian.Uint64(pd[0:8])
	w3 := binary.LittleEndian.Uint64(pd[24:32])
	if fp > (w0&fieldMask)<<8|w3>>56 {
		return spareSlot
	}
	header := (w0 >> headerShift) & headerMask
	q := fp >> 8
	start := uint64(0)
	if q > 0 {
		start = uint64(selectBit(header, uint(q-1))) + 1 - q
	}
	end := min(uint64(selectBit(header, uint(q)))-q, binCapacity)
	for i := start; i < end; i++ {
		if pd[(7+i)&(binBytes-1)] == byte(fp) {
			return uint8(i)
		}
	}
	return noSlot
}

// Adapt fixes key, a false positive: it reads the key's bin from the remote
// representation and stores the shortest extension of the matched
// fingerprint that tells key apart from every stored key with that
// fingerprint. A key the filter already rejects, or one that agrees with a
// stored key on maxExtLen more bits, leaves the filter unchanged. Remote
// failures return an error wrapping filter.ErrRemote and change nothing.
// Adapt must only be called for keys known to be absent.
func (f *AdaptiveFilter) Adapt(key []byte) error {
	packed, h2 := hashKey(key, f.base.hashSeed)
	b, fp := binOf(packed, f.base.numBins), packed&qrMask
	ext := extOf(h2)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.base.contains(b, fp) {
		return nil
	}
	slot := f.base.slotOf(b, fp)
	if slot == noSlot {
		return fmt.Errorf("%w: bin %d: contains without a slot", filter.ErrRemote, b)
	}
	g := f.groups[b/fixGroupBins].Load()
	if g != nil && !g.allows(b%fixGroupBins, slot, fp, ext) {
		return nil
	}
	stored, err := f.readBinExtensions(b, fp)
	if err != nil {
		return err
	}
	if slot != spareSlot && len(stored) == 0 {
		return fmt.Errorf("%w: bin %d fingerprint %d: %w", filter.ErrRemote, b, fp, errNoElement)
	}
	of := fix{j: uint8(b % fixGroupBins), slot: slot}
	if slot == spareSlot {
		of.fp = uint16(fp)
	}
	all := g.fixes(nil)
	var cur []fix
	for _, x := range all {
		if x.same(of) {
			cur = append(cur, x)
		}
	}
	set, ok := refine(of, cur, stored, ext)
	if !ok {
		return nil
	}
	f.install(b/fixGroupBins, g, all, set)
	return nil
}

// refine returns the slot's new fix set (key names the slot): every stored
// extension still matches a prefix of the set and ext matches none. A prefix
// of cur that ext does not match stays; one it matches is replaced by
// longer prefixes of the stored extensions under it, each just long enough
// to differ from ext. No stored extension (spare only) gives the exclusion
// (L = 0). It returns false when a stored extension equals ext on all
// maxExtLen bits (the key cannot be told apart).
func refine(key fix, cur []fix, stored []uint64, ext uint64) ([]fix, bool) {
	if len(stored) == 0 {
		return []fix{key}, true
	}
	if len(cur) == 0 {
		cur = []fix{key} // L = 0: matches every stored extension
	}
	var out []fix
	for _, e := range cur {
		if !e.matches(ext) {
			out = append(out, e)
			continue
		}
		for _, x := range stored {
			if !e.matches(x) {
				continue
			}
			l := bits.TrailingZeros64(x^ext) + 1
			if l > maxExtLen {
				return nil, false
			}
			p := key
			p.l = uint8(max(l, int(e.l)))
			p.bits = uint32(x & (1<<p.l - 1))
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out, true
}

// install makes set the newest fixes of its slot in group gi, whose
// record is old with the fixes all (replacing the slot's old set), drops
// the bin's oldest sets while the bin has more than maxBinFixes fixes or
// the filter's fixes exceed their budget, and publishes the new group. A
// set that does not fit even alone is not made.
func (f *AdaptiveFilter) install(gi uint64, old *fixGroup, all, set []fix) {
	oldSize := 0
	if old != nil {
		oldSize = old.size()
	}
	// The bin's fixes, oldest set first, without the slot's old set.
	j := set[0].j
	lo := 0
	for lo < len(all) && all[lo].j < j {
		lo++
	}
	hi := lo
	var bin []fix
	for ; hi < len(all) && all[hi].j == j; hi++ {
		if !all[hi].same(set[0]) {
			bin = append(bin, all[hi])
		}
	}
	bin = append(bin, set...)
	trimmed := false
	for {
		next := append(append(append(make([]fix, 0, len(all)+len(set)), all[:lo]...), bin...), all[hi:]...)
		g, ok := encodeFixGroup(next)
		if ok && len(bin) <= maxBinFixes && int(f.fixBytes.Load())+g.size()-oldSize <= f.budget {
			if trimmed {
				f.stats.Rebuilds++
			}
			f.groups[gi].Store(g)
			f.fixBytes.Add(int64(g.size() - oldSize))
			f.stats.Adaptations++
			return
		}
		if len(bin) == len(set) {
			return // the budget is spent elsewhere: the false positive stays
		}
		// Drop the oldest set whole: a part of a set would reject a key
		// of the slot.
		k := 1
		for k < len(bin) && bin[k].same(bin[0]) {
			k++
		}
		bin = bin[k:]
		trimmed = true
	}
}

// readBinExtensions reads bin b's keys from the remote representation and
// returns the extension bits of those with fingerprint fp. It checks that
// the words belong to the bin and are sorted.
func (f *AdaptiveFilter) readBinExtensions(b, fp uint64) ([]uint64, error) {
	n := f.base.numKeys
	var idx [2]uint64
	f.stats.RemoteReads++
	if err := f.remote.ReadSlots(int(n+b), idx[:]); err != nil {
		return nil, err
	}
	start, end := idx[0], idx[1]
	if start > end || end > n || end-start > maxRemoteBinWords {
		return nil, fmt.Errorf("%w: bin %d: remote range [%d, %d) of %d keys", filter.ErrRemote, b, start, end, n)
	}
	words := make([]uint64, end-start)
	f.stats.RemoteReads++
	if err := f.remote.ReadSlots(int(start), words); err != nil {
		return nil, err
	}
	var out []uint64
	lo, hi := b*fingerprintRange, (b+1)*fingerprintRange
	prev := uint64(0)
	for i, w := range words {
		id := w >> (64 - extShift)
		if id < lo || id >= hi || (i > 0 && w < prev) {
			return nil, fmt.Errorf("%w: bin %d: remote word %#x out of place", filter.ErrRemote, b, w)
		}
		prev = w
		if id-lo == fp {
			out = append(out, w&extMask)
		}
	}
	return out, nil
}

// BitsPerKey is the local state (bins, spare and fix information) in bits
// per key.
func (f *AdaptiveFilter) BitsPerKey() float64 {
	return filter.BitsPerKey(f.SizeBytes(), f.base.numKeys)
}

// SizeBytes is the local state in bytes: the static filter, the group
// pointers and the fix records.
func (f *AdaptiveFilter) SizeBytes() int {
	return len(f.base.data) + 8*len(f.groups) + int(f.fixBytes.Load())
}

// FixBytes is the memory of the fix information alone (group records).
func (f *AdaptiveFilter) FixBytes() int { return int(f.fixBytes.Load()) }

// Len returns the number of keys the filter was built from.
func (f *AdaptiveFilter) Len() int { return f.base.Len() }

// Stats returns the adaptation counters.
func (f *AdaptiveFilter) Stats() filter.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

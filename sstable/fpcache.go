package sstable

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
)

// The false-positive cache: an adaptive filter's first answer to a false
// positive, before (or instead of) a fix. A fix reads the table's remote
// section, on cold storage a device read, and pays only if the key comes
// back; the cache remembers the key itself in memory, so the key's next
// lookup in this table answers absent without a probe and without any
// read, and a key that never comes back cost an entry, not a read. The
// entries are the keys themselves, not hashes: a lookup the cache answers
// is one a probe of this (immutable) table answered absent before, so the
// cache adds no false negative. A key that comes back after the cache let
// it go is a false positive again, and ReaderOptions.FixFalsePositive
// decides whether the filter is fixed then (kv's FixCached fixes keys the
// store's known-negative record holds: asked before). The cache is the
// broom filter paper's cache-augmented filter (its introduction: false
// positives cached "so that they are not repeated as long as the false
// positive is not evicted from the cache") put in front of the adaptive
// fix, a ski-rental: rent a cache entry for every false positive, buy the
// fix for the keys that outlast it.
//
// Layout: sets of fpWays slots, a key's set chosen by its hash; within a
// set the oldest key leaves first. A slot is an atomic pointer to its key,
// so a lookup (after the filter's "maybe") hashes the key and compares it
// with at most fpWays keys, with no lock; insertions (false positives,
// rare next to lookups) take a mutex and cost O(1) whatever the table's
// size. The slots are allocated at the table's first cached false
// positive.

// fpCacheKeysPer is the table keys per cache slot (at least
// fpCacheMinEntries slots a table): about 1 bit per table key, with
// 16-byte keys, when every slot holds a key (a slot takes its pointer,
// the key's string header and the key's bytes, about 48 bytes beyond
// them in all with allocation overhead).
const (
	fpCacheKeysPer    = 512
	fpCacheMinEntries = 16
	fpCacheEntryBytes = 48 // beyond the key's bytes
	fpWays            = 8
)

// fpCacheEntries is the capacity of the cache of a table of n keys: a
// power-of-two number of sets of fpWays slots.
func fpCacheEntries(n uint64) int {
	want := max(fpCacheMinEntries, int(min(n/fpCacheKeysPer, 1<<20)))
	sets := 1 << bits.Len(uint(want/fpWays-1))
	return sets * fpWays
}

// fpCache is a Reader's false-positive cache (capacity 0: off).
type fpCache struct {
	capacity int
	slots    atomic.Pointer[[]atomic.Pointer[string]] // nil until the first insertion
	seed     maphash.Seed
	mu       sync.Mutex // serializes insertions; guards next
	next     []uint8    // per set, the slot the next insertion takes
	bytes    atomic.Int64
}

// set returns the index of key's set.
func (c *fpCache) set(key []byte) int {
	return int(maphash.Bytes(c.seed, key) & uint64(c.capacity/fpWays-1))
}

// has reports whether the cache holds key.
func (c *fpCache) has(key []byte) bool {
	p := c.slots.Load()
	return p != nil && inSet((*p)[c.set(key)*fpWays:][:fpWays], key)
}

// inSet reports whether one of a set's slots holds key.
func inSet(s []atomic.Pointer[string], key []byte) bool {
	for i := range s {
		if k := s[i].Load(); k != nil && *k == string(key) {
			return true
		}
	}
	return false
}

// add puts key in its set, in place of the set's oldest key if it is
// full; it reports false if key was there already.
func (c *fpCache) add(key []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.slots.Load()
	if p == nil {
		s := make([]atomic.Pointer[string], c.capacity)
		c.seed = maphash.MakeSeed()
		c.next = make([]uint8, c.capacity/fpWays)
		c.bytes.Store(int64(8*c.capacity + len(c.next)))
		c.slots.Store(&s)
		p = &s
	}
	set := c.set(key)
	if inSet((*p)[set*fpWays:][:fpWays], key) {
		return false
	}
	// The set's oldest key leaves, unless a slot is empty (never filled,
	// or its key left with remove).
	slot := &(*p)[set*fpWays+int(c.next[set])]
	if slot.Load() != nil {
		for i := range fpWays {
			if s := &(*p)[set*fpWays+i]; s.Load() == nil {
				slot = s
				break
			}
		}
	}
	if slot == &(*p)[set*fpWays+int(c.next[set])] {
		c.next[set] = uint8((int(c.next[set]) + 1) % fpWays)
	}
	k := string(key)
	if old := slot.Load(); old != nil {
		c.bytes.Add(-int64(len(*old) + fpCacheEntryBytes))
	}
	slot.Store(&k)
	c.bytes.Add(int64(len(k) + fpCacheEntryBytes))
	return true
}

// remove takes key out of the cache and reports whether it was there.
func (c *fpCache) remove(key []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.slots.Load()
	if p == nil {
		return false
	}
	set := (*p)[c.set(key)*fpWays:][:fpWays]
	for i := range set {
		if k := set[i].Load(); k != nil && *k == string(key) {
			set[i].Store(nil)
			c.bytes.Add(-int64(len(*k) + fpCacheEntryBytes))
			return true
		}
	}
	return false
}

// cachedAbsent reports whether the table's false-positive cache holds key.
func (t *tableFilter) cachedAbsent(key []byte) bool { return t.fpCache.has(key) }

// cacheFalsePositive adds key, a false positive, to the table's cache.
func (t *tableFilter) cacheFalsePositive(key []byte) {
	if t.fpCache.add(key) {
		t.fpCached.Add(1)
	}
}

// fpCacheBytes is the cache's memory (an estimate).
func (t *tableFilter) fpCacheBytes() int { return int(t.fpCache.bytes.Load()) }

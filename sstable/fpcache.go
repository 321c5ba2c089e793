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
// and each set has a word of fpWays tag bytes (8 bits of the key's hash
// per slot, 0 for an empty one), so a lookup (after the filter's "maybe")
// hashes the key, reads the set's tag word and dereferences only the
// slots whose tag matches: one memory access for a key the cache does not
// hold (a miss each for up to fpWays keys without the tags). A tag is a
// hint: the key comparison decides, so a tag that lags its slot's key
// (insertions store the key, then the tag) costs at most a hit, never a
// wrong answer. Lookups take no lock; insertions (false positives, rare
// next to lookups) take a mutex and cost O(1) whatever the table's size.
// The slots are allocated at the table's first cached false positive.

// fpCacheKeysPer is the table keys per cache slot (at least
// fpCacheMinEntries slots a table): about 1 bit per table key, with
// 16-byte keys, when every slot holds a key (a slot takes its pointer,
// its tag, the key's string header and the key's bytes, about 48 bytes
// beyond them in all with allocation overhead).
const (
	fpCacheKeysPer    = 512
	fpCacheMinEntries = 16
	fpCacheEntryBytes = 48 // beyond the key's bytes
	fpWays            = 8  // a set's tags fill one uint64
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
	slots    atomic.Pointer[fpSlots] // nil until the first insertion
	seed     maphash.Seed
	mu       sync.Mutex // serializes insertions; guards next
	next     []uint8    // per set, the slot the next insertion takes
	bytes    atomic.Int64
}

// fpSlots are a cache's keys, fpWays a set, and their tags, a word a set.
type fpSlots struct {
	keys []atomic.Pointer[string]
	tags []atomic.Uint64
}

// locate returns the index of key's set and key's tag byte (never 0).
func (c *fpCache) locate(key []byte) (set int, tag uint64) {
	h := maphash.Bytes(c.seed, key)
	return int(h & uint64(c.capacity/fpWays-1)), h>>56 | 1
}

// has reports whether the cache holds key.
func (c *fpCache) has(key []byte) bool {
	p := c.slots.Load()
	if p == nil {
		return false
	}
	set, tag := c.locate(key)
	return p.find(set, tag, key) >= 0
}

// find returns the slot of set that holds key (of tag tag) within the
// set, or -1.
func (p *fpSlots) find(set int, tag uint64, key []byte) int {
	tags := p.tags[set].Load()
	for i := range fpWays {
		if (tags>>(8*i))&0xff != tag {
			continue
		}
		if k := p.keys[set*fpWays+i].Load(); k != nil && *k == string(key) {
			return i
		}
	}
	return -1
}

// setTag makes tag slot i's tag in set's word (0: the slot is empty).
// Called with the cache's mutex held.
func (p *fpSlots) setTag(set, i int, tag uint64) {
	w := &p.tags[set]
	w.Store(w.Load()&^(0xff<<(8*i)) | tag<<(8*i))
}

// add puts key in its set, in place of the set's oldest key if it is
// full; it reports false if key was there already.
func (c *fpCache) add(key []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.slots.Load()
	if p == nil {
		sets := c.capacity / fpWays
		p = &fpSlots{keys: make([]atomic.Pointer[string], c.capacity), tags: make([]atomic.Uint64, sets)}
		c.seed = maphash.MakeSeed()
		c.next = make([]uint8, sets)
		c.bytes.Store(int64(8*c.capacity + 8*sets + len(c.next)))
		c.slots.Store(p)
	}
	set, tag := c.locate(key)
	if p.find(set, tag, key) >= 0 {
		return false
	}
	// The set's oldest key leaves, unless a slot is empty (never filled,
	// or its key left with remove).
	keys := p.keys[set*fpWays:][:fpWays]
	i := int(c.next[set])
	if keys[i].Load() != nil {
		for j := range keys {
			if keys[j].Load() == nil {
				i = j
				break
			}
		}
	}
	if i == int(c.next[set]) {
		c.next[set] = uint8((i + 1) % fpWays)
	}
	k := string(key)
	if old := keys[i].Load(); old != nil {
		c.bytes.Add(-int64(len(*old) + fpCacheEntryBytes))
	}
	keys[i].Store(&k)
	p.setTag(set, i, tag)
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
	set, tag := c.locate(key)
	i := p.find(set, tag, key)
	if i < 0 {
		return false
	}
	k := p.keys[set*fpWays+i].Swap(nil)
	p.setTag(set, i, 0)
	c.bytes.Add(-int64(len(*k) + fpCacheEntryBytes))
	return true
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

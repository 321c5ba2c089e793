package sstable

import "sync"

// The false-positive cache: an adaptive filter's first answer to a false
// positive, before (or instead of) a fix. A fix reads the table's remote
// section, on cold storage a device read, and pays only if the key comes
// back; the cache remembers the key itself in memory, so the key's next
// lookup in this table answers absent without a probe and without any
// read, and a key that never comes back cost an entry, not a read. The
// entries are the keys themselves, not hashes: a lookup the cache answers
// is one a probe of this (immutable) table answered absent before, so the
// cache adds no false negative. It holds at most fpCacheEntries(keys)
// keys, first in first out; a key that comes back after the cache let it
// go is a false positive again, and ReaderOptions.FixFalsePositive
// decides whether the filter is fixed then (kv's FixCached fixes keys the
// store's known-negative record holds: asked before). The cache is the
// broom filter paper's cache-augmented filter (its introduction: false
// positives cached "so that they are not repeated as long as the false
// positive is not evicted from the cache") put in front of the adaptive
// fix, a ski-rental: rent a cache entry for every false positive, buy the
// fix for the keys that outlast it.

// fpCacheKeysPer is the table keys per cache entry (at least
// fpCacheMinEntries entries a table): about 1 bit per table key, with
// 16-byte keys, when the cache is full (an entry takes about 64 bytes:
// the key, its map slot and its place in the eviction order).
const (
	fpCacheKeysPer    = 512
	fpCacheMinEntries = 16
	fpCacheEntryBytes = 48 // beyond the key's bytes
)

// fpCacheEntries is the capacity of the cache of a table of n keys.
func fpCacheEntries(n uint64) int {
	return max(fpCacheMinEntries, int(min(n/fpCacheKeysPer, 1<<20)))
}

// fpSet is one published state of a table's cache: immutable once
// published, replaced whole (copy on write) by each insertion, so that
// lookups read it without a lock. Insertions are false positives, rare
// next to lookups, and a set holds at most fpCacheEntries keys.
type fpSet struct {
	keys  map[string]struct{}
	order []string // oldest first
	bytes int
}

func (s *fpSet) has(key []byte) bool {
	_, ok := s.keys[string(key)]
	return ok
}

// fpCache is a Reader's false-positive cache (zero capacity: off).
type fpCache struct {
	capacity int
	mu       sync.Mutex // serializes insertions
}

// cachedAbsent reports whether the table's false-positive cache holds key.
func (t *tableFilter) cachedAbsent(key []byte) bool {
	s := t.fpSet.Load()
	return s != nil && s.has(key)
}

// cacheFalsePositive adds key, a false positive, to the table's cache,
// letting the oldest entry go when it is full.
func (t *tableFilter) cacheFalsePositive(key []byte) {
	c := &t.fpCache
	c.mu.Lock()
	defer c.mu.Unlock()
	old := t.fpSet.Load()
	if old != nil && old.has(key) {
		return
	}
	n := &fpSet{keys: make(map[string]struct{}, c.capacity)}
	if old != nil {
		n.order = make([]string, 0, min(len(old.order)+1, c.capacity))
		drop := max(len(old.order)+1-c.capacity, 0)
		for _, k := range old.order[drop:] {
			n.keys[k] = struct{}{}
			n.order = append(n.order, k)
			n.bytes += len(k) + fpCacheEntryBytes
		}
	}
	k := string(key)
	n.keys[k] = struct{}{}
	n.order = append(n.order, k)
	n.bytes += len(k) + fpCacheEntryBytes
	t.fpSet.Store(n)
	t.fpCached.Add(1)
}

// fpCacheBytes is the cache's memory (an estimate).
func (t *tableFilter) fpCacheBytes() int {
	if s := t.fpSet.Load(); s != nil {
		return s.bytes
	}
	return 0
}

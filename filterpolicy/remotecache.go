package filterpolicy

import (
	"sync"
	"sync/atomic"
)

// RemoteCache keeps verified chunks of remote representations between
// fixes, so a fix whose chunk an earlier fix read costs no file read. It is
// bounded (a fixed number of chunks) and shared by the BlockRemotes given
// it, which may belong to many tables; it is safe for concurrent use.
//
// Eviction is CLOCK with new chunks inserted unreferenced: a chunk read
// once (the words of one run or bin, a one-time fix) is the next to go,
// and one read again (the aprefix bin index, about one chunk per 1,500
// keys, read by every fix in its range) gets a second chance each pass.
//
// Its memory grows with the chunks it holds, up to its capacity; with
// SetReserve it takes that memory from another cache as it grows (a store
// takes it from its block cache), so that a store whose fixes are few
// keeps its block cache whole.
type RemoteCache struct {
	mu     sync.Mutex
	index  map[chunkKey]int32
	slots  []cachedChunk
	hand   int
	max    int
	hits   atomic.Uint64
	misses atomic.Uint64
	// reserve takes bytes from another cache (SetReserve; nil: none);
	// reserved is what it has taken, releases what gives each part back
	// (Release). Under mu.
	reserve  func(bytes int) (release func())
	reserved int64
	releases []func()
}

// RemoteCacheReserveStep is how much memory a RemoteCache with SetReserve
// takes at a time: reserving chunk by chunk would take the other cache's
// locks on every new chunk.
const RemoteCacheReserveStep = 256 << 10

type chunkKey struct {
	remote uint64 // BlockRemote.id
	chunk  uint32
}

type cachedChunk struct {
	key        chunkKey
	referenced bool
	n          int
	words      [RemoteChunkSlots]uint64
}

// RemoteCacheChunkBytes is the memory one cached chunk takes.
const RemoteCacheChunkBytes = RemoteChunkSlots*8 + 32

// NewRemoteCache returns a cache of at most bytes/RemoteCacheChunkBytes
// chunks (nil when that is zero: no cache).
func NewRemoteCache(bytes int64) *RemoteCache {
	n := bytes / RemoteCacheChunkBytes
	if n <= 0 {
		return nil
	}
	n = min(n, 1<<30)
	return &RemoteCache{index: make(map[chunkKey]int32), max: int(n)}
}

// Capacity is the cache's size in bytes.
func (c *RemoteCache) Capacity() int64 { return int64(c.max) * RemoteCacheChunkBytes }

// SetReserve makes the cache take the memory of the chunks it holds from
// another cache as it grows: reserve(n) takes n bytes (at most
// RemoteCacheReserveStep at a time, Capacity in all) and returns what gives
// them back, which Release calls. Call it before the cache is used.
func (c *RemoteCache) SetReserve(reserve func(bytes int) (release func())) {
	c.mu.Lock()
	c.reserve = reserve
	c.mu.Unlock()
}

// Reserved is the memory the cache has taken through SetReserve's reserve.
func (c *RemoteCache) Reserved() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reserved
}

// Release gives back what the cache took through SetReserve's reserve and
// takes no more: for when the cache is no longer used.
func (c *RemoteCache) Release() {
	c.mu.Lock()
	releases := c.releases
	c.releases, c.reserve, c.reserved = nil, nil, 0
	c.mu.Unlock()
	for _, release := range releases {
		release()
	}
}

// Hits and Misses count chunk lookups.
func (c *RemoteCache) Hits() uint64 { return c.hits.Load() }

// Misses counts chunk lookups the cache could not serve.
func (c *RemoteCache) Misses() uint64 { return c.misses.Load() }

// copyOut copies slots [from, to) of chunk k (which starts at slot lo) into
// dst, which stands for slots from first on. It reports false, copying
// nothing, when the chunk is not cached.
func (c *RemoteCache) copyOut(k chunkKey, lo, from, to, first int, dst []uint64) bool {
	c.mu.Lock()
	i, ok := c.index[k]
	if ok {
		s := &c.slots[i]
		s.referenced = true
		copy(dst[from-first:to-first], s.words[from-lo:to-lo])
	}
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return ok
}

// put caches the verified words of chunk k.
func (c *RemoteCache) put(k chunkKey, words []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.index[k]; ok {
		return
	}
	var i int
	if len(c.slots) < c.max {
		c.slots = append(c.slots, cachedChunk{})
		i = len(c.slots) - 1
		if used := int64(len(c.slots)) * RemoteCacheChunkBytes; c.reserve != nil && used > c.reserved {
			step := min(RemoteCacheReserveStep, c.Capacity()-c.reserved)
			c.releases = append(c.releases, c.reserve(int(step)))
			c.reserved += step
		}
	} else {
		for c.slots[c.hand].referenced {
			c.slots[c.hand].referenced = false
			c.hand = (c.hand + 1) % len(c.slots)
		}
		i = c.hand
		c.hand = (c.hand + 1) % len(c.slots)
		delete(c.index, c.slots[i].key)
	}
	s := &c.slots[i]
	s.key, s.referenced, s.n = k, false, copy(s.words[:], words)
	c.index[k] = int32(i)
}

// remoteIDs numbers BlockRemotes, so cached chunks of a table closed and
// opened again (or of another table) are never taken for each other.
var remoteIDs atomic.Uint64

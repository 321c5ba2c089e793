package memtable

import (
	"sync/atomic"

	"github.com/adaptkv/adaptkv/internal/freelist"
)

// Recycler keeps the chunks of released memtables for the memtables
// created after them, up to a limit. Fresh memory costs a page fault the
// first time each page is written, on the writer's path: a 4 MiB memtable
// on fresh pages is about a thousand faults, and on this project's 2-core
// VM those were most of the faults of a NoSync write stream and of its
// writes slower than 10 us (see docs/ARCHITECTURE.md, "The memtable").
// Pebble recycles its memtable arenas for the same reason. It is
// safe for concurrent use.
type Recycler struct {
	chunkSize int                    // bytes of each chunk its memtables take
	bits      uint                   // their skiplists' branching (see branching)
	free      *freelist.List[[]byte] // at most limit / chunkSize chunks

	reused    atomic.Uint64 // chunks handed out again
	allocated atomic.Uint64 // standard chunks allocated fresh
	prefilled atomic.Uint64 // chunks Prefill allocated
}

// ChunkSize is the chunk size that suits memtables that fill at
// memTableSize bytes: a sixteenth of it, a power of two from 4 KiB to the
// largest a ref can address (256 KiB), so a small memtable does not hold
// a large chunk and a large one does not take thousands.
func ChunkSize(memTableSize int) int {
	c := minChunkSize
	for c < maxChunkSize && c < memTableSize/16 {
		c *= 2
	}
	return c
}

// NewRecycler returns a Recycler whose memtables take chunks of
// ChunkSize(memTableSize), have the skiplist shape that suits that size
// (see wideAt), and that keeps at most limit bytes of chunks.
func NewRecycler(memTableSize, limit int) *Recycler {
	c := ChunkSize(memTableSize)
	return &Recycler{chunkSize: c, bits: branching(memTableSize), free: freelist.New[[]byte](max(limit, 0) / c)}
}

// wideAt is the memtable size from which skiplists have branching factor 2
// instead of 4. A search steps down a node's tower for free (the tower is
// the node) and pays a cache miss for every step across; factor b makes
// about (b-1)·log_b(n) steps across, 2.2·ln n at b = 4 against 1.4·ln n at
// b = 2, which is what a memtable far larger than the CPU's caches costs.
// A memtable that stays in cache pays in compares and levels instead,
// fewer at b = 4.
const wideAt = 32 << 20

// branching returns log2 of the branching factor of the skiplists of
// memtables that fill at memTableSize bytes.
func branching(memTableSize int) uint {
	if memTableSize >= wideAt {
		return 1
	}
	return 2
}

// levelBits is log2 of the branching factor of r's memtables; without a
// Recycler, that of factor 4.
func (r *Recycler) levelBits() uint {
	if r == nil {
		return 2
	}
	return r.bits
}

// chunkLen is the size of the chunks r's memtables take; without a
// Recycler, the largest.
func (r *Recycler) chunkLen() int {
	if r == nil {
		return maxChunkSize
	}
	return r.chunkSize
}

// Reused is the number of chunks handed out again so far.
func (r *Recycler) Reused() uint64 { return r.reused.Load() }

// Allocated is the number of chunks of its chunk size allocated fresh so
// far because none was kept.
func (r *Recycler) Allocated() uint64 { return r.allocated.Load() }

// Prefilled is the number of chunks Prefill has allocated so far.
func (r *Recycler) Prefilled() uint64 { return r.prefilled.Load() }

// Prefill allocates chunks until r keeps at least bytes of them (or its
// limit), writing to every page of each before keeping it: a memtable that
// takes a kept chunk does not fault on the writer's path, where a fresh
// one costs a fault a page. Until the first flushes hand their memtables'
// chunks back, every chunk is fresh; the store prefills a memtable's worth
// ahead on a goroutine of its own. It returns the number of chunks it
// added, at most bytes / chunk size (the memtables may take them as fast
// as they come).
func (r *Recycler) Prefill(bytes int) int {
	added := 0
	for ; added < bytes/r.chunkSize && r.Held() < bytes; added++ {
		c := make([]byte, r.chunkSize)
		for i := 0; i < len(c); i += touchStride {
			c[i] = 1 // a write (a chunk need not be zero: see chunk)
		}
		if !r.free.Put(c) {
			break // the limit
		}
		r.prefilled.Add(1)
	}
	return added
}

// touchStride is the step Prefill writes at: the smallest page size of
// the systems the store runs on, so that it reaches every page.
const touchStride = 4 << 10

// Held is the number of bytes the Recycler keeps now.
func (r *Recycler) Held() int {
	return r.free.Len() * r.chunkSize
}

// chunk returns a chunk of size bytes: a kept one (bytes hold no pointers
// and every entry is written whole before it is linked, so it is not
// cleared) or a new one.
func (r *Recycler) chunk(size int) []byte {
	if r != nil && size == r.chunkSize {
		if c, ok := r.free.Get(); ok {
			r.reused.Add(1)
			return c
		}
		r.allocated.Add(1)
	}
	return make([]byte, size)
}

// put keeps the chunks of dir that have r's chunk size (not those of
// single large entries), as many as fit under the limit, and drops the
// rest.
func (r *Recycler) put(dir [][]byte) {
	if r == nil {
		return
	}
	for _, c := range dir {
		if len(c) == r.chunkSize && !r.free.Put(c) {
			return
		}
	}
}

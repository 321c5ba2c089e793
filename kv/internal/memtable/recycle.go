package memtable

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// Recycler keeps the memory of released memtables (their node and link
// slabs and byte chunks) for the memtables created after them, up to a
// limit. Fresh memory costs a page fault the first time each page is
// written, on the writer's path: a 4 MiB memtable on fresh pages is about a
// thousand faults, and on this project's 2-core VM those were most of the
// faults of a NoSync write stream and of its writes slower than 10 us (see
// docs/ARCHITECTURE.md, "Concurrency in the store"). Pebble recycles its
// memtable arenas for the same reason. It is safe for concurrent use.
type Recycler struct {
	mu    sync.Mutex
	limit int // bytes kept at most
	held  int // bytes kept now
	free  slabs

	reused atomic.Uint64 // slabs and chunks handed out again
}

// slabs are the slabs and chunks a memtable took (or a Recycler keeps).
type slabs struct {
	nodes  [][]node
	links  [][]atomic.Pointer[node]
	chunks [][]byte
}

// The bytes of each slab and chunk, for the Recycler's limit.
const (
	nodeSlabBytes = nodeSlab * int(unsafe.Sizeof(node{}))
	linkSlabBytes = linkSlab * int(unsafe.Sizeof(atomic.Pointer[node]{}))
)

// NewRecycler returns a Recycler that keeps at most limit bytes.
func NewRecycler(limit int) *Recycler { return &Recycler{limit: max(limit, 0)} }

// Reused is the number of slabs and chunks handed out again so far.
func (r *Recycler) Reused() uint64 { return r.reused.Load() }

// Held is the number of bytes the Recycler keeps now.
func (r *Recycler) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// nodeSlab returns a slab of nodes: a kept one, cleared (its stale links,
// keys and values would keep old memory reachable), or a new one.
func (r *Recycler) nodeSlab() []node {
	if r != nil {
		if s, ok := take(r, &r.free.nodes, nodeSlabBytes); ok {
			clear(s)
			return s
		}
	}
	return make([]node, nodeSlab)
}

// linkSlab is nodeSlab for the upper links of tall nodes.
func (r *Recycler) linkSlab() []atomic.Pointer[node] {
	if r != nil {
		if s, ok := take(r, &r.free.links, linkSlabBytes); ok {
			clear(s)
			return s
		}
	}
	return make([]atomic.Pointer[node], linkSlab)
}

// chunk returns an empty byte chunk of capacity byteChunk: a kept one
// (bytes hold no pointers, so it is not cleared) or a new one.
func (r *Recycler) chunk() []byte {
	if r != nil {
		if c, ok := take(r, &r.free.chunks, byteChunk); ok {
			return c[:0]
		}
	}
	return make([]byte, 0, byteChunk)
}

// take pops the last of r's kept slabs in free (one of r.free's lists),
// each size bytes, or reports that there is none.
func take[T any](r *Recycler, free *[]T, size int) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var none T
	n := len(*free)
	if n == 0 {
		return none, false
	}
	s := (*free)[n-1]
	(*free)[n-1] = none
	*free = (*free)[:n-1]
	r.held -= size
	r.reused.Add(1)
	return s, true
}

// put keeps s, or as much of it as fits under the limit, in the
// proportions of s (a memtable needs nodes and bytes in about the ratio it
// used them), and drops the rest.
func (r *Recycler) put(s slabs) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	total := len(s.nodes)*nodeSlabBytes + len(s.links)*linkSlabBytes + len(s.chunks)*byteChunk
	room := r.limit - r.held
	if total == 0 || room <= 0 {
		return
	}
	keep := func(n int) int { return n * min(room, total) / total }
	nodes, links, chunks := s.nodes[:keep(len(s.nodes))], s.links[:keep(len(s.links))], s.chunks[:keep(len(s.chunks))]
	r.free.nodes = append(r.free.nodes, nodes...)
	r.free.links = append(r.free.links, links...)
	r.free.chunks = append(r.free.chunks, chunks...)
	r.held += len(nodes)*nodeSlabBytes + len(links)*linkSlabBytes + len(chunks)*byteChunk
}

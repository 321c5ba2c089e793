// Package memtable is the in-memory write buffer of the kv store: a skiplist
// of internal keys (user key, sequence number, kind) ordered like the tables
// (user key ascending, then sequence number descending, then kind descending).
//
// Writers are serialized by a mutex (the store has a single commit leader, so
// it is uncontended); readers never lock: every link is an atomic pointer and
// a node is fully built before it is published by the atomic store that links
// it into level 0, so a concurrent reader sees either the old or the new list.
// Nodes are never removed; a memtable is dropped as a whole once flushed,
// and its memory may go to a Recycler for the next one.
package memtable

import (
	"bytes"
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/internal/base"
)

const maxHeight = 20

// nodeOverhead approximates the bytes a node costs beyond its key and value,
// used for the size that decides when the memtable is full.
const nodeOverhead = 64

// inlineHeight is the number of a node's links kept in the node itself.
// With branching factor 4, 255 nodes in 256 are at most 4 high.
const inlineHeight = 4

// node is a skiplist entry. The fields a search reads at every step, the
// key prefix and the low links, come first and share a cache line, so a
// step that the prefix decides costs one cache miss (Pebble's arena
// skiplist inlines the whole tower for the same reason).
type node struct {
	// prefix is the first 8 bytes of key.UserKey, big endian, zero padded:
	// nodes whose prefixes differ compare by prefix alone (see compare).
	prefix uint64
	tower  [inlineHeight]atomic.Pointer[node] // links of levels 0..inlineHeight-1
	upper  []atomic.Pointer[node]             // links from level inlineHeight up; nil if not that high
	key    base.InternalKey
	value  []byte
}

// next returns the node's link at level lvl (below its height).
func (n *node) next(lvl int) *atomic.Pointer[node] {
	if lvl < inlineHeight {
		return &n.tower[lvl]
	}
	return &n.upper[lvl-inlineHeight]
}

// keyPrefix returns the first 8 bytes of k as a big-endian number, padded
// with zeros. Where two keys' prefixes differ, they order as the keys do:
// the first differing byte is within the 8, or one key is a prefix of the
// other and its padding zeros are not above the other's bytes.
func keyPrefix(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var p uint64
	for i, c := range k {
		p |= uint64(c) << (56 - 8*i)
	}
	return p
}

// compare orders n's key against key, whose prefix is kp, as
// base.CompareInternalKeys does.
func compare(n *node, key base.InternalKey, kp uint64) int {
	if n.prefix != kp {
		if n.prefix < kp {
			return -1
		}
		return 1
	}
	return base.CompareInternalKeys(n.key, key)
}

// Nodes and the upper links of tall nodes are carved from slabs, and keys and values
// are copied into byte chunks (which hold no pointers, so the collector
// does not scan them), so that an insert allocates nothing but, now and
// then, a new slab or chunk. A key or value over a quarter of a chunk gets
// its own allocation.
const (
	nodeSlab  = 256
	linkSlab  = 256
	byteChunk = 64 << 10
)

// MemTable is a concurrent skiplist of internal keys. The zero value is not
// usable; call New.
type MemTable struct {
	head   *node
	height atomic.Int32
	size   atomic.Int64
	count  atomic.Int64

	mu    sync.Mutex // serializes Add; guards rnd and the slabs
	rnd   uint64
	nodes []node                 // unused nodes of the current slab
	links []atomic.Pointer[node] // unused links of the current slab
	bytes []byte                 // the current byte chunk (free space from len)
	own   slabs                  // every slab and chunk taken, for Release

	rec  *Recycler    // where Release hands own (nil: nowhere)
	refs atomic.Int32 // see Ref
}

// copyBytes returns a copy of b in the memtable's byte chunks (under mu).
// nil stays nil (a tombstone's value).
func (m *MemTable) copyBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	if len(b) > byteChunk/4 {
		return append([]byte(nil), b...)
	}
	if cap(m.bytes)-len(m.bytes) < len(b) {
		m.bytes = m.rec.chunk()
		m.own.chunks = append(m.own.chunks, m.bytes)
	}
	start := len(m.bytes)
	m.bytes = append(m.bytes, b...)
	return m.bytes[start:len(m.bytes):len(m.bytes)]
}

// newNode returns a node with nh links from the slabs (under mu).
func (m *MemTable) newNode(key base.InternalKey, value []byte, nh int) *node {
	if len(m.nodes) == 0 {
		m.nodes = m.rec.nodeSlab()
		m.own.nodes = append(m.own.nodes, m.nodes)
	}
	n := &m.nodes[0]
	m.nodes = m.nodes[1:]
	if up := nh - inlineHeight; up > 0 && len(m.links) < up {
		m.links = m.rec.linkSlab()
		m.own.links = append(m.own.links, m.links)
	}
	key.UserKey = m.copyBytes(key.UserKey)
	n.prefix, n.key, n.value, n.upper = keyPrefix(key.UserKey), key, m.copyBytes(value), nil
	if nh > inlineHeight {
		up := nh - inlineHeight
		n.upper = m.links[:up:up]
		m.links = m.links[up:]
	}
	return n
}

// New returns an empty memtable whose memory is its own.
func New() *MemTable { return NewRecycled(nil) }

// NewRecycled returns an empty memtable that takes its slabs and chunks
// from r first and hands them back to it on Release (nil r: New).
func NewRecycled(r *Recycler) *MemTable {
	m := &MemTable{head: &node{upper: make([]atomic.Pointer[node], maxHeight-inlineHeight)}, rnd: 0x9e3779b97f4a7c15, rec: r}
	m.height.Store(1)
	return m
}

// Ref records one more holder of the memtable (the store: a read state
// that lists it).
func (m *MemTable) Ref() { m.refs.Add(1) }

// Unref drops a holder recorded by Ref; the last one releases the
// memtable's memory to its Recycler (Release). So the store must hold a
// reference for as long as anything may read or write the memtable.
func (m *MemTable) Unref() {
	if m.refs.Add(-1) == 0 {
		m.Release()
	}
}

// Release hands the memtable's slabs and chunks to its Recycler, for
// memtables created later to write over. The caller guarantees that
// nothing reads or writes the memtable any more: its entries are gone.
// Without a Recycler it does nothing (the collector frees the memory).
func (m *MemTable) Release() {
	m.mu.Lock()
	own := m.own
	m.own = slabs{}
	m.nodes, m.links, m.bytes = nil, nil, nil
	m.mu.Unlock()
	m.rec.put(own)
}

func (m *MemTable) randomHeight() int {
	// xorshift64*; only the writer touches rnd (under mu).
	m.rnd ^= m.rnd >> 12
	m.rnd ^= m.rnd << 25
	m.rnd ^= m.rnd >> 27
	r := m.rnd * 2685821657736338717
	h := 1
	for h < maxHeight && r&3 == 0 { // branching factor 4
		h++
		r >>= 2
	}
	return h
}

// Add inserts key and its value, copying both into the memtable's own
// storage (the caller may reuse its buffers once Add returns). Inserting an
// internal key equal to an existing one is not expected (sequence numbers
// are unique).
func (m *MemTable) Add(key base.InternalKey, value []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var preds [maxHeight]*node
	x := m.head
	h := int(m.height.Load())
	kp := keyPrefix(key.UserKey)
	for lvl := h - 1; lvl >= 0; lvl-- {
		x, _ = splice(x, key, kp, lvl)
		preds[lvl] = x
	}
	nh := m.randomHeight()
	if nh > h {
		for lvl := h; lvl < nh; lvl++ {
			preds[lvl] = m.head
		}
		m.height.Store(int32(nh))
	}
	n := m.newNode(key, value, nh)
	for lvl := 0; lvl < nh; lvl++ {
		n.next(lvl).Store(preds[lvl].next(lvl).Load())
	}
	// Publish bottom-up: once linked at level 0 the node is visible to
	// readers, and its own links are already set.
	for lvl := 0; lvl < nh; lvl++ {
		preds[lvl].next(lvl).Store(n)
	}
	m.size.Add(int64(len(key.UserKey) + len(value) + nodeOverhead))
	m.count.Add(1)
}

// Size is the approximate memory used by the entries, in bytes.
func (m *MemTable) Size() int64 { return m.size.Load() }

// Len is the number of entries.
func (m *MemTable) Len() int { return int(m.count.Load()) }

// Empty reports whether the memtable holds no entry.
func (m *MemTable) Empty() bool { return m.count.Load() == 0 }

// splice walks level lvl from x, whose key is below key (or the head), to
// the last node below key and the node after it (nil at the end).
func splice(x *node, key base.InternalKey, kp uint64, lvl int) (pred, succ *node) {
	for {
		nx := x.next(lvl).Load()
		if nx == nil || compare(nx, key, kp) >= 0 {
			return x, nx
		}
		x = nx
	}
}

// seek returns the last node whose key is < key (or the head) and the
// node after it on level 0 (nil at the end), both as its walk saw them.
// The successor must be the one the walk compared, not a second load of
// pred's link: an Add may link a node (below key) after pred in between.
func (m *MemTable) seek(key base.InternalKey) (pred, succ *node) {
	x := m.head
	kp := keyPrefix(key.UserKey)
	for lvl := int(m.height.Load()) - 1; lvl >= 0; lvl-- {
		// splice's walk, written out: this is every read's hot loop.
		for {
			nx := x.next(lvl).Load()
			if nx == nil || compare(nx, key, kp) >= 0 {
				succ = nx
				break
			}
			x = nx
		}
	}
	return x, succ
}

// findGE returns the first node whose key is >= key, or nil.
func (m *MemTable) findGE(key base.InternalKey) *node {
	_, succ := m.seek(key)
	return succ
}

// findLT returns the last node whose key is < key, or nil.
func (m *MemTable) findLT(key base.InternalKey) *node {
	if pred, _ := m.seek(key); pred != m.head {
		return pred
	}
	return nil
}

func (m *MemTable) findLast() *node {
	x := m.head
	for lvl := int(m.height.Load()) - 1; lvl >= 0; lvl-- {
		for {
			nx := x.next(lvl).Load()
			if nx == nil {
				break
			}
			x = nx
		}
	}
	if x == m.head {
		return nil
	}
	return x
}

// seekKey is the smallest internal key with the given user key.
func seekKey(userKey []byte) base.InternalKey {
	return base.InternalKey{UserKey: userKey, Seq: math.MaxUint64, Kind: base.Kind(math.MaxUint8)}
}

// Get returns the newest version of userKey whose sequence number is < seq.
// The value is the memtable's own slice: callers must copy it before handing
// it out.
func (m *MemTable) Get(userKey []byte, seq uint64) (value []byte, kind base.Kind, found bool) {
	if seq == 0 {
		return nil, 0, false
	}
	n := m.findGE(base.InternalKey{UserKey: userKey, Seq: seq - 1, Kind: base.Kind(math.MaxUint8)})
	if n == nil || !bytes.Equal(n.key.UserKey, userKey) {
		return nil, 0, false
	}
	return n.value, n.key.Kind, true
}

// NewIter returns an iterator over every entry (all versions). It sees
// entries added after its creation when it moves over them; the store hides
// them by sequence number.
func (m *MemTable) NewIter() *Iter { return &Iter{m: m} }

// Iter walks a memtable in internal-key order. It implements
// base.Iterator.
type Iter struct {
	m *MemTable
	n *node
}

var _ base.Iterator = (*Iter)(nil)

// First implements base.Iterator.
func (it *Iter) First() bool { it.n = it.m.head.tower[0].Load(); return it.n != nil }

// Last implements base.Iterator.
func (it *Iter) Last() bool { it.n = it.m.findLast(); return it.n != nil }

// SeekGE implements base.Iterator.
func (it *Iter) SeekGE(key []byte) bool { it.n = it.m.findGE(seekKey(key)); return it.n != nil }

// SeekLT implements base.Iterator.
func (it *Iter) SeekLT(key []byte) bool { it.n = it.m.findLT(seekKey(key)); return it.n != nil }

// Next implements base.Iterator.
func (it *Iter) Next() bool {
	if it.n == nil {
		return false
	}
	it.n = it.n.tower[0].Load()
	return it.n != nil
}

// Prev implements base.Iterator.
func (it *Iter) Prev() bool {
	if it.n == nil {
		return false
	}
	it.n = it.m.findLT(it.n.key)
	return it.n != nil
}

// Key implements base.Iterator.
func (it *Iter) Key() base.InternalKey { return it.n.key }

// Value implements base.Iterator.
func (it *Iter) Value() []byte { return it.n.value }

// Error implements base.Iterator.
func (it *Iter) Error() error { return nil }

// Close implements base.Iterator.
func (it *Iter) Close() error { it.n = nil; return nil }

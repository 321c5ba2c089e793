// Package memtable is the in-memory write buffer of the kv store: a skiplist
// of internal keys (user key, sequence number, kind) ordered like the tables
// (user key ascending, then sequence number descending, then kind descending).
//
// Writers are serialized by a mutex (the store has a single commit leader, so
// it is uncontended); readers never lock: every link is an atomic pointer and
// a node is fully built before it is published by the atomic store that links
// it into level 0, so a concurrent reader sees either the old or the new list.
// Nodes are never removed; a memtable is dropped as a whole once flushed.
package memtable

import (
	"bytes"
	"math"
	"sync"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/sstable"
)

const maxHeight = 20

// nodeOverhead approximates the bytes a node costs beyond its key and value,
// used for the size that decides when the memtable is full.
const nodeOverhead = 64

type node struct {
	key   sstable.InternalKey
	value []byte
	next  []atomic.Pointer[node]
}

// MemTable is a concurrent skiplist of internal keys. The zero value is not
// usable; call New.
type MemTable struct {
	head   *node
	height atomic.Int32
	size   atomic.Int64
	count  atomic.Int64

	mu  sync.Mutex // serializes Add
	rnd uint64
}

// New returns an empty memtable.
func New() *MemTable {
	m := &MemTable{head: &node{next: make([]atomic.Pointer[node], maxHeight)}, rnd: 0x9e3779b97f4a7c15}
	m.height.Store(1)
	return m
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

// Add inserts key (with a copy of neither key nor value: the caller hands
// over ownership) and its value. Inserting an internal key equal to an
// existing one is not expected (sequence numbers are unique).
func (m *MemTable) Add(key sstable.InternalKey, value []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var preds [maxHeight]*node
	x := m.head
	h := int(m.height.Load())
	for lvl := h - 1; lvl >= 0; lvl-- {
		for {
			nx := x.next[lvl].Load()
			if nx == nil || sstable.CompareInternalKeys(nx.key, key) >= 0 {
				break
			}
			x = nx
		}
		preds[lvl] = x
	}
	nh := m.randomHeight()
	if nh > h {
		for lvl := h; lvl < nh; lvl++ {
			preds[lvl] = m.head
		}
		m.height.Store(int32(nh))
	}
	n := &node{key: key, value: value, next: make([]atomic.Pointer[node], nh)}
	for lvl := 0; lvl < nh; lvl++ {
		n.next[lvl].Store(preds[lvl].next[lvl].Load())
	}
	// Publish bottom-up: once linked at level 0 the node is visible to
	// readers, and its own links are already set.
	for lvl := 0; lvl < nh; lvl++ {
		preds[lvl].next[lvl].Store(n)
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

// findGE returns the first node whose key is >= key, or nil.
func (m *MemTable) findGE(key sstable.InternalKey) *node {
	x := m.head
	for lvl := int(m.height.Load()) - 1; lvl >= 0; lvl-- {
		for {
			nx := x.next[lvl].Load()
			if nx == nil || sstable.CompareInternalKeys(nx.key, key) >= 0 {
				break
			}
			x = nx
		}
	}
	return x.next[0].Load()
}

// findLT returns the last node whose key is < key, or nil.
func (m *MemTable) findLT(key sstable.InternalKey) *node {
	x := m.head
	for lvl := int(m.height.Load()) - 1; lvl >= 0; lvl-- {
		for {
			nx := x.next[lvl].Load()
			if nx == nil || sstable.CompareInternalKeys(nx.key, key) >= 0 {
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

func (m *MemTable) findLast() *node {
	x := m.head
	for lvl := int(m.height.Load()) - 1; lvl >= 0; lvl-- {
		for {
			nx := x.next[lvl].Load()
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
func seekKey(userKey []byte) sstable.InternalKey {
	return sstable.InternalKey{UserKey: userKey, Seq: math.MaxUint64, Kind: sstable.Kind(math.MaxUint8)}
}

// Get returns the newest version of userKey whose sequence number is < seq.
// The value is the memtable's own slice: callers must copy it before handing
// it out.
func (m *MemTable) Get(userKey []byte, seq uint64) (value []byte, kind sstable.Kind, found bool) {
	if seq == 0 {
		return nil, 0, false
	}
	n := m.findGE(sstable.InternalKey{UserKey: userKey, Seq: seq - 1, Kind: sstable.Kind(math.MaxUint8)})
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
// sstable.Iterator.
type Iter struct {
	m *MemTable
	n *node
}

var _ sstable.Iterator = (*Iter)(nil)

// First implements sstable.Iterator.
func (it *Iter) First() bool { it.n = it.m.head.next[0].Load(); return it.n != nil }

// Last implements sstable.Iterator.
func (it *Iter) Last() bool { it.n = it.m.findLast(); return it.n != nil }

// SeekGE implements sstable.Iterator.
func (it *Iter) SeekGE(key []byte) bool { it.n = it.m.findGE(seekKey(key)); return it.n != nil }

// SeekLT implements sstable.Iterator.
func (it *Iter) SeekLT(key []byte) bool { it.n = it.m.findLT(seekKey(key)); return it.n != nil }

// Next implements sstable.Iterator.
func (it *Iter) Next() bool {
	if it.n == nil {
		return false
	}
	it.n = it.n.next[0].Load()
	return it.n != nil
}

// Prev implements sstable.Iterator.
func (it *Iter) Prev() bool {
	if it.n == nil {
		return false
	}
	it.n = it.m.findLT(it.n.key)
	return it.n != nil
}

// Key implements sstable.Iterator.
func (it *Iter) Key() sstable.InternalKey { return it.n.key }

// Value implements sstable.Iterator.
func (it *Iter) Value() []byte { return it.n.value }

// Error implements sstable.Iterator.
func (it *Iter) Error() error { return nil }

// Close implements sstable.Iterator.
func (it *Iter) Close() error { it.n = nil; return nil }

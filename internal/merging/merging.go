// Package merging is the merging iterator: one iterator over the union of
// several in internal-key order, as Pebble's mergingIter. Reads merge the
// memtables and tables of a store's view with it, compactions their
// inputs.
package merging

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/adaptkv/adaptkv/internal/base"
)

// NewIter returns an iterator over the union of iters in internal-key
// order (user key ascending, then sequence number descending, then kind
// descending). Equal internal keys from different children (which a
// well-formed LSM never has) come out in argument order going forward, in
// reverse argument order going backward. Nil children are ignored.
//
// It supports First, Last, SeekGE, SeekLT, Next and Prev, and switching
// direction at any position, like Pebble's merging iterator: the children
// form a min-heap going forward and a max-heap going backward. Next after
// running off the start (Prev returned false) lands on the first key; Prev
// after running off the end lands on the last key. Next and Prev on an
// iterator that was never positioned return false. Children are only
// stepped (Next, Prev) from a valid position; an exhausted child is
// repositioned with First or Last instead.
//
// The first error a child reports stops the iteration: every positioning
// call then returns false and Error returns that error. Close closes every
// child and returns the first error met; after Close, positioning returns
// false and Error returns base.ErrClosed (or the error Close returned). The
// iterator is not safe for
// concurrent use.
func NewIter(iters ...base.Iterator) base.Iterator {
	m := &Iter{}
	m.Init(iters)
	return m
}

// Iter is the iterator NewIter returns, as a type a caller
// can hold by value and reuse: Init makes it an iterator over iters (as
// NewIter does), reusing the memory of its previous use, whatever
// state that left it in. Its zero value is an iterator over nothing.
type Iter struct {
	iters  []base.Iterator
	heap   []heapItem
	inHeap []bool // scratch for direction switches
	dir    int
	err    error
	closed bool
	// alone: the heap holds one child, stepped without caching its key
	// (nothing to order it against): Key asks the child.
	alone bool
}

// Init makes m an unpositioned iterator over the non-nil iterators of
// iters. It keeps no reference to the iters slice itself.
func (m *Iter) Init(iters []base.Iterator) {
	clear(m.iters)
	m.iters = m.iters[:0]
	for _, it := range iters {
		if it != nil {
			m.iters = append(m.iters, it)
		}
	}
	clear(m.heap)
	m.heap = slices.Grow(m.heap[:0], len(m.iters))
	if cap(m.inHeap) < len(m.iters) {
		m.inHeap = make([]bool, len(m.iters))
	}
	m.inHeap = m.inHeap[:len(m.iters)]
	m.dir, m.err, m.closed, m.alone = dirNone, nil, false, false
}

// direction of the merging iterator's heap.
const (
	dirNone    = 0
	dirForward = 1
	dirReverse = -1
)

type heapItem struct {
	key base.InternalKey // cached child.Key(), valid until the child moves
	idx int              // child index
}

// less reports whether heap item a comes before b in the current direction.
// Ties between children are broken by child index so the order is total.
func (m *Iter) less(a, b *heapItem) bool {
	c := bytes.Compare(a.key.UserKey, b.key.UserKey)
	if c == 0 {
		switch {
		case a.key.Seq != b.key.Seq:
			c = cmp.Compare(b.key.Seq, a.key.Seq)
		case a.key.Kind != b.key.Kind:
			c = cmp.Compare(b.key.Kind, a.key.Kind)
		default:
			c = a.idx - b.idx // never 0: distinct children
		}
	}
	return (c < 0) != (m.dir == dirReverse)
}

func (m *Iter) siftDown(i int) {
	h := m.heap
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && m.less(&h[r], &h[l]) {
			j = r
		}
		if !m.less(&h[j], &h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

func (m *Iter) heapify() {
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.siftDown(i)
	}
}

// fail records err, empties the heap and returns false.
func (m *Iter) fail(err error) bool {
	if m.err == nil {
		m.err = err
	}
	m.heap, m.alone = m.heap[:0], false
	return false
}

// add pushes child i (just positioned, ok = result) without restoring the
// heap order, or records its error. It returns false on a child error.
func (m *Iter) add(i int, ok bool) bool {
	if ok {
		m.heap = append(m.heap, heapItem{key: m.iters[i].Key(), idx: i})
		return true
	}
	if err := m.iters[i].Error(); err != nil {
		m.fail(err)
		return false
	}
	return true
}

// position runs pos on every child and builds the heap for dir.
func (m *Iter) position(dir int, pos func(it base.Iterator) bool) bool {
	if m.err != nil {
		return false
	}
	m.heap, m.alone = m.heap[:0], false
	m.dir = dir
	for i, it := range m.iters {
		if !m.add(i, pos(it)) {
			return false
		}
	}
	m.heapify()
	return len(m.heap) > 0
}

// First implements base.Iterator.
func (m *Iter) First() bool {
	return m.position(dirForward, base.Iterator.First)
}

// Last implements base.Iterator.
func (m *Iter) Last() bool {
	return m.position(dirReverse, base.Iterator.Last)
}

// SeekGE implements base.Iterator.
func (m *Iter) SeekGE(key []byte) bool {
	return m.position(dirForward, func(it base.Iterator) bool { return it.SeekGE(key) })
}

// SeekLT implements base.Iterator.
func (m *Iter) SeekLT(key []byte) bool {
	return m.position(dirReverse, func(it base.Iterator) bool { return it.SeekLT(key) })
}

// step advances the top child in the current direction and restores the heap.
func (m *Iter) step() bool {
	if len(m.heap) == 0 {
		return false
	}
	top := &m.heap[0]
	it := m.iters[top.idx]
	var ok bool
	if m.dir == dirForward {
		ok = it.Next()
	} else {
		ok = it.Prev()
	}
	if ok {
		if len(m.heap) == 1 {
			m.alone = true // top.key is stale; Key asks the child
			return true
		}
		top.key = it.Key()
		m.siftDown(0)
		return true
	}
	m.alone = false
	if err := it.Error(); err != nil {
		return m.fail(err)
	}
	last := len(m.heap) - 1
	m.heap[0] = m.heap[last]
	m.heap = m.heap[:last]
	m.siftDown(0)
	return len(m.heap) > 0
}

// switchDir repositions every child for the opposite direction so that the
// new heap top is the neighbour of the current key K in that direction.
//
// Going forward, every child other than the top is at its first entry > K
// or exhausted (all its entries < K); going backward, at its last entry < K
// or exhausted (all its entries > K). So to turn around, a child still in
// the heap steps once the other way, an exhausted child restarts from its
// far end (Last or First), and the top child steps once the other way too,
// which moves past K itself.
func (m *Iter) switchDir(dir int) bool {
	for i := range m.inHeap {
		m.inHeap[i] = false
	}
	for _, h := range m.heap {
		m.inHeap[h.idx] = true
	}
	m.heap, m.alone = m.heap[:0], false
	m.dir = dir
	for i, it := range m.iters {
		var ok bool
		switch {
		case m.inHeap[i] && dir == dirForward:
			ok = it.Next()
		case m.inHeap[i]:
			ok = it.Prev()
		case dir == dirForward:
			ok = it.First()
		default:
			ok = it.Last()
		}
		if !m.add(i, ok) {
			return false
		}
	}
	m.heapify()
	return len(m.heap) > 0
}

// Next implements base.Iterator.
func (m *Iter) Next() bool {
	switch {
	case m.err != nil || m.dir == dirNone:
		return false
	case m.dir == dirReverse:
		return m.switchDir(dirForward)
	}
	return m.step()
}

// Prev implements base.Iterator.
func (m *Iter) Prev() bool {
	switch {
	case m.err != nil || m.dir == dirNone:
		return false
	case m.dir == dirForward:
		return m.switchDir(dirReverse)
	}
	return m.step()
}

// Key implements base.Iterator. It returns the zero InternalKey when the
// iterator is not at a key.
func (m *Iter) Key() base.InternalKey {
	if len(m.heap) == 0 {
		return base.InternalKey{}
	}
	if m.alone {
		return m.iters[m.heap[0].idx].Key()
	}
	return m.heap[0].key
}

// Value implements base.Iterator. It returns nil when the iterator is not
// at a key.
func (m *Iter) Value() []byte {
	if len(m.heap) == 0 {
		return nil
	}
	return m.iters[m.heap[0].idx].Value()
}

// Error implements base.Iterator.
func (m *Iter) Error() error {
	return m.err
}

// Close implements base.Iterator: it closes every child and returns the
// first error met (by the iteration or by a child's Close).
func (m *Iter) Close() error {
	if m.closed {
		return m.err
	}
	m.closed = true
	err := m.err
	for _, it := range m.iters {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	m.heap, m.alone = m.heap[:0], false
	if err != nil {
		m.err = err
	} else {
		m.err = base.ErrClosed
	}
	return err
}

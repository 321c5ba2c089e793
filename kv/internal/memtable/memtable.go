// Package memtable is the in-memory write buffer of the kv store: a skiplist
// of internal keys (user key ascending, then sequence number descending,
// then kind descending, as in the tables).
//
// Every entry is one record in an arena of byte chunks: a small header, the
// node's links (32-bit references, as many as the node is high), then the
// key and the value. The arena holds no Go pointers, so the collector never
// scans a memtable, an insert allocates nothing but now and then a chunk,
// and an entry costs about 37 bytes besides its key and value (Pebble's
// arena skiplist has the same shape). The skiplist has branching factor 4,
// or 2 in memtables of 32 MiB and more, whose searches are bound by cache
// misses (see wideAt). See docs/ARCHITECTURE.md, "The memtable".
//
// Writers are serialized by a mutex (the store has a single commit leader, so
// it is uncontended); a batch's entries may go in together (AddAll), whose
// searches overlap their cache misses in a large memtable. Readers never
// lock: links are read and written atomically, and a node is fully written
// before the atomic store that links it into level 0 publishes it, so a
// concurrent reader sees either the old or the new list. Nodes are never removed; a memtable is dropped as a
// whole once flushed, and its chunks may go to a Recycler for the next one.
package memtable

import (
	"bytes"
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/rangedel"
)

const maxHeight = 20

// node is the header of an entry in the arena; it is only ever used
// through a pointer into a chunk. The fields a search reads at every step,
// the key prefix and the low links, share the entry's first cache line.
// tower holds the node's first link; the others (height in all) follow it
// in the arena, and then the key and the value.
type node struct {
	// prefix is the first 8 bytes of the user key, big endian, zero padded:
	// nodes whose prefixes differ compare by prefix alone (see compare).
	prefix uint64
	seq    uint64
	keyLen uint32
	valLen uint32 // the value's length, or nilValue for a nil value
	kind   base.KeyKind
	height uint8
	_      [2]byte
	tower  [1]atomic.Uint32 // link of level 0 (a ref; 0: the end)
}

const (
	// headerSize is the bytes of an entry before its tower.
	headerSize = int(unsafe.Offsetof(node{}.tower))
	// entryAlign keeps every node, and so its 64-bit fields, 8-aligned.
	entryAlign = 8
	// nilValue marks a nil value (a tombstone's), which Value returns as
	// nil rather than empty. Values are far shorter than 2^32-1 bytes.
	nilValue = math.MaxUint32
)

// entrySize is the arena bytes of an entry of height h with a key and a
// value of those lengths. It is at least unsafe.Sizeof(node{}), so a
// *node never reaches past its entry.
func entrySize(h, keyLen, valLen int) int {
	n := headerSize + 4*h + keyLen + valLen
	return (n + entryAlign - 1) &^ (entryAlign - 1)
}

// A ref names a node: its chunk's index in the high bits and its offset in
// the chunk, in units of entryAlign, in the low refOffBits. Chunks of
// standard size hold nodes at any offset; an entry too large for them gets
// a chunk of its own, at offset 0. Ref 0 is the head node, which nothing
// links to, so a link of 0 means the end of the list.
type ref uint32

const (
	refOffBits = 15
	// maxChunkSize is the largest standard chunk: offsets of up to
	// 2^refOffBits units of entryAlign.
	maxChunkSize = entryAlign << refOffBits
	minChunkSize = 4 << 10
	// maxChunks is the number of chunks a ref can name.
	maxChunks = 1 << (32 - refOffBits)
	// growAt is the number of chunks after which a memtable takes chunks
	// of maxChunkSize whatever its chunk size, so that small chunks do not
	// use up the refs (see Capacity).
	growAt = maxChunks / 8
)

// Capacity is the entry bytes (Size) a memtable is sure to hold, whatever
// the sizes of its entries: after growAt chunks, each further chunk holds
// at least 3/4 of maxChunkSize of entries or one entry of more than a
// quarter of it, so the remaining 7/8 of the refs reach at least 7 GiB.
// The caller of Add keeps Size within it.
const Capacity = 4 << 30

// MaxEntryOverhead is the most arena bytes an entry takes besides its key
// and value: a header, a full tower and the padding. A batch of n entries
// whose keys and values are b bytes takes at most b + n*MaxEntryOverhead.
const MaxEntryOverhead = headerSize + 4*maxHeight + entryAlign - 1

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

// link returns n's link at level lvl (below its height).
func (n *node) link(lvl int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Add(unsafe.Pointer(&n.tower), 4*lvl))
}

// empty is the zero-length key or value: not nil, and with no capacity, so
// nothing appends to it.
var empty = []byte{}

// bytesAt returns the n bytes at offset off of n's entry, with no spare
// capacity. Zero bytes are empty, not a pointer that may be past the
// entry's chunk.
func (n *node) bytesAt(off, l int) []byte {
	if l == 0 {
		return empty
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(n), off)), l)
}

// userKey returns the node's user key, which is the arena's memory.
func (n *node) userKey() []byte {
	return n.bytesAt(headerSize+4*int(n.height), int(n.keyLen))
}

// key returns the node's internal key; its user key is the arena's memory.
func (n *node) key() base.InternalKey {
	return base.InternalKey{UserKey: n.userKey(), Seq: n.seq, Kind: n.kind}
}

// value returns the node's value (the arena's memory), nil if it was nil.
func (n *node) value() []byte {
	if n.valLen == nilValue {
		return nil
	}
	return n.bytesAt(headerSize+4*int(n.height)+int(n.keyLen), int(n.valLen))
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
	return base.CompareInternalKeys(n.key(), key)
}

// MemTable is a concurrent skiplist of internal keys. The zero value is not
// usable; call New.
type MemTable struct {
	chunks atomic.Pointer[[][]byte] // every chunk, by index; a ref's chunk is here once it is linked
	head   *node
	height atomic.Int32
	size   atomic.Int64
	count  atomic.Int64
	arena  atomic.Int64 // bytes of the chunks in chunks

	mu        sync.Mutex // serializes Add; guards rnd and the free space
	rnd       uint64
	free      []byte // the unused end of the current chunk
	freeRef   ref    // the ref of free's first byte
	chunkSize int    // bytes of a standard chunk (maxChunkSize from growAt chunks on)
	levelBits uint   // log2 of the skiplist's branching factor (see branching)
	groupAt   int64  // the size from which AddAll overlaps searches (groupAt; tests lower it)

	rec  *Recycler    // where Release hands the chunks (nil: nowhere)
	refs atomic.Int32 // see Ref

	// Range tombstones live apart from the point entries: AddRangeDel
	// appends to rdList under rdMu, and RangeDels fragments the list on
	// first use after a change (rdSet nil until then).
	rdMu       sync.Mutex
	rdList     []rangedel.Tombstone
	rdSet      atomic.Pointer[rangedel.Set]
	nRangeDels atomic.Int64
}

// New returns an empty memtable whose memory is its own, in chunks of
// maxChunkSize.
func New() *MemTable { return NewRecycled(nil) }

// NewRecycled returns an empty memtable that takes its chunks from r first
// (and has r's chunk size) and hands them back to it on Release (nil r:
// New).
func NewRecycled(r *Recycler) *MemTable {
	m := &MemTable{rnd: 0x9e3779b97f4a7c15, rec: r, chunkSize: r.chunkLen(), levelBits: r.levelBits(), groupAt: groupAt}
	m.chunks.Store(&[][]byte{})
	// The head is the first entry of chunk 0, so ref 0, and of full
	// height. A recycled chunk holds old entries: its links start cleared.
	_, m.head = m.alloc(entrySize(maxHeight, 0, 0))
	*m.head = node{height: maxHeight}
	for lvl := 1; lvl < maxHeight; lvl++ {
		m.head.link(lvl).Store(0)
	}
	m.height.Store(1)
	return m
}

// node returns the node r names. dir is a directory the caller loaded
// from m.chunks; a ref it does not cover yet (linked after it was loaded)
// makes node load the current one into *dir.
func (m *MemTable) node(dir *[][]byte, r ref) *node {
	i := int(r >> refOffBits)
	if i >= len(*dir) {
		*dir = *m.chunks.Load()
	}
	return (*node)(unsafe.Pointer(&(*dir)[i][int(r&(1<<refOffBits-1))*entryAlign]))
}

// alloc returns size bytes of arena (a multiple of entryAlign), as a node
// and its ref (under mu, or before m is shared). An entry of more than a
// quarter of a standard chunk gets a chunk of its own.
func (m *MemTable) alloc(size int) (ref, *node) {
	if size > m.chunkSize/4 {
		c := make([]byte, size)
		return m.addChunk(c) << refOffBits, (*node)(unsafe.Pointer(&c[0]))
	}
	if len(m.free) < size {
		c := m.rec.chunk(m.chunkSize)
		m.free, m.freeRef = c, m.addChunk(c)<<refOffBits
	}
	r, n := m.freeRef, (*node)(unsafe.Pointer(&m.free[0]))
	m.free = m.free[size:]
	m.freeRef += ref(size / entryAlign)
	return r, n
}

// addChunk publishes c as the next chunk and returns its index. The new
// directory shares the old one's array: readers of the old directory never
// index past its length. A chunk past the refs' reach is a broken caller
// contract (Size beyond Capacity), not bad input: it panics rather than
// link entries under refs that name other chunks.
func (m *MemTable) addChunk(c []byte) ref {
	if len(*m.chunks.Load()) == maxChunks {
		panic("memtable: more entries than Capacity")
	}
	dir := append(*m.chunks.Load(), c)
	m.chunks.Store(&dir)
	m.arena.Add(int64(len(c)))
	if len(dir) >= growAt {
		m.chunkSize = maxChunkSize
	}
	return ref(len(dir) - 1)
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

// Release hands the memtable's chunks to its Recycler, for memtables
// created later to write over. The caller guarantees that nothing reads or
// writes the memtable any more: its entries are gone. Without a Recycler
// it does nothing (the collector frees the memory).
func (m *MemTable) Release() {
	if m.rec == nil {
		return
	}
	m.mu.Lock()
	dir := *m.chunks.Swap(&[][]byte{})
	m.free, m.head = nil, nil
	m.arena.Store(0)
	m.mu.Unlock()
	m.rec.put(dir)
}

func (m *MemTable) randomHeight() int {
	// xorshift64*; only the writer touches rnd (under mu).
	m.rnd ^= m.rnd >> 12
	m.rnd ^= m.rnd << 25
	m.rnd ^= m.rnd >> 27
	r := m.rnd * 2685821657736338717
	h := 1
	mask := uint64(1)<<m.levelBits - 1
	for h < maxHeight && r&mask == 0 {
		h++
		r >>= m.levelBits
	}
	return h
}

// Add inserts key and its value, copying both into the memtable's own
// storage (the caller may reuse its buffers once Add returns). Inserting an
// internal key equal to an existing one is not expected (sequence numbers
// are unique), nor entries beyond Capacity.
func (m *MemTable) Add(key base.InternalKey, value []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir := *m.chunks.Load()
	m.add(&dir, key, value)
}

// add is Add under mu.
func (m *MemTable) add(dir *[][]byte, key base.InternalKey, value []byte) {
	var preds [maxHeight]*node
	x := m.head
	h := int(m.height.Load())
	kp := keyPrefix(key.UserKey)
	for lvl := h - 1; lvl >= 0; lvl-- {
		x, _ = m.splice(dir, x, lvl, key, kp)
		preds[lvl] = x
	}
	m.insert(dir, key, value, kp, &preds, h, 0)
}

// insert links a new entry for key after preds (under mu) and returns its
// height: preds[l] is the last node below key on level l for l < searched,
// as a search found it. If entries up to linked high were linked since
// that search, one may lie between a pred and key on the levels below
// linked, so those first walk on from their pred to the last node below
// key (levels the skiplist grew by since, from the head).
func (m *MemTable) insert(dir *[][]byte, key base.InternalKey, value []byte, kp uint64, preds *[maxHeight]*node, searched, linked int) int {
	h := int(m.height.Load())
	for lvl := 0; lvl < linked; lvl++ {
		x := m.head
		if lvl < searched {
			x = preds[lvl]
		}
		preds[lvl], _ = m.splice(dir, x, lvl, key, kp)
	}
	searched = max(searched, linked)
	nh := m.randomHeight()
	if nh > searched {
		for lvl := searched; lvl < nh; lvl++ {
			preds[lvl] = m.head
		}
	}
	if nh > h {
		m.height.Store(int32(nh))
	}
	size := entrySize(nh, len(key.UserKey), len(value))
	r, n := m.alloc(size)
	n.prefix, n.seq, n.kind, n.height = kp, key.Seq, key.Kind, uint8(nh)
	n.keyLen, n.valLen = uint32(len(key.UserKey)), uint32(len(value))
	if value == nil {
		n.valLen = nilValue
	}
	copy(n.bytesAt(headerSize+4*nh, len(key.UserKey)), key.UserKey)
	copy(n.bytesAt(headerSize+4*nh+len(key.UserKey), len(value)), value)
	for lvl := 0; lvl < nh; lvl++ {
		n.link(lvl).Store(preds[lvl].link(lvl).Load())
	}
	// Publish bottom-up: once linked at level 0 the node is visible to
	// readers, and its own links are already set.
	for lvl := 0; lvl < nh; lvl++ {
		preds[lvl].link(lvl).Store(uint32(r))
	}
	m.size.Add(int64(size))
	m.count.Add(1)
	return nh
}

// AddRangeDel adds a range tombstone: the versions of the keys in
// [start, end) below seq are deleted. The bounds are copied; the caller
// checks start < end.
func (m *MemTable) AddRangeDel(start, end []byte, seq uint64) {
	m.rdMu.Lock()
	defer m.rdMu.Unlock()
	m.rdList = append(m.rdList, rangedel.Tombstone{Start: bytes.Clone(start), End: bytes.Clone(end), Seq: seq})
	m.rdSet.Store(nil)
	m.nRangeDels.Add(1)
	m.size.Add(int64(len(start) + len(end) + rangeDelOverhead))
}

// rangeDelOverhead is what Size counts for a range tombstone beside its
// bounds (its list entry, and its share of the fragments).
const rangeDelOverhead = 64

// RangeDels returns the memtable's range tombstones, fragmented (nil:
// none). The set includes every tombstone added before the call.
func (m *MemTable) RangeDels() *rangedel.Set {
	if m.nRangeDels.Load() == 0 {
		return nil
	}
	if s := m.rdSet.Load(); s != nil {
		return s
	}
	m.rdMu.Lock()
	defer m.rdMu.Unlock()
	s := m.rdSet.Load()
	if s == nil {
		s = rangedel.Build(m.rdList)
		m.rdSet.Store(s)
	}
	return s
}

// Size is the bytes the entries use: the point entries' keys, values,
// headers and links in the arena, and the range tombstones.
func (m *MemTable) Size() int64 { return m.size.Load() }

// Len is the number of point entries.
func (m *MemTable) Len() int { return int(m.count.Load()) }

// ArenaBytes is the memory the memtable's arena holds: the chunks it has
// taken so far (Size, the unused end of its current chunk and the ends
// of earlier chunks an entry did not fit in), or 0 once Release handed
// them to a Recycler.
func (m *MemTable) ArenaBytes() int64 { return m.arena.Load() }

// Empty reports whether the memtable holds no entry and no range tombstone.
func (m *MemTable) Empty() bool { return m.count.Load() == 0 && m.nRangeDels.Load() == 0 }

// seek returns the last node whose key is < key (or the head) and the
// node after it on level 0 (nil at the end), both as its walk saw them.
// The successor must be the one the walk compared, not a second load of
// pred's link: an Add may link a node (below key) after pred in between.
func (m *MemTable) seek(key base.InternalKey) (pred, succ *node) {
	dir := *m.chunks.Load()
	x := m.head
	kp := keyPrefix(key.UserKey)
	for lvl := int(m.height.Load()) - 1; lvl >= 0; lvl-- {
		// splice's walk, written out: this is every read's hot loop, and
		// as a call Get took 6% longer (BenchmarkGet 293 -> 311 ns,
		// p = 0.015, 6 alternating runs).
		succ = nil
		for {
			nx := ref(x.link(lvl).Load())
			if nx == 0 {
				break
			}
			n := m.node(&dir, nx)
			if compare(n, key, kp) >= 0 {
				succ = n
				break
			}
			x = n
		}
	}
	return x, succ
}

// splice walks level lvl from x, whose key is below key (or the head), to
// the last node below key and the node after it (nil at the end), the one
// it compared.
func (m *MemTable) splice(dir *[][]byte, x *node, lvl int, key base.InternalKey, kp uint64) (pred, succ *node) {
	for {
		nx := ref(x.link(lvl).Load())
		if nx == 0 {
			return x, nil
		}
		n := m.node(dir, nx)
		if compare(n, key, kp) >= 0 {
			return x, n
		}
		x = n
	}
}

// next returns the node after n on level 0, or nil.
func (m *MemTable) next(n *node) *node {
	nx := ref(n.tower[0].Load())
	if nx == 0 {
		return nil
	}
	dir := *m.chunks.Load()
	return m.node(&dir, nx)
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
	dir := *m.chunks.Load()
	x := m.head
	for lvl := int(m.height.Load()) - 1; lvl >= 0; lvl-- {
		for nx := ref(x.link(lvl).Load()); nx != 0; nx = ref(x.link(lvl).Load()) {
			x = m.node(&dir, nx)
		}
	}
	if x == m.head {
		return nil
	}
	return x
}

// seekKey is the smallest internal key with the given user key.
func seekKey(userKey []byte) base.InternalKey {
	return base.InternalKey{UserKey: userKey, Seq: math.MaxUint64, Kind: base.KeyKind(math.MaxUint8)}
}

// Get returns the newest version of userKey whose sequence number is < seq.
// The value is the memtable's own slice: callers must copy it before handing
// it out.
func (m *MemTable) Get(userKey []byte, seq uint64) (value []byte, kind base.KeyKind, found bool) {
	value, kind, _, found = m.GetVersion(userKey, seq)
	return value, kind, found
}

// GetVersion is Get that also returns the version's sequence number.
func (m *MemTable) GetVersion(userKey []byte, seq uint64) (value []byte, kind base.KeyKind, vseq uint64, found bool) {
	if seq == 0 {
		return nil, 0, 0, false
	}
	n := m.findGE(base.InternalKey{UserKey: userKey, Seq: seq - 1, Kind: base.KeyKind(math.MaxUint8)})
	if n == nil || !bytes.Equal(n.userKey(), userKey) {
		return nil, 0, 0, false
	}
	return n.value(), n.kind, n.seq, true
}

// NewIter returns an iterator over every entry (all versions). It sees
// entries added after its creation when it moves over them; the store hides
// them by sequence number.
func (m *MemTable) NewIter() *Iter { return &Iter{m: m} }

// InitIter makes it what NewIter returns, in memory the caller reuses.
func (m *MemTable) InitIter(it *Iter) { *it = Iter{m: m} }

// Iter walks a memtable in internal-key order. It implements
// base.Iterator.
type Iter struct {
	m *MemTable
	n *node
}

var _ base.Iterator = (*Iter)(nil)

// First implements base.Iterator.
func (it *Iter) First() bool { it.n = it.m.next(it.m.head); return it.n != nil }

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
	it.n = it.m.next(it.n)
	return it.n != nil
}

// Prev implements base.Iterator.
func (it *Iter) Prev() bool {
	if it.n == nil {
		return false
	}
	it.n = it.m.findLT(it.n.key())
	return it.n != nil
}

// Key implements base.Iterator.
func (it *Iter) Key() base.InternalKey { return it.n.key() }

// Value implements base.Iterator.
func (it *Iter) Value() []byte { return it.n.value() }

// Error implements base.Iterator.
func (it *Iter) Error() error { return nil }

// Close implements base.Iterator.
func (it *Iter) Close() error { it.n = nil; return nil }

package kv

import (
	"bytes"
	"errors"
	"sort"
	"sync"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/adaptkv/adaptkv/internal/merging"
	"github.com/adaptkv/adaptkv/internal/rangedel"
	"github.com/adaptkv/adaptkv/kv/internal/memtable"
)

// Iterator walks the live user keys of a consistent view in key order,
// within the bounds of its IterOptions (SetBounds changes them). Key and
// Value are copies that stay valid until the next positioning call or
// Close. Next and Prev on an iterator that is not at a key return false:
// reposition it with First, Last, SeekGE or SeekLT. An Iterator is not safe
// for concurrent use (Clone gives another over the same view); Close it
// (before the DB) to release the tables it pins.
//
// Creating one is cheap: its state comes from a pool that closed
// iterators return theirs to, and it opens a table only when a
// positioning call reaches it (one table a level, and none of a level
// whose tables lie outside the bounds).
//
// An iterator still open when its DB is closed stops working: from then on
// its positioning calls return false and Error returns ErrClosed (a call
// that runs while Close runs ends normally or with ErrClosed). The tables
// it holds stay open (their files, and their blocks in the block cache)
// until the iterator is closed, so Close it even then.
type Iterator struct {
	// *iterState is the iterator's working state, pooled: Close hands it
	// back and sets it to nil, so that a closed Iterator cannot touch a
	// state another iterator now uses (methods check closed first).
	*iterState
	closed bool
	err    error
}

// iterState is an Iterator's state and everything it is built from, kept
// in iterStatePool between iterators (Pebble's iterAlloc): building and
// positioning an iterator allocates its Iterator handle and the tables'
// iterators, nothing else while its buffers fit.
type iterState struct {
	db *DB
	rs readView
	// rangeDels are the range tombstones of the memtables and of the
	// tables within the bounds (nil: none); a version they cover reads
	// as deleted.
	rangeDels *rangedel.Set
	lower     []byte // the bounds (nil: none), in lowerBuf and upperBuf
	upper     []byte
	dir       int // +1 forward, -1 backward
	valid     bool
	key       []byte
	value     []byte
	pos       bool // the internal iterator is at an entry
	// prefix: the iterator is at the key SeekPrefixGE found (Next and
	// Prev leave it).
	prefix bool

	// merging is the merged internal iterator (held by value and called
	// directly: no dynamic call between the Iterator and it).
	merging merging.Iter

	// Reused between iterators.
	levels             []levelIter // one per L0 sublevel, one per level below
	memIters           []memtable.Iter
	children           []base.Iterator
	sets               []*rangedel.Set
	withRangeDels      []*base.TableMeta
	lowerBuf, upperBuf []byte
}

var iterStatePool = sync.Pool{New: func() any { return new(iterState) }}

// maxPooledBuf is the largest key, value or bound buffer a pooled state
// keeps (a scan over large values should not pin them in the pool).
const maxPooledBuf = 64 << 10

// recycle drops what the state references and hands it to the pool.
func (s *iterState) recycle() {
	for i := range s.levels {
		s.levels[i] = levelIter{}
	}
	clear(s.memIters)
	clear(s.children)
	clear(s.sets)
	clear(s.withRangeDels)
	s.merging.Init(nil)
	keep := func(b []byte) []byte {
		if cap(b) > maxPooledBuf {
			return nil
		}
		return b[:0]
	}
	*s = iterState{
		merging: s.merging, levels: s.levels[:0], memIters: s.memIters[:0], children: s.children[:0], sets: s.sets[:0],
		withRangeDels: s.withRangeDels[:0], lowerBuf: keep(s.lowerBuf), upperBuf: keep(s.upperBuf),
		key: keep(s.key), value: keep(s.value),
	}
	iterStatePool.Put(s)
}

// NewIter returns an iterator over the current state (an implicit snapshot:
// later writes are not seen). o may be nil.
func (db *DB) NewIter(o *IterOptions) (*Iterator, error) { return db.newIter(o, 0) }

func (db *DB) newIter(o *IterOptions, seq uint64) (*Iterator, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	// The construction is a read in flight (Close waits for it); the
	// iterator it returns is not (rs.iters): see DB.Close.
	rs, err := db.loadReadState(seq)
	if err != nil {
		return nil, err
	}
	var lower, upper []byte
	if o != nil {
		lower, upper = o.LowerBound, o.UpperBound
	}
	return db.newIterIn(rs, lower, upper)
}

// newIterIn returns an iterator over the view rs, whose reference (a read
// in flight until then) it takes over, or releases on an error.
func (db *DB) newIterIn(rs readView, lower, upper []byte) (*Iterator, error) {
	s := iterStatePool.Get().(*iterState)
	s.db, s.rs = db, rs
	s.setBounds(lower, upper)
	if err := s.build(); err != nil {
		s.recycle()
		rs.release()
		return nil, err
	}
	rs.iters.Add(1)
	return &Iterator{iterState: s}, nil
}

// setBounds copies the bounds into the state's buffers.
func (s *iterState) setBounds(lower, upper []byte) {
	s.lower = copyBound(&s.lowerBuf, lower)
	s.upper = copyBound(&s.upperBuf, upper)
}

// copyBound copies b into *buf and returns the copy: nil for nil, non-nil
// for an empty b (an empty upper bound admits no key).
func copyBound(buf *[]byte, b []byte) []byte {
	if b == nil {
		return nil
	}
	*buf = append((*buf)[:0], b...)
	if *buf == nil {
		*buf = []byte{}
	}
	return (*buf)[:len(b):len(b)]
}

// SetBounds replaces the iterator's bounds (nil: none), as if it had been
// created with them; it copies them, and the caller may reuse its slices
// at once. The iterator is left at no key (its Key and Value are gone):
// position it with First, Last, SeekGE, SeekLT or SeekPrefixGE. Its view
// of the store does not change. Pebble's Iterator.SetBounds.
func (i *Iterator) SetBounds(lower, upper []byte) {
	if !i.usable() {
		return
	}
	s := i.iterState
	_ = s.merging.Close() // its children's errors were the positioning calls'
	s.valid, s.pos, s.prefix, s.dir, i.err = false, false, false, 0, nil
	s.setBounds(lower, upper)
	if err := s.build(); err != nil {
		i.err = err
	}
}

// Clone returns a new iterator over the same view of the store (the same
// implicit snapshot, the same bounds), unpositioned: Pebble's
// Iterator.Clone. The two are independent; Close each.
func (i *Iterator) Clone() (*Iterator, error) {
	if !i.usable() {
		return nil, i.err
	}
	db := i.db
	// Another reference to a state this iterator holds: it cannot be
	// freed, so it is taken even if the state is no longer current, and is
	// a read in flight until the clone is built.
	rs := readView{i.rs.readState, i.rs.seq, i.rs.refs.Acquire()}
	if db.closingNow.Load() {
		rs.release()
		return nil, ErrClosed
	}
	return db.newIterIn(rs, i.lower, i.upper)
}

// build makes s.merging the merged iterator over the memtables and the tables of
// s.rs within the bounds: a levelIter for every L0 sublevel (newest first;
// a sublevel is a sorted run, so a seek opens at most one table of it, as
// in Pebble) and for every level below, each over its tables within the
// bounds and opening them only when a positioning call reaches them.
func (s *iterState) build() error {
	v := s.rs.v
	n := len(v.L0Sublevels) + len(v.BelowL0)
	if cap(s.levels) < n {
		s.levels = make([]levelIter, 0, n) // pointers into it go to children
	}
	s.levels = s.levels[:0]
	children, sets, withRangeDels := s.children[:0], s.sets[:0], s.withRangeDels[:0]
	if cap(s.memIters) < len(s.rs.mems) {
		s.memIters = make([]memtable.Iter, len(s.rs.mems))
	}
	s.memIters = s.memIters[:len(s.rs.mems)]
	for i, mt := range s.rs.mems {
		mt.InitIter(&s.memIters[i])
		children = append(children, &s.memIters[i])
		if rd := mt.RangeDels(); rd != nil {
			sets = append(sets, rd)
		}
	}
	addLevel := func(ts []*base.TableMeta) {
		if len(ts) == 0 {
			return
		}
		s.levels = append(s.levels, levelIter{tables: ts, db: s.db, lower: s.lower, upper: s.upper, idx: -1})
		children = append(children, &s.levels[len(s.levels)-1])
		for _, t := range ts {
			if t.HasRangeDels {
				withRangeDels = append(withRangeDels, t)
			}
		}
	}
	for i := len(v.L0Sublevels) - 1; i >= 0; i-- {
		addLevel(withinBounds(v.L0Sublevels[i], &v.L0Search[i], s.lower, s.upper))
	}
	for l, ts := range v.BelowL0 {
		addLevel(withinBounds(ts, &v.BelowL0Search[l], s.lower, s.upper))
	}
	s.children, s.withRangeDels = children, withRangeDels
	if len(withRangeDels) > 0 {
		rd, err := s.db.rangeDelsOf(withRangeDels)
		if err != nil {
			for _, it := range children {
				it.Close()
			}
			s.sets = sets
			s.merging.Init(nil) // an empty iterator that Close closes cleanly
			return err
		}
		sets = append(sets, rd)
	}
	s.sets = sets
	s.rangeDels = rangedel.Merge(sets...)
	s.merging.Init(children)
	return nil
}

// withinBounds returns the tables of a sorted run (an L0 sublevel or a
// level below L0: no two overlap) that overlap [lower, upper): a
// contiguous run of them.
func withinBounds(ts []*base.TableMeta, search *manifest.Search, lower, upper []byte) []*base.TableMeta {
	if lower != nil {
		ts = ts[search.Find(ts, lower):]
	}
	if upper != nil {
		ts = ts[:sort.Search(len(ts), func(i int) bool { return bytes.Compare(ts[i].Smallest.UserKey, upper) >= 0 })]
	}
	return ts
}

// --- user-level iteration over the merged internal iterator ---

func (i *Iterator) usable() bool {
	if i.closed {
		i.err = ErrClosed
		return false
	}
	if i.db.closed.Load() {
		i.err = ErrClosed
		i.valid = false
		return false
	}
	return true
}

// First moves to the first key (>= LowerBound).
func (i *Iterator) First() bool {
	if !i.usable() {
		return false
	}
	i.prefix = false
	if i.lower != nil {
		return i.seekGE(i.lower)
	}
	i.dir = 1
	return i.findNext(i.merging.First(), nil)
}

// Last moves to the last key (< UpperBound).
func (i *Iterator) Last() bool {
	if !i.usable() {
		return false
	}
	i.prefix = false
	if i.upper != nil {
		return i.seekLT(i.upper)
	}
	i.dir = -1
	return i.findPrev(i.merging.Last())
}

// SeekGE moves to the first key >= key.
func (i *Iterator) SeekGE(key []byte) bool {
	if !i.usable() {
		return false
	}
	if i.lower != nil && bytes.Compare(key, i.lower) < 0 {
		key = i.lower
	}
	return i.seekGE(key)
}

func (i *Iterator) seekGE(key []byte) bool {
	i.prefix = false
	i.dir = 1
	return i.findNext(i.merging.SeekGE(key), nil)
}

// SeekLT moves to the last key < key.
func (i *Iterator) SeekLT(key []byte) bool {
	if !i.usable() {
		return false
	}
	if i.upper != nil && bytes.Compare(key, i.upper) > 0 {
		key = i.upper
	}
	return i.seekLT(key)
}

func (i *Iterator) seekLT(key []byte) bool {
	i.prefix = false
	i.dir = -1
	return i.findPrev(i.merging.SeekLT(key))
}

// SeekPrefixGE moves to key if the view holds it and reports whether it
// does: Pebble's SeekPrefixGE with whole keys as prefixes, the store's
// existence check through an iterator. Next and Prev then leave the key
// (no other key has its prefix). key is looked up as Get looks it up, in
// the iterator's own view: a table whose filter answers "absent" is not
// read, and a "maybe" that finds nothing is a false positive the table's
// adaptive filter fixes; Metrics counts it as a Get. A key outside the
// bounds is not found; an empty or oversized key is an error (Error) until
// the next SeekPrefixGE.
func (i *Iterator) SeekPrefixGE(key []byte) bool {
	if !i.usable() {
		return false
	}
	i.valid, i.pos, i.prefix, i.dir, i.err = false, false, false, 0, nil
	if err := checkKey(key); err != nil {
		i.err = err
		return false
	}
	if (i.lower != nil && bytes.Compare(key, i.lower) < 0) || (i.upper != nil && bytes.Compare(key, i.upper) >= 0) {
		return false
	}
	i.db.gets.Add(1)
	v, err := i.db.getIn(i.rs, key)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			i.err = err
		}
		return false
	}
	// v is getIn's own copy: the iterator keeps it instead of copying it
	// into its buffer again.
	i.key = append(i.key[:0], key...)
	i.value = v
	if i.value == nil {
		i.value = []byte{}
	}
	i.valid, i.prefix = true, true
	return true
}

// Next moves to the next key.
func (i *Iterator) Next() bool {
	if !i.usable() || !i.valid {
		return false
	}
	if i.prefix {
		i.valid = false
		return false
	}
	cur := i.key
	if i.dir < 0 {
		// The internal iterator sits before the current key: re-seek.
		i.dir = 1
		return i.findNext(i.merging.SeekGE(cur), cur)
	}
	return i.findNext(i.merging.Next(), cur)
}

// Prev moves to the previous key.
func (i *Iterator) Prev() bool {
	if !i.usable() || !i.valid {
		return false
	}
	if i.prefix {
		i.valid = false
		return false
	}
	if i.dir > 0 {
		// The internal iterator sits on the current key: re-seek before it.
		i.dir = -1
		return i.findPrev(i.merging.SeekLT(i.key))
	}
	// The internal iterator sits on the first entry not yet consumed.
	return i.findPrev(i.pos)
}

// findNext moves forward from the internal iterator's position to the first
// user key (other than skip) whose newest visible version is a value.
func (i *Iterator) findNext(ok bool, skip []byte) bool {
	i.valid = false
	it := &i.merging
	for ; ok; ok = it.Next() {
		k := it.Key()
		if i.upper != nil && bytes.Compare(k.UserKey, i.upper) >= 0 {
			break
		}
		if k.Seq >= i.rs.seq {
			continue // not visible
		}
		if skip != nil && bytes.Equal(k.UserKey, skip) {
			continue // an older version of a key already handled
		}
		if k.Kind == base.KeyKindDelete || i.rangeDels.Covering(k.UserKey, i.rs.seq) > k.Seq {
			skip = append(skip[:0:0], k.UserKey...)
			continue
		}
		i.setCurrent(k.UserKey, it.Value())
		i.valid = true
		i.pos = true
		return true
	}
	i.pos = ok
	i.err = it.Error()
	return false
}

// findPrev moves backward from the internal iterator's position to the
// previous user key whose newest visible version is a value. Going backward
// the versions of a key come oldest first, so the last visible one seen
// before the user key changes is the newest.
func (i *Iterator) findPrev(ok bool) bool {
	i.valid = false
	it := &i.merging
	have := false // key/value hold a visible Set of the key being gathered
	var gathering []byte
	for ; ok; ok = it.Prev() {
		k := it.Key()
		if i.lower != nil && bytes.Compare(k.UserKey, i.lower) < 0 {
			break
		}
		if k.Seq >= i.rs.seq {
			continue
		}
		if gathering != nil && !bytes.Equal(k.UserKey, gathering) && have {
			break // the key gathered so far is the answer
		}
		gathering = append(gathering[:0], k.UserKey...)
		if k.Kind == base.KeyKindDelete || i.rangeDels.Covering(k.UserKey, i.rs.seq) > k.Seq {
			have = false
			continue
		}
		i.setCurrent(k.UserKey, it.Value())
		have = true
	}
	i.pos = ok
	if err := it.Error(); err != nil {
		i.err = err
		return false
	}
	i.valid = have
	return have
}

// setCurrent copies the current key and value into the iterator's buffers
// (reused: Key and Value are valid until the next positioning call).
func (i *Iterator) setCurrent(k, v []byte) {
	i.key = append(i.key[:0], k...)
	i.value = append(i.value[:0], v...)
	if i.value == nil {
		i.value = []byte{}
	}
}

// Valid reports whether the iterator is at a key.
func (i *Iterator) Valid() bool { return !i.closed && i.valid }

// Key returns the current key (valid until the next positioning call or
// Close).
func (i *Iterator) Key() []byte {
	if !i.Valid() {
		return nil
	}
	return i.key
}

// Value returns the current value (valid until the next positioning call
// or Close).
func (i *Iterator) Value() []byte {
	if !i.Valid() {
		return nil
	}
	return i.value
}

// Error returns the error that stopped the iteration, if any.
func (i *Iterator) Error() error { return i.err }

// Close releases the iterator. Closing twice returns ErrClosed.
func (i *Iterator) Close() error {
	if i.closed {
		return ErrClosed
	}
	i.closed = true
	s := i.iterState
	i.iterState = nil
	err := s.merging.Close()
	s.rs.iters.Add(-1)
	s.rs.release()
	s.recycle()
	if err == nil && i.err != nil && i.err != ErrClosed {
		err = i.err
	}
	return err
}

package kv

import (
	"bytes"
	"errors"
	"slices"
	"sort"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/rangedel"
)

// Iterator walks the live user keys of a consistent view in key order,
// within the bounds of its IterOptions. Key and Value are copies that stay
// valid until the next positioning call. Next and Prev on an iterator that
// is not at a key return false: reposition it with First, Last, SeekGE or
// SeekLT. An Iterator is not safe for concurrent use; Close it (before the
// DB) to release the tables it pins.
//
// An iterator still open when its DB is closed stops working: from then on
// its positioning calls return false and Error returns ErrClosed (a call
// that runs while Close runs ends normally or with ErrClosed). The tables
// it holds stay open (their files, and their blocks in the block cache)
// until the iterator is closed, so Close it even then.
type Iterator struct {
	db *DB
	rs readView
	it base.Iterator // merged internal iterator
	// rangeDels are the range tombstones of the memtables and of the
	// tables within the bounds (nil: none); a version they cover reads
	// as deleted.
	rangeDels *rangedel.Set
	lower     []byte
	upper     []byte
	dir       int // +1 forward, -1 backward
	valid     bool
	key       []byte
	value     []byte
	pos       bool // the internal iterator is at an entry
	// prefix: the iterator is at the key SeekPrefixGE found (Next and
	// Prev leave it).
	prefix bool
	err    error
	closed bool
}

// NewIter returns an iterator over the current state (an implicit snapshot:
// later writes are not seen). o may be nil.
func (db *DB) NewIter(o *IterOptions) (*Iterator, error) { return db.newIter(o, 0) }

func (db *DB) newIter(o *IterOptions, seq uint64) (*Iterator, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	var lower, upper []byte
	if o != nil {
		lower, upper = slices.Clone(o.LowerBound), slices.Clone(o.UpperBound)
	}
	// The construction is a read in flight (Close waits for it); the
	// iterator it returns is not (rs.iters): see DB.Close.
	rs, err := db.loadReadState(seq)
	if err != nil {
		return nil, err
	}
	iters := make([]base.Iterator, 0, len(rs.mems)+len(rs.v.levels[0])+compaction.NumLevels)
	var rangeDels []*rangedel.Set
	for _, mt := range rs.mems {
		iters = append(iters, mt.NewIter())
		if s := mt.RangeDels(); s != nil {
			rangeDels = append(rangeDels, s)
		}
	}
	fail := func(err error) (*Iterator, error) {
		for _, it := range iters {
			it.Close()
		}
		rs.release()
		return nil, err
	}
	var withRangeDels []*base.TableMeta
	l0 := rs.v.levels[0]
	for i := len(l0) - 1; i >= 0; i-- {
		if !overlapsBounds(l0[i], lower, upper) {
			continue
		}
		it, err := db.newTableIter(l0[i].FileNum, lower, upper)
		if err != nil {
			return fail(err)
		}
		iters = append(iters, it)
		if l0[i].HasRangeDels {
			withRangeDels = append(withRangeDels, l0[i])
		}
	}
	for lvl := 1; lvl < compaction.NumLevels; lvl++ {
		var ts []*base.TableMeta
		for _, t := range rs.v.levels[lvl] {
			if overlapsBounds(t, lower, upper) {
				ts = append(ts, t)
				if t.HasRangeDels {
					withRangeDels = append(withRangeDels, t)
				}
			}
		}
		if len(ts) > 0 {
			iters = append(iters, newLevelIter(ts, func(t *base.TableMeta) (base.Iterator, error) {
				return db.newTableIter(t.FileNum, lower, upper)
			}))
		}
	}
	if len(withRangeDels) > 0 {
		s, err := db.rangeDelsOf(withRangeDels)
		if err != nil {
			return fail(err)
		}
		rangeDels = append(rangeDels, s)
	}
	rs.iters.Add(1)
	return &Iterator{db: db, rs: rs, it: compaction.NewMergingIter(iters...), lower: lower, upper: upper,
		rangeDels: rangedel.Merge(rangeDels...)}, nil
}

func overlapsBounds(t *base.TableMeta, lower, upper []byte) bool {
	if lower != nil && bytes.Compare(t.Largest.UserKey, lower) < 0 {
		return false
	}
	if upper != nil && bytes.Compare(t.Smallest.UserKey, upper) >= 0 {
		return false
	}
	return true
}

// tableIter is a table's iterator holding a table cache reference.
type tableIter struct {
	base.Iterator
	db *DB
	h  tcHandle // released by Close (h.tcEntry nil after)
}

func (t *tableIter) Close() error {
	err := t.Iterator.Close()
	if t.h.tcEntry != nil {
		t.db.tc.release(t.h)
		t.h = tcHandle{}
	}
	return err
}

func (db *DB) newTableIter(fn uint64, lower, upper []byte) (base.Iterator, error) {
	h, err := db.tc.get(fn)
	if err != nil {
		return nil, err
	}
	it, err := h.r.NewIter(lower, upper)
	if err != nil {
		db.tc.release(h)
		return nil, err
	}
	return &tableIter{Iterator: it, db: db, h: h}, nil
}

// levelIter iterates the sorted, non-overlapping tables of one level,
// opening one table at a time (with newIter), for user iterators and for
// compactions alike.
type levelIter struct {
	tables  []*base.TableMeta
	newIter func(*base.TableMeta) (base.Iterator, error)
	idx     int
	cur     base.Iterator
	err     error
}

func newLevelIter(tables []*base.TableMeta, newIter func(*base.TableMeta) (base.Iterator, error)) *levelIter {
	return &levelIter{tables: tables, newIter: newIter, idx: -1}
}

func (l *levelIter) open(i int) bool {
	if l.cur != nil && l.idx == i {
		return true
	}
	if l.cur != nil {
		if err := l.cur.Close(); err != nil && l.err == nil {
			l.err = err
		}
		l.cur = nil
	}
	l.idx = i
	if i < 0 || i >= len(l.tables) || l.err != nil {
		return false
	}
	it, err := l.newIter(l.tables[i])
	if err != nil {
		l.err = err
		return false
	}
	l.cur = it
	return true
}

// settle moves forward (dir > 0) or backward past exhausted tables.
func (l *levelIter) settle(ok bool, dir int) bool {
	for !ok {
		if l.err != nil {
			return false
		}
		if l.cur != nil {
			if err := l.cur.Error(); err != nil {
				l.err = err
				return false
			}
		}
		if !l.open(l.idx + dir) {
			return false
		}
		if dir > 0 {
			ok = l.cur.First()
		} else {
			ok = l.cur.Last()
		}
	}
	return true
}

func (l *levelIter) First() bool {
	if !l.open(0) {
		return false
	}
	return l.settle(l.cur.First(), 1)
}

func (l *levelIter) Last() bool {
	if !l.open(len(l.tables) - 1) {
		return false
	}
	return l.settle(l.cur.Last(), -1)
}

func (l *levelIter) SeekGE(key []byte) bool {
	i := sort.Search(len(l.tables), func(i int) bool { return bytes.Compare(l.tables[i].Largest.UserKey, key) >= 0 })
	if !l.open(i) {
		return false
	}
	return l.settle(l.cur.SeekGE(key), 1)
}

func (l *levelIter) SeekLT(key []byte) bool {
	i := sort.Search(len(l.tables), func(i int) bool { return bytes.Compare(l.tables[i].Smallest.UserKey, key) >= 0 }) - 1
	if !l.open(i) {
		return false
	}
	return l.settle(l.cur.SeekLT(key), -1)
}

func (l *levelIter) Next() bool {
	if l.cur == nil {
		return false
	}
	return l.settle(l.cur.Next(), 1)
}

func (l *levelIter) Prev() bool {
	if l.cur == nil {
		return false
	}
	return l.settle(l.cur.Prev(), -1)
}

func (l *levelIter) Key() base.InternalKey { return l.cur.Key() }
func (l *levelIter) Value() []byte         { return l.cur.Value() }

func (l *levelIter) Error() error {
	if l.err != nil {
		return l.err
	}
	if l.cur != nil {
		return l.cur.Error()
	}
	return nil
}

func (l *levelIter) Close() error {
	if l.cur != nil {
		if err := l.cur.Close(); err != nil && l.err == nil {
			l.err = err
		}
		l.cur = nil
	}
	return l.err
}

// --- user-level iteration over the merged internal iterator ---

func (i *Iterator) usable() bool {
	if i.closed || i.db.closed.Load() {
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
	return i.findNext(i.it.First(), nil)
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
	return i.findPrev(i.it.Last())
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
	return i.findNext(i.it.SeekGE(key), nil)
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
	return i.findPrev(i.it.SeekLT(key))
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
	i.setCurrent(key, v)
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
		return i.findNext(i.it.SeekGE(cur), cur)
	}
	return i.findNext(i.it.Next(), cur)
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
		return i.findPrev(i.it.SeekLT(i.key))
	}
	// The internal iterator sits on the first entry not yet consumed.
	return i.findPrev(i.pos)
}

// findNext moves forward from the internal iterator's position to the first
// user key (other than skip) whose newest visible version is a value.
func (i *Iterator) findNext(ok bool, skip []byte) bool {
	i.valid = false
	it := i.it
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
		if k.Kind == base.KindDelete || i.rangeDels.Covering(k.UserKey, i.rs.seq) > k.Seq {
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
	it := i.it
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
		if k.Kind == base.KindDelete || i.rangeDels.Covering(k.UserKey, i.rs.seq) > k.Seq {
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
func (i *Iterator) Valid() bool { return i.valid && !i.closed }

// Key returns the current key (valid until the next positioning call).
func (i *Iterator) Key() []byte {
	if !i.Valid() {
		return nil
	}
	return i.key
}

// Value returns the current value (valid until the next positioning call).
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
	i.valid = false
	err := i.it.Close()
	i.rs.iters.Add(-1)
	i.rs.release()
	if err == nil && i.err != nil && i.err != ErrClosed {
		err = i.err
	}
	return err
}

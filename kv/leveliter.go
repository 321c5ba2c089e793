package kv

import (
	"bytes"
	"sort"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/sstable"
)

// levelIter iterates the sorted, non-overlapping tables of one level,
// opening one table at a time, for user iterators and for compactions
// alike. A user iterator's levelIter (db set) opens its tables through the
// table cache with the iterator's bounds into ti, which it reuses from
// table to table (no allocation per table), and holds the table's cache
// reference in h, so that cur is the table's own iterator (one dynamic call
// a step, not two); a compaction's calls newIter.
type levelIter struct {
	tables  []*base.TableMeta
	newIter func(*base.TableMeta) (base.Iterator, error)
	idx     int
	cur     base.Iterator
	err     error

	db           *DB
	lower, upper []byte
	h            tcHandle          // cur's table cache reference (db set)
	ti           sstable.TableIter // cur when db is set
}

func newLevelIter(tables []*base.TableMeta, newIter func(*base.TableMeta) (base.Iterator, error)) *levelIter {
	return &levelIter{tables: tables, newIter: newIter, idx: -1}
}

func (l *levelIter) open(i int) bool {
	if l.cur != nil && l.idx == i {
		return true
	}
	l.closeCur()
	l.idx = i
	if i < 0 || i >= len(l.tables) || l.err != nil {
		return false
	}
	if l.db != nil {
		h, err := l.db.tc.getTable(l.tables[i])
		if err != nil {
			l.err = err
			return false
		}
		if err := h.r.InitIter(&l.ti, l.lower, l.upper); err != nil {
			l.db.tc.release(h)
			l.err = err
			return false
		}
		l.cur, l.h = &l.ti, h
		return true
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

// Next, Key and Value, a scan's per-row calls, call a user iterator's
// table iterator directly (ti) rather than through cur.
func (l *levelIter) Next() bool {
	if l.cur == nil {
		return false
	}
	if l.db != nil {
		return l.settle(l.ti.Next(), 1)
	}
	return l.settle(l.cur.Next(), 1)
}

func (l *levelIter) Prev() bool {
	if l.cur == nil {
		return false
	}
	return l.settle(l.cur.Prev(), -1)
}

func (l *levelIter) Key() base.InternalKey {
	if l.db != nil {
		return l.ti.Key()
	}
	return l.cur.Key()
}

func (l *levelIter) Value() []byte {
	if l.db != nil {
		return l.ti.Value()
	}
	return l.cur.Value()
}

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
	l.closeCur()
	return l.err
}

// closeCur closes the current table's iterator, if any, and drops its
// table cache reference.
func (l *levelIter) closeCur() {
	if l.cur == nil {
		return
	}
	if err := l.cur.Close(); err != nil && l.err == nil {
		l.err = err
	}
	l.cur = nil
	if l.h.tcEntry != nil {
		l.db.tc.release(l.h)
		l.h = tcHandle{}
	}
}

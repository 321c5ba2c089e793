package sstable

import (
	"bytes"
	"fmt"

	psst "github.com/cockroachdb/pebble/v2/sstable"
)

// NewIter returns an iterator over the table's internal keys with user
// keys in [lower, upper) (nil: unbounded). It does not use the filter. Close
// every iterator before closing the Reader.
func (r *Reader) NewIter(lower, upper []byte) (Iterator, error) {
	t := new(TableIter)
	if err := r.InitIter(t, lower, upper); err != nil {
		return nil, err
	}
	return t, nil
}

// InitIter makes t an iterator over the table as NewIter does, reusing
// t's memory (its bound buffers) from an earlier use, which must be closed
// or never begun: a caller that opens table after table (a level's
// iterator) holds one TableIter and allocates nothing per table. On an
// error t is closed.
func (r *Reader) InitIter(t *TableIter, lower, upper []byte) error {
	*t = TableIter{lowerBuf: t.lowerBuf[:0], upperBuf: t.upperBuf[:0], closed: true}
	sh := r.enter()
	if sh == nil {
		return ErrClosed
	}
	defer r.exit(sh)
	if lower != nil && upper != nil && bytes.Compare(lower, upper) >= 0 {
		t.lower, t.upper, t.empty, t.closed = lower, upper, true, false
		return nil
	}
	// Pebble's iterator keeps the bounds: they are copied.
	if lower != nil {
		t.lowerBuf = append(t.lowerBuf, lower...)
		t.lower = t.lowerBuf
	}
	if upper != nil {
		t.upperBuf = append(t.upperBuf, upper...)
		if t.upperBuf == nil {
			t.upperBuf = []byte{} // an empty upper bound admits no key
		}
		t.upper = t.upperBuf
	}
	it, err := r.pr.NewIter(psst.NoTransforms, t.lower, t.upper, psst.AssertNoBlobHandles)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, r.path, err)
	}
	t.r, t.it, t.closed = r, it, false
	return nil
}

// TableIter is a table's iterator (Reader.NewIter, Reader.InitIter): it
// adapts Pebble's sstable iterator to Iterator, enforcing the bounds
// exactly. A caller may hold it by value and reuse it with InitIter.
type TableIter struct {
	r                  *Reader
	it                 psst.Iterator
	lower, upper       []byte
	lowerBuf, upperBuf []byte
	key                psst.InternalKey
	valid              bool
	val                []byte
	err                error
	empty              bool
	closed             bool
}

var _ Iterator = (*TableIter)(nil)

// miss records that Pebble's iterator is exhausted (or failed).
func (t *TableIter) miss() bool {
	t.valid, t.val = false, nil
	if t.err == nil {
		t.err = t.it.Error()
	}
	return false
}

// set positions at k with value v (verr: the value could not be read).
func (t *TableIter) set(k psst.InternalKey, v []byte, verr error) bool {
	t.valid, t.val = false, nil
	if verr != nil {
		t.err = verr
		return false
	}
	if t.upper != nil && bytes.Compare(k.UserKey, t.upper) >= 0 {
		return false
	}
	if t.lower != nil && bytes.Compare(k.UserKey, t.lower) < 0 {
		return false
	}
	t.key, t.val, t.valid = k, v, true
	return true
}

func (t *TableIter) usable() bool { return !t.empty && !t.closed && t.err == nil }

// First implements Iterator.
func (t *TableIter) First() bool {
	if !t.usable() {
		return false
	}
	if t.lower != nil {
		kv := t.it.SeekGE(t.lower, 0)
		if kv == nil {
			return t.miss()
		}
		v, _, err := kv.Value(nil)
		return t.set(kv.K, v, err)
	}
	kv := t.it.First()
	if kv == nil {
		return t.miss()
	}
	v, _, err := kv.Value(nil)
	return t.set(kv.K, v, err)
}

// Last implements Iterator.
func (t *TableIter) Last() bool {
	if !t.usable() {
		return false
	}
	if t.upper != nil {
		kv := t.it.SeekLT(t.upper, 0)
		if kv == nil {
			return t.miss()
		}
		v, _, err := kv.Value(nil)
		return t.set(kv.K, v, err)
	}
	kv := t.it.Last()
	if kv == nil {
		return t.miss()
	}
	v, _, err := kv.Value(nil)
	return t.set(kv.K, v, err)
}

// SeekGE implements Iterator.
func (t *TableIter) SeekGE(key []byte) bool {
	if !t.usable() {
		return false
	}
	if t.lower != nil && bytes.Compare(key, t.lower) < 0 {
		key = t.lower
	}
	if t.upper != nil && bytes.Compare(key, t.upper) >= 0 {
		t.valid = false
		return false
	}
	kv := t.it.SeekGE(key, 0)
	if kv == nil {
		return t.miss()
	}
	v, _, err := kv.Value(nil)
	return t.set(kv.K, v, err)
}

// SeekLT implements Iterator.
func (t *TableIter) SeekLT(key []byte) bool {
	if !t.usable() {
		return false
	}
	if t.upper != nil && bytes.Compare(key, t.upper) > 0 {
		key = t.upper
	}
	if t.lower != nil && bytes.Compare(key, t.lower) <= 0 {
		t.valid = false
		return false
	}
	kv := t.it.SeekLT(key, 0)
	if kv == nil {
		return t.miss()
	}
	v, _, err := kv.Value(nil)
	return t.set(kv.K, v, err)
}

// Next implements Iterator.
func (t *TableIter) Next() bool {
	if !t.usable() || !t.valid {
		return false
	}
	kv := t.it.Next()
	if kv == nil {
		return t.miss()
	}
	v, _, err := kv.Value(nil)
	return t.set(kv.K, v, err)
}

// Prev implements Iterator.
func (t *TableIter) Prev() bool {
	if !t.usable() || !t.valid {
		return false
	}
	kv := t.it.Prev()
	if kv == nil {
		return t.miss()
	}
	v, _, err := kv.Value(nil)
	return t.set(kv.K, v, err)
}

// Key implements Iterator.
func (t *TableIter) Key() InternalKey {
	if !t.valid {
		return InternalKey{}
	}
	return InternalKey{UserKey: t.key.UserKey, Seq: uint64(t.key.SeqNum()), Kind: KeyKind(t.key.Kind())}
}

// Value implements Iterator.
func (t *TableIter) Value() []byte { return t.val }

// Error implements Iterator.
func (t *TableIter) Error() error {
	if t.err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, t.err)
	}
	return nil
}

// Close implements Iterator.
func (t *TableIter) Close() error {
	if t.closed {
		return t.Error()
	}
	t.closed = true
	t.valid, t.val = false, nil
	if t.it != nil {
		if err := t.it.Close(); err != nil && t.err == nil {
			t.err = err
		}
	}
	return t.Error()
}

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
	sh := r.enter()
	if sh == nil {
		return nil, ErrClosed
	}
	defer r.exit(sh)
	if lower != nil && upper != nil && bytes.Compare(lower, upper) >= 0 {
		return &tableIter{lower: lower, upper: upper, empty: true}, nil
	}
	lower, upper = bytes.Clone(lower), bytes.Clone(upper)
	it, err := r.pr.NewIter(psst.NoTransforms, lower, upper, psst.AssertNoBlobHandles)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, r.path, err)
	}
	return &tableIter{r: r, it: it, lower: lower, upper: upper}, nil
}

// tableIter adapts Pebble's sstable iterator to Iterator, enforcing the
// bounds exactly.
type tableIter struct {
	r            *Reader
	it           psst.Iterator
	lower, upper []byte
	key          psst.InternalKey
	valid        bool
	val          []byte
	err          error
	empty        bool
	closed       bool
}

// miss records that Pebble's iterator is exhausted (or failed).
func (t *tableIter) miss() bool {
	t.valid, t.val = false, nil
	if t.err == nil {
		t.err = t.it.Error()
	}
	return false
}

// set positions at k with value v (verr: the value could not be read).
func (t *tableIter) set(k psst.InternalKey, v []byte, verr error) bool {
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

func (t *tableIter) usable() bool { return !t.empty && !t.closed && t.err == nil }

func (t *tableIter) First() bool {
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

func (t *tableIter) Last() bool {
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

func (t *tableIter) SeekGE(key []byte) bool {
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

func (t *tableIter) SeekLT(key []byte) bool {
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

func (t *tableIter) Next() bool {
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

func (t *tableIter) Prev() bool {
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

func (t *tableIter) Key() InternalKey {
	if !t.valid {
		return InternalKey{}
	}
	return InternalKey{UserKey: t.key.UserKey, Seq: uint64(t.key.SeqNum()), Kind: KeyKind(t.key.Kind())}
}

func (t *tableIter) Value() []byte { return t.val }

func (t *tableIter) Error() error {
	if t.err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, t.err)
	}
	return nil
}

func (t *tableIter) Close() error {
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

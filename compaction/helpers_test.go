package compaction

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/rangedel"
)

// entry is one internal key and its value.
type entry struct {
	key   base.InternalKey
	value []byte
}

func (e entry) String() string {
	return fmt.Sprintf("%s#%d,%d=%s", e.key.UserKey, e.key.Seq, e.key.Kind, e.value)
}

func sortEntries(es []entry) {
	slices.SortStableFunc(es, func(a, b entry) int { return base.CompareInternalKeys(a.key, b.key) })
}

// sliceIter is an in-memory base.Iterator over entries sorted in
// internal-key order. failAfter > 0 makes the failAfter-th positioning call
// (and all later ones) fail with errInjected.
type sliceIter struct {
	es        []entry
	pos       int // -1 before first, len(es) after last
	failAfter int
	calls     int
	err       error
	closed    bool
	closeErr  error
}

var errInjected = errors.New("injected failure")

func newSliceIter(es []entry) *sliceIter {
	return &sliceIter{es: es, pos: -1}
}

func (s *sliceIter) check() bool {
	if s.closed {
		panic("sliceIter used after Close")
	}
	if s.err != nil {
		return false
	}
	s.calls++
	if s.failAfter > 0 && s.calls >= s.failAfter {
		s.err = errInjected
		s.pos = -1
		return false
	}
	return true
}

func (s *sliceIter) valid() bool { return s.pos >= 0 && s.pos < len(s.es) }

func (s *sliceIter) First() bool {
	if !s.check() {
		return false
	}
	s.pos = 0
	return s.valid()
}

func (s *sliceIter) Last() bool {
	if !s.check() {
		return false
	}
	s.pos = len(s.es) - 1
	return s.valid()
}

func (s *sliceIter) SeekGE(key []byte) bool {
	if !s.check() {
		return false
	}
	s.pos = sort.Search(len(s.es), func(i int) bool { return bytes.Compare(s.es[i].key.UserKey, key) >= 0 })
	return s.valid()
}

func (s *sliceIter) SeekLT(key []byte) bool {
	if !s.check() {
		return false
	}
	s.pos = sort.Search(len(s.es), func(i int) bool { return bytes.Compare(s.es[i].key.UserKey, key) >= 0 }) - 1
	return s.valid()
}

// Next and Prev step from any position, including off either end, but the
// merging iterator must never step an exhausted child: that is checked.
func (s *sliceIter) Next() bool {
	if !s.valid() && s.err == nil {
		panic("sliceIter.Next on an unpositioned iterator")
	}
	if !s.check() {
		return false
	}
	s.pos++
	return s.valid()
}

func (s *sliceIter) Prev() bool {
	if !s.valid() && s.err == nil {
		panic("sliceIter.Prev on an unpositioned iterator")
	}
	if !s.check() {
		return false
	}
	s.pos--
	return s.valid()
}

func (s *sliceIter) Key() base.InternalKey {
	if !s.valid() {
		return base.InternalKey{}
	}
	return s.es[s.pos].key
}

func (s *sliceIter) Value() []byte {
	if !s.valid() {
		return nil
	}
	return s.es[s.pos].value
}

func (s *sliceIter) Error() error { return s.err }

func (s *sliceIter) Close() error {
	s.closed = true
	if s.closeErr != nil {
		return s.closeErr
	}
	return s.err
}

// memOutput is an in-memory Output. It copies what it is given.
type memOutput struct {
	fileNum  uint64
	es       []entry
	size     uint64
	finished bool
	aborted  bool
	failAdd  int // fail the failAdd-th Add (1-based) if > 0
	failFin  bool
	frags    []rangedel.Fragment
}

func (o *memOutput) Add(key base.InternalKey, value []byte) error {
	if o.finished || o.aborted {
		return errors.New("memOutput: Add after Finish/Abort")
	}
	if n := len(o.es); n > 0 && base.CompareInternalKeys(o.es[n-1].key, key) >= 0 {
		return fmt.Errorf("memOutput: out of order: %v then %v", o.es[n-1].key, key)
	}
	if o.failAdd > 0 && len(o.es)+1 == o.failAdd {
		return errInjected
	}
	key.UserKey = slices.Clone(key.UserKey)
	o.es = append(o.es, entry{key: key, value: slices.Clone(value)})
	o.size += uint64(len(key.UserKey) + len(value) + 8)
	return nil
}

func (o *memOutput) EstimatedSize() uint64 { return o.size }

func (o *memOutput) AddRangeDels(frags []rangedel.Fragment) error {
	if o.finished || o.aborted {
		return errors.New("memOutput: AddRangeDels after Finish/Abort")
	}
	for _, f := range frags {
		o.frags = append(o.frags, rangedel.Fragment{Start: slices.Clone(f.Start), End: slices.Clone(f.End), Seqs: slices.Clone(f.Seqs)})
	}
	return nil
}

func (o *memOutput) Finish() (*TableMeta, error) {
	if o.finished || o.aborted {
		return nil, errors.New("memOutput: Finish twice")
	}
	if o.failFin {
		return nil, errInjected
	}
	if len(o.es) == 0 && len(o.frags) == 0 {
		return nil, errors.New("memOutput: empty table")
	}
	o.finished = true
	if len(o.es) == 0 {
		return &TableMeta{FileNum: o.fileNum, Size: o.size, HasRangeDels: true,
			Smallest: base.InternalKey{UserKey: o.frags[0].Start, Seq: o.frags[0].Seqs[0], Kind: base.KeyKindRangeDelete},
			Largest:  base.InternalKey{UserKey: o.frags[len(o.frags)-1].End, Seq: base.MaxSeq, Kind: base.KeyKindRangeDelete}}, nil
	}
	return &TableMeta{FileNum: o.fileNum, Size: o.size, Smallest: o.es[0].key, Largest: o.es[len(o.es)-1].key, HasRangeDels: len(o.frags) > 0}, nil
}

func (o *memOutput) Abort() error {
	if o.finished {
		return errors.New("memOutput: Abort after Finish")
	}
	o.aborted = true
	return nil
}

// memSink hands out memOutputs and remembers them.
type memSink struct {
	outs    []*memOutput
	next    uint64
	failNew int // fail the failNew-th NewOutput (1-based) if > 0
	setup   func(o *memOutput)
}

func (s *memSink) NewOutput() (Output, error) {
	if s.failNew > 0 && len(s.outs)+1 == s.failNew {
		return nil, errInjected
	}
	s.next++
	o := &memOutput{fileNum: s.next}
	if s.setup != nil {
		s.setup(o)
	}
	s.outs = append(s.outs, o)
	return o, nil
}

// finished returns the entries of all finished outputs in order.
func (s *memSink) finished() []entry {
	var all []entry
	for _, o := range s.outs {
		if o.finished {
			all = append(all, o.es...)
		}
	}
	return all
}

// randUserKey returns one of n user keys of a few bytes, some of them
// prefixes of others so bytes.Compare order is exercised.
func randUserKey(rng *rand.Rand, n int) []byte {
	i := rng.Intn(n)
	k := []byte(fmt.Sprintf("k%03d", i))
	if i%5 == 0 {
		k = k[:len(k)-1] // a prefix of its neighbours' keys
	}
	return k
}

// Package itertest holds what the tests of the iterator packages share: an
// in-memory base.Iterator over entries that can fail on demand, random user
// keys, and the seed of randomized tests (-seed).
package itertest

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/adaptkv/adaptkv/internal/base"
)

var seedFlag = flag.Int64("seed", 0, "seed for the randomized tests (0 = from the clock)")

// Seed returns the seed for a randomized test and logs it, so that a
// failure can be replayed with -seed.
func Seed(t testing.TB) int64 {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	return seed
}

// Entry is one internal key and its value.
type Entry struct {
	Key   base.InternalKey
	Value []byte
}

// String formats the entry as key#seq,kind=value.
func (e Entry) String() string {
	return fmt.Sprintf("%s#%d,%d=%s", e.Key.UserKey, e.Key.Seq, e.Key.Kind, e.Value)
}

// SortEntries sorts es in internal-key order, stably.
func SortEntries(es []Entry) {
	slices.SortStableFunc(es, func(a, b Entry) int { return base.CompareInternalKeys(a.Key, b.Key) })
}

// SliceIter is an in-memory base.Iterator over entries sorted in
// internal-key order. FailAfter > 0 makes the FailAfter-th positioning call
// (and all later ones) fail with ErrInjected; CloseErr is what Close
// returns. It panics when an iterator under test misuses it (a step from
// no position, a use after Close).
type SliceIter struct {
	FailAfter int
	CloseErr  error
	Closed    bool // Close was called
	es        []Entry
	pos       int // -1 before first, len(es) after last
	calls     int
	err       error
}

// ErrInjected is the failure FailAfter injects.
var ErrInjected = errors.New("injected failure")

// NewSliceIter returns an unpositioned iterator over es.
func NewSliceIter(es []Entry) *SliceIter {
	return &SliceIter{es: es, pos: -1}
}

func (s *SliceIter) check() bool {
	if s.Closed {
		panic("SliceIter used after Close")
	}
	if s.err != nil {
		return false
	}
	s.calls++
	if s.FailAfter > 0 && s.calls >= s.FailAfter {
		s.err = ErrInjected
		s.pos = -1
		return false
	}
	return true
}

func (s *SliceIter) valid() bool { return s.pos >= 0 && s.pos < len(s.es) }

// First implements base.Iterator.
func (s *SliceIter) First() bool {
	if !s.check() {
		return false
	}
	s.pos = 0
	return s.valid()
}

// Last implements base.Iterator.
func (s *SliceIter) Last() bool {
	if !s.check() {
		return false
	}
	s.pos = len(s.es) - 1
	return s.valid()
}

// SeekGE implements base.Iterator.
func (s *SliceIter) SeekGE(key []byte) bool {
	if !s.check() {
		return false
	}
	s.pos = sort.Search(len(s.es), func(i int) bool { return bytes.Compare(s.es[i].Key.UserKey, key) >= 0 })
	return s.valid()
}

// SeekLT implements base.Iterator.
func (s *SliceIter) SeekLT(key []byte) bool {
	if !s.check() {
		return false
	}
	s.pos = sort.Search(len(s.es), func(i int) bool { return bytes.Compare(s.es[i].Key.UserKey, key) >= 0 }) - 1
	return s.valid()
}

// Next and Prev step from any position, including off either end, but the
// merging iterator must never step an exhausted child: that is checked.
func (s *SliceIter) Next() bool {
	if !s.valid() && s.err == nil {
		panic("SliceIter.Next on an unpositioned iterator")
	}
	if !s.check() {
		return false
	}
	s.pos++
	return s.valid()
}

func (s *SliceIter) Prev() bool {
	if !s.valid() && s.err == nil {
		panic("SliceIter.Prev on an unpositioned iterator")
	}
	if !s.check() {
		return false
	}
	s.pos--
	return s.valid()
}

// Key implements base.Iterator.
func (s *SliceIter) Key() base.InternalKey {
	if !s.valid() {
		return base.InternalKey{}
	}
	return s.es[s.pos].Key
}

// Value implements base.Iterator.
func (s *SliceIter) Value() []byte {
	if !s.valid() {
		return nil
	}
	return s.es[s.pos].Value
}

// Error implements base.Iterator.
func (s *SliceIter) Error() error { return s.err }

// Close implements base.Iterator.
func (s *SliceIter) Close() error {
	s.Closed = true
	if s.CloseErr != nil {
		return s.CloseErr
	}
	return s.err
}

// RandUserKey returns one of n user keys of a few bytes, some of them
// prefixes of others so bytes.Compare order is exercised.
func RandUserKey(rng *rand.Rand, n int) []byte {
	i := rng.Intn(n)
	k := []byte(fmt.Sprintf("k%03d", i))
	if i%5 == 0 {
		k = k[:len(k)-1] // a prefix of its neighbours' keys
	}
	return k
}

// Iters returns a SliceIter over each child, as base.Iterators and as
// themselves.
func Iters(children [][]Entry) ([]base.Iterator, []*SliceIter) {
	its := make([]base.Iterator, 0, len(children))
	sis := make([]*SliceIter, 0, len(children))
	for _, c := range children {
		si := NewSliceIter(c)
		sis = append(sis, si)
		its = append(its, si)
	}
	return its, sis
}

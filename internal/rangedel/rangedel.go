// Package rangedel holds range tombstones: a DeleteRange(start, end) at
// sequence number s hides every version of every user key in [start, end)
// whose sequence number is below s.
//
// Tombstones overlap freely as they are written; a Set holds them
// fragmented, as Pebble's range-deletion blocks do: sorted, non-overlapping
// fragments [Start, End), each with the sequence numbers of the tombstones
// that cover all of it, newest first. A lookup is then one binary search,
// and a table's range-deletion block is its Set written out fragment by
// fragment. The memtable, the tables, reads and compactions share the type.
package rangedel

import (
	"bytes"
	"slices"
	"sort"
)

// Tombstone deletes the versions of the user keys in [Start, End) with
// sequence numbers below Seq.
type Tombstone struct {
	Start, End []byte
	Seq        uint64
}

// Fragment is a key range [Start, End) and the sequence numbers of the
// tombstones that cover it, descending.
type Fragment struct {
	Start, End []byte
	Seqs       []uint64
}

// Valid reports whether f is a fragment a Set may hold: Start below End,
// and sequence numbers, at least one, strictly descending.
func (f Fragment) Valid() bool {
	if bytes.Compare(f.Start, f.End) >= 0 || len(f.Seqs) == 0 {
		return false
	}
	for j := 1; j < len(f.Seqs); j++ {
		if f.Seqs[j-1] <= f.Seqs[j] {
			return false
		}
	}
	return true
}

// Set is an immutable set of fragments, sorted by Start, non-overlapping,
// none empty. The nil *Set is the empty set.
type Set struct {
	frags []Fragment
}

// Build fragments ts (any order; a tombstone with Start >= End is ignored).
// The result shares no memory with ts.
func Build(ts []Tombstone) *Set {
	var bounds [][]byte
	live := make([]Tombstone, 0, len(ts))
	for _, t := range ts {
		if bytes.Compare(t.Start, t.End) < 0 {
			live = append(live, t)
			bounds = append(bounds, t.Start, t.End)
		}
	}
	if len(live) == 0 {
		return nil
	}
	slices.SortFunc(bounds, bytes.Compare)
	bounds = slices.CompactFunc(bounds, bytes.Equal)
	slices.SortFunc(live, func(a, b Tombstone) int { return bytes.Compare(a.Start, b.Start) })
	// Sweep the bounds in order: active holds the tombstones that began at
	// or before the current bound and end after it.
	var frags []Fragment
	var active []Tombstone
	next := 0
	for i := 0; i+1 < len(bounds); i++ {
		lo, hi := bounds[i], bounds[i+1]
		active = slices.DeleteFunc(active, func(t Tombstone) bool { return bytes.Compare(t.End, lo) <= 0 })
		for next < len(live) && bytes.Compare(live[next].Start, lo) <= 0 {
			active = append(active, live[next])
			next++
		}
		if len(active) == 0 {
			continue
		}
		seqs := make([]uint64, len(active))
		for j, t := range active {
			seqs[j] = t.Seq
		}
		slices.SortFunc(seqs, func(a, b uint64) int { return cmpDesc(a, b) })
		seqs = slices.Compact(seqs)
		frags = append(frags, Fragment{Start: bytes.Clone(lo), End: bytes.Clone(hi), Seqs: seqs})
	}
	return &Set{frags: frags}
}

func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// FromFragments returns the set of frags, which must be sorted, non-overlapping
// and hold sequence numbers in descending order (as a Set's Fragments are);
// it reports false otherwise. The set keeps frags.
func FromFragments(frags []Fragment) (*Set, bool) {
	for i, f := range frags {
		if !f.Valid() || (i > 0 && bytes.Compare(frags[i-1].End, f.Start) > 0) {
			return nil, false
		}
	}
	if len(frags) == 0 {
		return nil, true
	}
	return &Set{frags: frags}, true
}

// Merge returns the union of sets (nil ones ignored).
func Merge(sets ...*Set) *Set {
	var ts []Tombstone
	n := 0
	var only *Set
	for _, s := range sets {
		if s.Len() > 0 {
			n++
			only = s
		}
	}
	if n <= 1 {
		return only
	}
	for _, s := range sets {
		ts = s.appendTombstones(ts)
	}
	return Build(ts)
}

// appendTombstones appends one tombstone per fragment and sequence number.
func (s *Set) appendTombstones(ts []Tombstone) []Tombstone {
	if s == nil {
		return ts
	}
	for _, f := range s.frags {
		for _, seq := range f.Seqs {
			ts = append(ts, Tombstone{Start: f.Start, End: f.End, Seq: seq})
		}
	}
	return ts
}

// Len is the number of fragments.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.frags)
}

// Fragments returns the fragments in key order (the set's own slice: do not
// modify it).
func (s *Set) Fragments() []Fragment {
	if s == nil {
		return nil
	}
	return s.frags
}

// find returns the fragment holding key, or nil.
func (s *Set) find(key []byte) *Fragment {
	if s == nil {
		return nil
	}
	i := sort.Search(len(s.frags), func(i int) bool { return bytes.Compare(s.frags[i].End, key) > 0 })
	if i == len(s.frags) || bytes.Compare(s.frags[i].Start, key) > 0 {
		return nil
	}
	return &s.frags[i]
}

// Covering returns the largest sequence number below readSeq of a tombstone
// covering key, or 0 if none: a reader at readSeq sees a version of key with
// sequence number v as deleted iff v < Covering(key, readSeq).
func (s *Set) Covering(key []byte, readSeq uint64) uint64 {
	f := s.find(key)
	if f == nil {
		return 0
	}
	for _, seq := range f.Seqs {
		if seq < readSeq {
			return seq
		}
	}
	return 0
}

// CoveringAbove returns the smallest sequence number above seq of a
// tombstone covering key, and whether there is one: the oldest tombstone
// that deletes the version of key at seq.
func (s *Set) CoveringAbove(key []byte, seq uint64) (uint64, bool) {
	f := s.find(key)
	if f == nil {
		return 0, false
	}
	for i := len(f.Seqs) - 1; i >= 0; i-- {
		if f.Seqs[i] > seq {
			return f.Seqs[i], true
		}
	}
	return 0, false
}

// Bounds returns the smallest Start and the largest End of the set.
func (s *Set) Bounds() (start, end []byte) {
	if s.Len() == 0 {
		return nil, nil
	}
	return s.frags[0].Start, s.frags[len(s.frags)-1].End
}

// Clip returns the fragments' parts within [lo, hi) (nil lo: no lower
// bound; nil hi: no upper bound), in order; the result shares key memory
// with the set.
func (s *Set) Clip(lo, hi []byte) []Fragment {
	var out []Fragment
	for _, f := range s.Fragments() {
		if hi != nil && bytes.Compare(f.Start, hi) >= 0 {
			break
		}
		if lo != nil && bytes.Compare(f.End, lo) <= 0 {
			continue
		}
		if lo != nil && bytes.Compare(f.Start, lo) < 0 {
			f.Start = lo
		}
		if hi != nil && bytes.Compare(f.End, hi) > 0 {
			f.End = hi
		}
		if bytes.Compare(f.Start, f.End) < 0 {
			out = append(out, f)
		}
	}
	return out
}

// Successor returns the smallest key above k (k followed by a zero byte):
// a split at Successor(k) leaves k and every key below it on one side and
// every key above it on the other.
func Successor(k []byte) []byte {
	return append(append(make([]byte, 0, len(k)+1), k...), 0)
}

// Splitter hands a set's fragments out to the consecutive tables one
// writer cuts its output into, so that each table holds the tombstones of
// its own key range and no two tables' bounds overlap: a table that ends
// at point key last takes the parts below Successor(last), the next one
// the parts from there on.
type Splitter struct {
	set *Set
	lo  []byte
}

// NewSplitter returns a splitter over s (nil: no fragments).
func NewSplitter(s *Set) *Splitter { return &Splitter{set: s} }

// Cut returns the fragments for a table whose last point key is last and
// after which another table follows.
func (sp *Splitter) Cut(last []byte) []Fragment {
	hi := Successor(last)
	f := sp.set.Clip(sp.lo, hi)
	sp.lo = hi
	return f
}

// Rest returns the fragments for the last table: all that no Cut took.
func (sp *Splitter) Rest() []Fragment {
	f := sp.set.Clip(sp.lo, nil)
	sp.set = nil
	return f
}

package filter

import (
	"bytes"
	"slices"
)

// AbsentInRange picks, from known negatives sorted by key, those a table's
// filter can use: the keys within the table's key range [first key, last
// key] that the table does not hold. Feed it the table's keys in order
// (sorted and distinct, as a Builder gets them); Kept then holds the
// negatives found between two keys. One equal to a key is stored, so it is
// dropped; those before the first key or after the last are out of range.
// A key outside a table's range never reaches its filter, so only the
// negatives inside are worth building around (stacked) or fixing before
// the block is written (pre-adaptation of adaptive kinds).
type AbsentInRange struct {
	negs  []KnownNegative
	lo    int  // first of negs above the first key
	next  int  // first of negs not yet merged with the keys
	added bool // a key was added: every negative from next on is above it
	held  []int
}

// NewAbsentInRange starts the merge of negs (sorted by key; nil: none).
func NewAbsentInRange(negs []KnownNegative) *AbsentInRange {
	return &AbsentInRange{negs: negs}
}

// Add merges the next key of the table.
func (a *AbsentInRange) Add(key []byte) {
	if !a.added {
		// One list serves every table of a flush or compaction: skip the
		// negatives before this table by binary search, not one by one.
		a.next, _ = slices.BinarySearchFunc(a.negs, key, func(n KnownNegative, k []byte) int { return bytes.Compare(n.Key, k) })
	}
	// Below key: before the first key out of range, after it kept; equal
	// to key: stored (held, unless it is the first key, out of range).
	for a.next < len(a.negs) {
		c := bytes.Compare(a.negs[a.next].Key, key)
		if c > 0 {
			break
		}
		if c == 0 && a.added {
			a.held = append(a.held, a.next)
		}
		a.next++
	}
	if !a.added {
		a.lo, a.added = a.next, true
	}
}

// Kept returns the negatives found so far within the table's range and not
// stored, sorted by key. It may share memory with the list NewAbsentInRange
// was given: read it, do not change it.
func (a *AbsentInRange) Kept() []KnownNegative {
	in := a.negs[a.lo:a.next:a.next]
	if len(a.held) == 0 {
		return in
	}
	kept := make([]KnownNegative, 0, len(in)-len(a.held))
	h := 0
	for i := a.lo; i < a.next; i++ {
		if h < len(a.held) && a.held[h] == i {
			h++
			continue
		}
		kept = append(kept, a.negs[i])
	}
	return kept
}

// MostCounted returns the indices of negs sorted by count, most first (ties
// in the order of negs, so what is built from them is deterministic).
func MostCounted(negs []KnownNegative) []int {
	idx := make([]int, len(negs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case negs[a].Count > negs[b].Count:
			return -1
		case negs[a].Count < negs[b].Count:
			return 1
		}
		return a - b
	})
	return idx
}

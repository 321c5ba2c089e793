package knownneg

import (
	"slices"
	"strings"
	"unsafe"

	"github.com/adaptkv/adaptkv/filter"
)

// List is a snapshot of the known negatives, sorted by key. It is
// immutable and its keys are read-only (they alias the sketch's strings):
// share it freely, modify nothing.
type List []filter.KnownNegative

type slotKey struct {
	slot int32
	key  string
}

// Snapshot returns the keys held with their counts, sorted by key. Keys
// whose count aged to zero are left out.
func (s *Sketch) Snapshot() List {
	s.mu.Lock()
	defer s.mu.Unlock()
	counted := uint64(s.counted.Load())
	if s.last != nil && len(s.dirty) == 0 && !s.rebuild &&
		counted >= s.lastCounted && counted-s.lastCounted < uint64(len(s.keys)) {
		return s.last
	}
	if s.rebuild {
		s.sorted, s.dirty = nil, s.dirty[:0]
		for slot, k := range s.keys {
			if k != "" {
				s.dirty = append(s.dirty, int32(slot))
			}
		}
		s.rebuild = false
	}
	// The changed slots, sorted by key (a slot changed twice counts once).
	slices.Sort(s.dirty)
	changed := make([]slotKey, 0, len(s.dirty))
	for i, slot := range s.dirty {
		if i == 0 || slot != s.dirty[i-1] {
			changed = append(changed, slotKey{slot, s.keys[slot]})
		}
	}
	slices.SortFunc(changed, func(a, b slotKey) int { return strings.Compare(a.key, b.key) })
	s.dirty = s.dirty[:0]

	// Merge the entries whose slot still holds their key (the same
	// string: a replaced slot holds a new one) with the changed slots. The
	// two are disjoint: a changed slot's key is new.
	merged := s.spare[:0]
	if n := int(s.held.Load()); cap(merged) < n {
		merged = make([]slotKey, 0, n+n/8)
	}
	c := 0
	for _, e := range s.sorted {
		cur := s.keys[e.slot]
		if len(cur) != len(e.key) || unsafe.StringData(cur) != unsafe.StringData(e.key) {
			continue // replaced since
		}
		for c < len(changed) && changed[c].key < cur {
			merged = append(merged, changed[c])
			c++
		}
		merged = append(merged, e)
	}
	merged = append(merged, changed[c:]...)
	s.sorted, s.spare = merged, s.sorted

	l := make(List, 0, len(merged))
	for _, e := range merged {
		if n := s.counts[e.slot/ways][e.slot%ways].Load(); n > 0 {
			l = append(l, filter.KnownNegative{Key: unsafe.Slice(unsafe.StringData(e.key), len(e.key)), Count: uint64(n)})
		}
	}
	s.last, s.lastCounted = l, counted
	return l
}

// Repeated returns the entries of the list counted more than once at the
// sketch's sampling: a count above the weight of one counted miss. A key
// seen once (an existence check, a calibration pass) is not a pattern
// worth building a filter around.
func (s *Sketch) Repeated(l List) List {
	unit := uint64(s.sampling.Every * s.sampling.MissEvery)
	out := make(List, 0, len(l))
	for _, e := range l {
		if e.Count > unit {
			out = append(out, e)
		}
	}
	return out
}

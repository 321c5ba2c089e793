package compaction

import (
	"errors"
	"fmt"
	"slices"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/itertest"
	"github.com/adaptkv/adaptkv/internal/merging"
	"github.com/adaptkv/adaptkv/internal/rangedel"
)

// The shared iterator test helpers (internal/itertest), by their names here.
type (
	entry     = itertest.Entry
	sliceIter = itertest.SliceIter
)

var (
	sortEntries  = itertest.SortEntries
	newSliceIter = itertest.NewSliceIter
	randUserKey  = itertest.RandUserKey
	testSeed     = itertest.Seed
	errInjected  = itertest.ErrInjected
)

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
	if n := len(o.es); n > 0 && base.CompareInternalKeys(o.es[n-1].Key, key) >= 0 {
		return fmt.Errorf("memOutput: out of order: %v then %v", o.es[n-1].Key, key)
	}
	if o.failAdd > 0 && len(o.es)+1 == o.failAdd {
		return errInjected
	}
	key.UserKey = slices.Clone(key.UserKey)
	o.es = append(o.es, entry{Key: key, Value: slices.Clone(value)})
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
	return &TableMeta{FileNum: o.fileNum, Size: o.size, Smallest: o.es[0].Key, Largest: o.es[len(o.es)-1].Key, HasRangeDels: len(o.frags) > 0}, nil
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

// newMerged returns a merging iterator over a sliceIter per child.
func newMerged(children [][]entry) (base.Iterator, []*sliceIter) {
	its, sis := itertest.Iters(children)
	return merging.NewIter(its...), sis
}

package compaction

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/rangedel"
)

// Output is one table being written by Run. The kv package backs it with an
// sstable.Writer; tests back it with memory.
type Output interface {
	// Add appends an entry; keys arrive in strictly increasing internal-key
	// order. The key's UserKey and the value are only valid during the call:
	// an Output that keeps them must copy them.
	Add(key base.InternalKey, value []byte) error
	// EstimatedSize is the size the table would have if finished now.
	EstimatedSize() uint64
	// Finish completes the table and returns its metadata.
	Finish() (*TableMeta, error)
	// AddRangeDels adds range tombstone fragments, in key order; Run calls
	// it at most once per output, just before Finish.
	AddRangeDels(frags []rangedel.Fragment) error
	// Abort discards the table (and removes its file). Run calls it on the
	// output in progress when it fails, and after a failed Finish (ignoring
	// the result then, as Finish may have discarded the table already).
	Abort() error
}

// RunOptions configure Run.
type RunOptions struct {
	// Snapshots are the sequence numbers of the live snapshots, ascending
	// (duplicates allowed). A snapshot S sees the versions with Seq < S.
	Snapshots []uint64
	// DropTombstones says the output is the bottommost data for its key
	// range (no older version of any key in range exists outside the input),
	// so tombstones that hide nothing from any reader are dropped.
	DropTombstones bool
	// ZeroSeqs, which needs DropTombstones, writes the Sets every reader
	// sees (the newest version of a user key in the oldest stripe, below
	// every snapshot) with sequence number 0, as Pebble does at the
	// bottommost level: no older version exists for them to be ordered
	// against, every newer one is above 0, and a table whose keys share one
	// trailer stores that column in next to no bytes (see Run, Sequence
	// numbers).
	ZeroSeqs bool
	// TargetFileSize cuts the output into tables of about this size
	// (Output.EstimatedSize); 0 writes a single table. With Grandparents,
	// between half and twice this size (see Run, Cutting).
	TargetFileSize uint64
	// Grandparents are the tables of the level the output will be compacted
	// into next that overlap the input, in key order (Plan.Grandparents).
	// Run prefers to cut an output just before one of them begins, so that
	// the output later overlaps fewer of them. Empty: cut by size alone.
	Grandparents []*TableMeta
	// NewOutput opens the next output table. Run opens outputs lazily, so an
	// input whose entries are all dropped opens none.
	NewOutput func() (Output, error)
	// Cancel, when non-nil, stops the run with ErrCanceled once it is
	// closed (checked every few thousand entries).
	Cancel <-chan struct{}
	// RangeDels are the range tombstones of the input (nil: none). Run
	// drops the versions they delete for every reader and writes those of
	// them some reader still needs into the outputs (see Run, Range
	// tombstones).
	RangeDels *rangedel.Set

	// The store's known negatives are not an input here: NewOutput (the
	// store's) hands them to each table's filter builder, and the store
	// pre-adapts the outputs before installing them (see kv/knownneg.go).
}

// cancelCheckInterval is how many input entries Run handles between looks at
// RunOptions.Cancel.
const cancelCheckInterval = 4096

// Run writes the entries of in (positioned by Run with First, walked with
// Next, not closed) that some reader can still see into new tables opened
// with opts.NewOutput, and returns their metadata in key order.
//
// Versions kept. The live snapshots s1 < s2 < ... < sm cut the sequence
// numbers into stripes [0, s1), [s1, s2), ..., [sm, ∞); every reader (a
// snapshot, or the latest state) sees the newest version with Seq below its
// sequence number, which is always the newest version of some stripe. So
// for each user key Run keeps the newest version of every non-empty stripe
// and drops the others: a version is kept iff it is the newest overall or
// the newest with Seq < s for some snapshot s.
//
// Tombstones. A kept tombstone must stay while something older could be
// seen through it. With DropTombstones (the output is bottommost for its
// range) nothing older exists outside the input, so a kept tombstone with
// no older kept Set of the same user key (it is, or lies above only other
// tombstones, in the oldest kept stripe) hides nothing: every reader that
// would see it gets "absent" without it too. Run drops exactly those: the
// oldest run of kept tombstones of each user key. A tombstone above an older
// kept Set is always kept, since some snapshot sees it instead of the Set.
//
// Sequence numbers. With ZeroSeqs a kept Set in the oldest stripe is
// written with Seq 0. Every reader sees it (a reader's sequence number is
// above 0), and none sees an older version of its user key, since the
// output is bottommost; a newer version, kept here or elsewhere, has a
// larger Seq still. The columnar table layout codes a block's trailers
// relative to their smallest, so a block of such keys spends no bytes on
// them: tables of 16-byte keys and one repeated 100-byte value shrank by a
// third, with distinct incompressible values by 3% (docs/ARCHITECTURE.md,
// "On-disk formats").
//
// Cutting. Run finishes the current output only before the first kept
// version of a user key, so the versions of one user key never straddle
// two tables. Without Grandparents it does so once the output's
// EstimatedSize reaches TargetFileSize. With them it aligns outputs with
// the grandparents' starts (RocksDB's and Pebble's heuristic, parameters
// from Pebble's compaction output splitter): an output that later
// compacts into the grandparent level then rewrites no grandparent it
// barely touches. It cuts below half the target never, at twice the target
// always, and in between before a key that starts past a grandparent's
// first key, once the output has (50 + 5*min(b-1, 8))% of the target, b
// being the grandparent starts passed since the output began (so where
// grandparents are dense it waits for a fuller table, at most 90%); past
// the last grandparent it cuts at the target.
//
// Range tombstones. A version at seq p of a key that a range tombstone at
// t > p covers is dropped when t is in p's stripe: every reader that sees
// the version sees the tombstone too. The tombstones themselves are kept
// by the same rule as versions (the newest of each stripe, per fragment),
// and with DropTombstones those of the oldest stripe are dropped: the
// versions below them are dropped here and nothing older exists elsewhere.
// Each output takes the kept fragments of its own key range
// (rangedel.Splitter: up to the successor of its last user key), the last
// one all the rest; an input whose point keys are all dropped still gets
// an output when some tombstone is kept.
//
// Errors. An error from the input, an output, NewOutput or cancellation
// aborts the output in progress and is returned (wrapped) together with the
// metadata of the outputs already finished, so that the caller can delete
// their files. Input out of internal-key order gives ErrOutOfOrder; kinds
// other than KeyKindSet and KeyKindDelete give ErrUnsupportedKind.
func Run(in base.Iterator, opts RunOptions) ([]*TableMeta, error) {
	if in == nil {
		return nil, fmt.Errorf("%w: nil input iterator", ErrInvalidOptions)
	}
	if opts.NewOutput == nil {
		return nil, fmt.Errorf("%w: NewOutput is nil", ErrInvalidOptions)
	}
	if !sort.SliceIsSorted(opts.Snapshots, func(i, j int) bool { return opts.Snapshots[i] < opts.Snapshots[j] }) {
		return nil, fmt.Errorf("%w: Snapshots not ascending", ErrInvalidOptions)
	}
	if opts.ZeroSeqs && !opts.DropTombstones {
		return nil, fmt.Errorf("%w: ZeroSeqs without DropTombstones (only a bottommost output may zero sequence numbers)", ErrInvalidOptions)
	}
	r := runner{opts: opts}
	r.rangeDels = rangedel.NewSplitter(r.keptRangeDels())
	err := r.run(in)
	if err != nil && r.out != nil {
		if aerr := r.out.Abort(); aerr != nil {
			err = errors.Join(err, fmt.Errorf("compaction: abort output: %w", aerr))
		}
		r.out = nil
	}
	return r.done, err
}

type runner struct {
	opts RunOptions
	out  Output       // output in progress, nil if none
	done []*TableMeta // finished outputs

	// Grandparent cutting: gp is the next grandparent whose first key the
	// kept keys have not passed; passed counts the grandparent starts passed
	// since the current output began.
	gp, passed int

	rangeDels *rangedel.Splitter // the kept range tombstones, for the outputs
	lastKey   []byte             // last user key added to out

	userKey  []byte   // user key of the current group (copied)
	started  bool     // the current user key has been written to out
	pending  []uint64 // seqs of kept tombstones awaiting an older kept Set
	stripe   int      // stripe of the last version seen of the current key
	prevSeq  uint64
	prevKind base.KeyKind
}

// stripeOf returns the index of the snapshot stripe holding seq: the number
// of snapshots that do not see it (snapshots s <= seq).
func (r *runner) stripeOf(seq uint64) int {
	s := r.opts.Snapshots
	return sort.Search(len(s), func(i int) bool { return s[i] > seq })
}

func (r *runner) run(in base.Iterator) error {
	first := true
	n := 0
	for ok := in.First(); ok; ok = in.Next() {
		if n++; n%cancelCheckInterval == 0 && r.opts.Cancel != nil {
			select {
			case <-r.opts.Cancel:
				return ErrCanceled
			default:
			}
		}
		k := in.Key()
		if k.Kind != base.KeyKindSet && k.Kind != base.KeyKindDelete {
			return fmt.Errorf("%w: %d at user key %q seq %d", ErrUnsupportedKind, k.Kind, k.UserKey, k.Seq)
		}
		sameKey := false
		if !first {
			c := bytes.Compare(k.UserKey, r.userKey)
			if c < 0 || (c == 0 && (k.Seq > r.prevSeq || (k.Seq == r.prevSeq && k.Kind >= r.prevKind))) {
				return fmt.Errorf("%w: %q seq %d kind %d after %q seq %d kind %d",
					ErrOutOfOrder, k.UserKey, k.Seq, k.Kind, r.userKey, r.prevSeq, r.prevKind)
			}
			sameKey = c == 0
		}
		first = false
		r.prevSeq, r.prevKind = k.Seq, k.Kind
		stripe := r.stripeOf(k.Seq)
		if sameKey {
			if stripe == r.stripe {
				continue // shadowed by a newer version in the same stripe
			}
		} else {
			r.userKey = append(r.userKey[:0], k.UserKey...)
			r.started = false
			r.pending = r.pending[:0] // tombstones hiding nothing: dropped
		}
		r.stripe = stripe
		if t, ok := r.opts.RangeDels.CoveringAbove(k.UserKey, k.Seq); ok && r.stripeOf(t) == stripe {
			continue // deleted by a range tombstone every reader of it sees
		}
		if r.opts.DropTombstones {
			if k.Kind == base.KeyKindDelete {
				r.pending = append(r.pending, k.Seq)
				continue
			}
			for _, seq := range r.pending {
				if err := r.add(base.InternalKey{UserKey: r.userKey, Seq: seq, Kind: base.KeyKindDelete}, nil); err != nil {
					return err
				}
			}
			r.pending = r.pending[:0]
			if r.opts.ZeroSeqs && stripe == 0 {
				k.Seq = 0
			}
		}
		if err := r.add(k, in.Value()); err != nil {
			return err
		}
	}
	if err := in.Error(); err != nil {
		return fmt.Errorf("compaction: input: %w", err)
	}
	return r.finishLast()
}

// finishLast completes the last output with every range tombstone not yet
// written, opening one for them if no point key needed one.
func (r *runner) finishLast() error {
	frags := r.rangeDels.Rest()
	if r.out == nil && len(frags) > 0 {
		if err := r.open(); err != nil {
			return err
		}
	}
	return r.finishWith(frags)
}

// add writes one kept entry, cutting the output first if this is the first
// entry of its user key and the output is full.
func (r *runner) add(k base.InternalKey, value []byte) error {
	if !r.started {
		r.started = true
		n := r.passGrandparents(k.UserKey)
		if r.out != nil {
			r.passed += n
			if r.shouldCut(n > 0) {
				if err := r.finish(); err != nil {
					return err
				}
			}
		}
	}
	if r.out == nil {
		if err := r.open(); err != nil {
			return err
		}
	}
	if err := r.out.Add(k, value); err != nil {
		return fmt.Errorf("compaction: output add: %w", err)
	}
	r.lastKey = append(r.lastKey[:0], k.UserKey...)
	return nil
}

// keptRangeDels returns the input's range tombstones that some reader
// still needs (see Run, Range tombstones).
func (r *runner) keptRangeDels() *rangedel.Set {
	var frags []rangedel.Fragment
	for _, f := range r.opts.RangeDels.Fragments() {
		var seqs []uint64
		last := -1                   // stripe of the last kept seq
		for _, seq := range f.Seqs { // newest first
			st := r.stripeOf(seq)
			if st == last || (r.opts.DropTombstones && st == 0) {
				continue
			}
			last = st
			seqs = append(seqs, seq)
		}
		if len(seqs) > 0 {
			frags = append(frags, rangedel.Fragment{Start: f.Start, End: f.End, Seqs: seqs})
		}
	}
	s, _ := rangedel.FromFragments(frags) // a subset of a Set's fragments: well formed
	return s
}

// passGrandparents moves past the grandparents that begin at or below
// userKey and returns how many there were.
func (r *runner) passGrandparents(userKey []byte) int {
	gps := r.opts.Grandparents
	n := 0
	for r.gp < len(gps) && bytes.Compare(gps[r.gp].Smallest.UserKey, userKey) <= 0 {
		r.gp++
		n++
	}
	return n
}

// shouldCut decides whether to finish the current output before a new
// user key; atBoundary says the key passed a grandparent's start (see
// Run, Cutting).
func (r *runner) shouldCut(atBoundary bool) bool {
	target := r.opts.TargetFileSize
	if target == 0 {
		return false
	}
	size := r.out.EstimatedSize()
	switch {
	case len(r.opts.Grandparents) == 0:
		return size >= target
	case size < target/2:
		return false
	case size >= 2*target:
		return true
	case !atBoundary:
		return r.gp == len(r.opts.Grandparents) && size >= target
	default:
		pct := 50 + 5*uint64(min(r.passed-1, 8))
		return size >= target*pct/100
	}
}

// open opens the next output.
func (r *runner) open() error {
	out, err := r.opts.NewOutput()
	if err != nil {
		return fmt.Errorf("compaction: new output: %w", err)
	}
	if out == nil {
		return fmt.Errorf("%w: NewOutput returned a nil Output", ErrInvalidOptions)
	}
	r.out = out
	return nil
}

// finish completes the output in progress, if any, before a cut: it takes
// the range tombstones up to its last key.
func (r *runner) finish() error {
	if r.out == nil {
		return nil
	}
	return r.finishWith(r.rangeDels.Cut(r.lastKey))
}

// finishWith completes the output in progress, if any, with the range
// tombstone fragments frags.
func (r *runner) finishWith(frags []rangedel.Fragment) error {
	if r.out == nil {
		return nil
	}
	r.passed = 0
	var meta *TableMeta
	err := r.out.AddRangeDels(frags)
	if err == nil {
		meta, err = r.out.Finish()
	}
	if err == nil && meta == nil {
		err = errors.New("Finish returned nil metadata")
	}
	if err != nil {
		// Best effort: a failed Finish may already have discarded the table
		// (sstable.Writer.Close does, and then Abort reports ErrClosed).
		_ = r.out.Abort()
		r.out = nil
		return fmt.Errorf("compaction: output finish: %w", err)
	}
	r.out = nil
	r.done = append(r.done, meta)
	return nil
}

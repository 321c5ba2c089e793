package sstable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"math"
	"runtime"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/internal/rangedel"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage"
	psst "github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

var errNotExist = iofs.ErrNotExist

// ReaderOptions configure Open.
type ReaderOptions struct {
	// Cache is a block cache shared with other readers (nil: no cache).
	Cache *pebble.Cache
	// FileNum identifies the table in the block cache.
	FileNum uint64
	// StatePath is the adaptive state file ("" = state not persisted).
	StatePath string
	// StateReadOnly loads the state file at StatePath (if it exists and is
	// valid for this table) but never writes it: the filter still adapts,
	// in memory only; SaveState returns an error wrapping
	// ErrReadOnlyState and Close saves nothing. It requires StatePath.
	StateReadOnly bool
	// SkipFilter opens the table without its filter (no filter block read
	// or decoded; lookups probe the table): for readers that only iterate,
	// such as compaction inputs.
	SkipFilter bool
	// Sequential makes each iterator read ahead, a window of 256 KiB per
	// file read instead of one read per block: for readers whose
	// iterators scan the table once in order (compaction inputs). Point
	// lookups and seeks stay correct but may read more than they use.
	Sequential bool
	// ClosedByOwner says that the caller never calls Close while another
	// call on the Reader runs: it holds a reference of its own across
	// each lookup, iterator construction, pre-adaptation, queued fix
	// (QueueFix) and state save, and closes the Reader only once none is
	// held (kv's table cache does). The Reader then skips the in-flight registration Close
	// would otherwise wait for: two atomic adds on a shared stripe per
	// lookup. A call that starts after Close still fails with ErrClosed.
	ClosedByOwner bool
	// FixFalsePositive, if set, decides on each false positive whether
	// an adaptive filter fixes it now (nil: always). A fix reads the
	// remote section (a device read on cold storage); a false positive
	// left unfixed costs its probe again if the key comes back, and is
	// counted in Metrics.FixesDeferred.
	FixFalsePositive func(key []byte) bool
	// QueueFix, if set, takes the fixes off the lookups: a lookup that
	// meets a false positive FixFalsePositive lets through hands QueueFix
	// a function that makes the fix (it holds a copy of the key) and
	// returns at once, without the fix's remote read. QueueFix runs the
	// function later, on a goroutine of its own, or returns false to drop
	// the fix (counted in Metrics.FixesDropped; the key is fixed if it
	// comes back). Until the function returns, the caller keeps the Reader
	// open as it does for a lookup (a function that runs after Close does
	// nothing). nil: every fix is made by the lookup that met it.
	QueueFix func(fix func()) bool
	// RemoteCache, if set, keeps the remote chunks fixes read, shared
	// with other readers: a fix whose chunks are cached reads no file.
	RemoteCache *filterpolicy.RemoteCache
	// CacheFalsePositives gives an adaptive filter a cache of false
	// positives (fpcache.go): a false positive FixFalsePositive holds back
	// is remembered, and the key's next lookups in this table answer
	// absent without a probe, until the cache (about 1 bit per table key,
	// the oldest of a set of 8 keys leaving first) lets it go. The cache's memory counts in
	// Metrics.FilterBytes. It needs FixFalsePositive (without it every
	// false positive is fixed).
	CacheFalsePositives bool
	// FixReturning, with CacheFalsePositives, fixes the filter for a key
	// the cache answers: the key came back to this table, so the fix
	// pays (made as a false positive's fix is, through QueueFix if set),
	// and the key leaves the cache, freeing its entry. A key is then
	// fixed at its second sight in a table, and its first cost the only
	// probe: the ski rental of the cache in front of the fix, with the
	// fix bought as soon as the key returns. Without it a cached key is
	// answered by the cache until the cache lets it go, and fixed only if
	// FixFalsePositive lets its next false positive through.
	FixReturning bool
	// CachedReturn, if set, is called with a key the cache of false
	// positives answers when FixReturning is off: the key came back to
	// this table while the cache held it. kv marks the key in its
	// known-negative record, so that its next false positive, after the
	// cache lets it go, passes FixFalsePositive.
	CachedReturn func(key []byte)
	// FalsePositives, if set, is a counter the Reader adds each of its
	// false-positive probes to, as well as to its Metrics: one the caller
	// may share between its readers, to read a store's total with one
	// atomic load where summing every Reader's Metrics would visit them
	// all.
	FalsePositives *atomic.Uint64
}

// Metrics are a Reader's counters (monotonic since Open).
type Metrics struct {
	// FilterChecks counts lookups answered by the in-memory filter first.
	FilterChecks uint64
	// FilterNegatives counts lookups the filter answered "absent" (probes saved).
	FilterNegatives uint64
	// FalsePositiveProbes counts table lookups that found no version of the key.
	FalsePositiveProbes uint64
	// TruePositiveProbes counts table lookups that found some version of the key.
	TruePositiveProbes uint64
	// DataBlockReads counts data blocks Pebble's reader fetched from the
	// file after Open (block cache misses; every data block load when the
	// Reader has no cache). Counted at the file: reads at data block offsets.
	DataBlockReads uint64
	// IndexBlockReads counts index block reads from the file after Open.
	IndexBlockReads uint64
	// Adaptations counts successful Adapt calls on this reader.
	Adaptations uint64
	// Rebuilds counts block rebuilds done by the adaptive filter.
	Rebuilds uint64
	// RemoteReads counts positioned reads of 64-slot remote chunks (the
	// reads RemoteCache served are not counted).
	RemoteReads uint64
	// AdaptErrors counts failed Adapt calls (the Get's answer stays right).
	AdaptErrors uint64
	// FixesDeferred counts false positives an adaptive filter did not fix
	// because ReaderOptions.FixFalsePositive said not yet.
	FixesDeferred uint64
	// FixesDropped counts false positives whose fix ReaderOptions.QueueFix
	// did not take.
	FixesDropped uint64
	// FalsePositivesCached counts false positives the false-positive
	// cache took instead of a fix (ReaderOptions.CacheFalsePositives).
	FalsePositivesCached uint64
	// CachedNegatives counts lookups the filter passed that the
	// false-positive cache answered absent, without a probe (also counted
	// in FilterNegatives).
	CachedNegatives uint64
	// PreAdaptations counts false positives fixed by PreAdapt (known
	// negatives checked before the table was published), apart from
	// Adaptations, which counts the read path's.
	PreAdaptations uint64
	// PreAdaptChecks counts the keys PreAdapt queried.
	PreAdaptChecks uint64
	// FilterBytes is the in-memory filter size.
	FilterBytes uint64
	// FilterKeys is the number of distinct keys in the filter.
	FilterKeys uint64
}

// Reader reads one table. Get, GetInternal and NewIter are safe for
// concurrent use; Close must not race with them... it waits for running
// lookups and makes later calls fail with ErrClosed.
//
// Lookups take no lock and write no word shared with lookups on other
// goroutines (docs/ARCHITECTURE.md, "Contracts"): each one registers in, and counts into, one
// stripe of readShards chosen by its goroutine (see readShard). With
// ReaderOptions.ClosedByOwner the owner keeps Close from running
// concurrently with any other call, and lookups only count.
type Reader struct {
	fs       vfs.FS
	path     string
	opts     ReaderOptions
	file     vfs.File
	readable *countingReadable
	pr       *psst.Reader
	cacheH   interface{ Close() }
	evict    func()

	tableSize uint64

	// rangeDels are the table's range tombstones (nil: none), read at Open.
	rangeDels *rangedel.Set

	// The filter and its adaptation (filterreader.go); its fields and
	// methods (Filter, FilterError, StateError...) are the Reader's.
	tableFilter

	// closed is set once by Close, read by every lookup: it sits with the
	// read-only fields, away from the words written below.
	closed    atomic.Bool
	shards    []readShard // len is a power of two
	shardMask uintptr

	_         [cacheLine]byte // keep the written words off the lines above
	probeErrs atomic.Uint64   // lookups that failed after the filter said "maybe"
}

// cacheLine is the padding unit that keeps words written by different
// cores on different cache lines (filter.CacheLine, 64 bytes). A
// stripe array of 4..64 lines falls in a size class that is a power of two
// no larger than a page, so Go allocates it aligned to its size: each
// stripe is on a line of its own.
const cacheLine = filter.CacheLine

func setUint64[T ~uint64](dst *T, v uint64) { *dst = T(v) }

// Open opens the table at path. It loads the filter's local state (never
// the remote representation) and, for adaptive policies with a StatePath,
// the adaptive state saved by an earlier Reader. A corrupt filter block
// falls back to no filter (FilterError reports why); a missing or rejected
// state file falls back to the table's pristine filter (StateError).
func Open(fs vfs.FS, path string, opts ReaderOptions) (*Reader, error) {
	if fs == nil {
		return nil, fmt.Errorf("%w: nil vfs.FS", ErrInvalidOptions)
	}
	if path == "" {
		return nil, fmt.Errorf("%w: empty path", ErrInvalidOptions)
	}
	if opts.StateReadOnly && opts.StatePath == "" {
		return nil, fmt.Errorf("%w: StateReadOnly without StatePath", ErrInvalidOptions)
	}
	f, err := fs.Open(path, vfs.RandomReadsOption)
	if err != nil {
		return nil, err
	}
	sr, err := psst.NewSimpleReadable(f)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	cr := &countingReadable{Readable: sr, sequential: opts.Sequential}
	cr.rh = objstorage.MakeNoopReadHandle(cr)
	r := &Reader{fs: fs, path: path, opts: opts, file: f, readable: cr}
	r.shards = make([]readShard, numReadShards(runtime.GOMAXPROCS(0)))
	r.shardMask = uintptr(len(r.shards) - 1)
	r.tableSize = uint64(sr.Size())
	ro := psst.ReaderOptions{Comparer: pebble.DefaultComparer}
	if opts.Cache != nil {
		h := opts.Cache.NewHandle()
		ro.CacheOpts.CacheHandle = h
		setUint64(&ro.CacheOpts.FileNum, opts.FileNum)
		fn := ro.CacheOpts.FileNum
		r.cacheH = h
		r.evict = func() { h.EvictFile(fn) }
	}
	pr, err := psst.NewReader(context.Background(), r.readable, ro)
	if err != nil {
		if r.cacheH != nil {
			r.cacheH.Close()
		}
		_ = r.readable.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	r.pr = pr
	if err := r.loadRangeDels(); err != nil {
		_ = r.closeFiles()
		return nil, err
	}
	if err := r.loadFilter(); err != nil {
		_ = r.closeFiles()
		return nil, err
	}
	r.readable.counting.Store(true)
	return r, nil
}

// loadRangeDels reads the range-deletion block, if the table has one, into
// r.rangeDels. A damaged block is ErrCorrupt: the tombstones say what is
// deleted, and a table that lost them would resurrect keys.
func (r *Reader) loadRangeDels() error {
	it, err := r.pr.NewRawRangeDelIter(context.Background(), psst.NoFragmentTransforms, psst.ReadEnv{})
	if err != nil {
		return fmt.Errorf("%w: %s: range deletions: %w", ErrCorrupt, r.path, err)
	}
	if it == nil {
		return nil
	}
	defer it.Close()
	var frags []rangedel.Fragment
	span, err := it.First()
	for ; span != nil && err == nil; span, err = it.Next() {
		f := rangedel.Fragment{Start: bytes.Clone(span.Start), End: bytes.Clone(span.End), Seqs: make([]uint64, len(span.Keys))}
		for i := range span.Keys {
			if span.Keys[i].Kind() != pebble.InternalKeyKindRangeDelete {
				return fmt.Errorf("%w: %s: range-deletion block holds a key of kind %v", ErrCorrupt, r.path, span.Keys[i].Kind())
			}
			f.Seqs[i] = uint64(span.Keys[i].SeqNum())
		}
		frags = append(frags, f)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: range deletions: %w", ErrCorrupt, r.path, err)
	}
	set, ok := rangedel.FromFragments(frags)
	if !ok {
		return fmt.Errorf("%w: %s: range deletions out of order", ErrCorrupt, r.path)
	}
	r.rangeDels = set
	return nil
}

// RangeDels returns the table's range tombstones (nil if it has none).
func (r *Reader) RangeDels() *rangedel.Set { return r.rangeDels }

// loadFilter finds the filter block and decodes its local state. Only I/O
// errors on the table fail it; a bad block is a fallback to no filter.
func (r *Reader) loadFilter() error {
	layout, err := r.pr.Layout()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, r.path, err)
	}
	r.readable.indexOffsets = make(map[int64]struct{}, len(layout.Index)+1)
	for _, h := range layout.Index {
		r.readable.indexOffsets[int64(h.Offset)] = struct{}{}
	}
	if layout.TopIndex.Length > 0 {
		r.readable.indexOffsets[int64(layout.TopIndex.Offset)] = struct{}{}
	}
	if r.opts.SkipFilter {
		return nil
	}
	r.tableFilter = tableFilter{fs: r.fs, path: r.path, statePath: r.opts.StatePath,
		stateReadOnly: r.opts.StateReadOnly, tableSize: r.tableSize, fixGate: r.opts.FixFalsePositive,
		remoteCache: r.opts.RemoteCache, cacheFPs: r.opts.CacheFalsePositives && r.opts.FixFalsePositive != nil,
		fixReturning: r.opts.FixReturning, cachedReturn: r.opts.CachedReturn}
	return r.tableFilter.load(r.file, layout.Filter)
}

// Get returns the newest version of key. A tombstone gives found=false.
// The value is a copy owned by the caller.
func (r *Reader) Get(key []byte) (value []byte, found bool, err error) {
	v, kind, ok, err := r.GetInternal(key, math.MaxUint64)
	if err != nil || !ok || kind == KeyKindDelete {
		return nil, false, err
	}
	return v, true, nil
}

// GetInternal returns the newest version of userKey with Seq < seq (seq =
// snapshot; math.MaxUint64 = latest); found=false if there is none. The
// filter is consulted first; a "maybe" followed by no version of userKey
// at all is a false positive and the filter adapts (errors are counted,
// the answer stays right). The value is a copy owned by the caller.
func (r *Reader) GetInternal(userKey []byte, seq uint64) (value []byte, kind KeyKind, found bool, err error) {
	value, kind, _, found, err = r.GetVersion(userKey, seq)
	return value, kind, found, err
}

// GetVersion is GetInternal that also returns the sequence number of the
// version found (the store compares it with the range tombstones above it).
func (r *Reader) GetVersion(userKey []byte, seq uint64) (value []byte, kind KeyKind, vseq uint64, found bool, err error) {
	sh := r.enter()
	if sh == nil {
		return nil, 0, 0, false, ErrClosed
	}
	defer r.exit(sh)
	if r.filter != nil && !r.filter.MayContain(userKey) {
		sh.filterNegatives.Add(1)
		return nil, 0, 0, false, nil
	}
	if r.cachedAbsent(userKey) {
		sh.filterNegatives.Add(1)
		sh.cachedNegatives.Add(1)
		if r.fixReturning {
			r.returned(userKey)
		} else if r.cachedReturn != nil {
			r.cachedReturn(userKey)
		}
		return nil, 0, 0, false, nil
	}
	it, err := r.newIter()
	if err != nil {
		r.probeErrs.Add(1)
		return nil, 0, 0, false, err
	}
	any := false
	kv := it.SeekGE(userKey, 0)
	for kv != nil && bytes.Equal(kv.K.UserKey, userKey) {
		any = true
		if uint64(kv.SeqNum()) < seq {
			kind, vseq = KeyKind(kv.Kind()), uint64(kv.SeqNum())
			v, owned, verr := kv.Value(nil)
			if verr != nil {
				err = verr
				break
			}
			if kind != KeyKindDelete {
				if owned {
					value = v
				} else {
					value = append(make([]byte, 0, len(v)), v...)
				}
			}
			found = true
			break
		}
		kv = it.Next()
	}
	if err == nil && kv == nil {
		err = it.Error()
	}
	if err != nil {
		_ = it.Close()
		r.probeErrs.Add(1)
		return nil, 0, 0, false, fmt.Errorf("%w: %s: %w", ErrCorrupt, r.path, err)
	}
	_ = it.Close()
	if any {
		sh.tpProbes.Add(1)
		return value, kind, vseq, found, nil
	}
	sh.fpProbes.Add(1)
	if c := r.opts.FalsePositives; c != nil {
		c.Add(1)
	}
	r.falsePositive(userKey)
	return nil, 0, 0, false, nil
}

// newIter opens a Pebble iterator for one lookup. Keeping idle iterators
// for reuse was measured (BenchmarkGetPresent with a 32-iterator pool) and
// gained nothing: Pebble already recycles its iterators, so a new one per
// lookup allocates nothing, and idle ones would pin index and data blocks
// in the cache for every open table.
func (r *Reader) newIter() (psst.Iterator, error) {
	it, err := r.pr.NewIter(psst.NoTransforms, nil, nil, psst.AssertNoBlobHandles)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, r.path, err)
	}
	return it, nil
}

// Format reports the block layout the table was written in.
func (r *Reader) Format() Format {
	if f, err := r.pr.TableFormat(); err == nil && f < TableFormat {
		return FormatRow
	}
	return FormatColumnar
}

// Metrics returns the reader's counters.
func (r *Reader) Metrics() Metrics {
	m := Metrics{
		DataBlockReads:  r.readable.dataReads.Load(),
		IndexBlockReads: r.readable.indexReads.Load(),
	}
	for i := range r.shards {
		s := &r.shards[i]
		m.FilterNegatives += s.filterNegatives.Load()
		m.CachedNegatives += s.cachedNegatives.Load()
		m.FalsePositiveProbes += s.fpProbes.Load()
		m.TruePositiveProbes += s.tpProbes.Load()
	}
	if r.filter != nil {
		// Every lookup past the closed check asks the filter, then either
		// stops or probes the table (a true or false positive, or an error).
		m.FilterChecks = m.FilterNegatives + m.FalsePositiveProbes + m.TruePositiveProbes + r.probeErrs.Load()
	}
	r.tableFilter.metrics(&m)
	return m
}

// Close saves the adaptive state (if StatePath is set and StateReadOnly is
// not), then releases the table. It waits for running lookups (with
// ClosedByOwner there are none: the owner guarantees it); later calls fail
// with ErrClosed.
func (r *Reader) Close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	r.waitLookups()
	saveErr := r.saveState()
	return errors.Join(saveErr, r.closeFiles())
}

func (r *Reader) closeFiles() error {
	var errs []error
	if r.pr != nil {
		errs = append(errs, r.pr.Close()) // closes the readable and the file
	} else {
		errs = append(errs, r.readable.Close())
	}
	if r.cacheH != nil {
		r.evict()
		r.cacheH.Close()
	}
	return errors.Join(errs...)
}

// countingReadable counts the block reads Pebble's reader issues once the
// table is open, telling index blocks (by their offsets, from the layout)
// from data blocks. Its read handle is stateless and shared, so creating an
// iterator allocates nothing.
type countingReadable struct {
	objstorage.Readable
	rh           objstorage.NoopReadHandle
	sequential   bool               // iterators read ahead (ReaderOptions.Sequential)
	indexOffsets map[int64]struct{} // set before counting starts, then read-only
	counting     atomic.Bool
	dataReads    atomic.Uint64
	indexReads   atomic.Uint64
}

func (c *countingReadable) ReadAt(ctx context.Context, p []byte, off int64) error {
	if c.counting.Load() {
		if _, ok := c.indexOffsets[off]; ok {
			c.indexReads.Add(1)
		} else {
			c.dataReads.Add(1)
		}
	}
	return c.Readable.ReadAt(ctx, p, off)
}

func (c *countingReadable) NewReadHandle(objstorage.ReadBeforeSize) objstorage.ReadHandle {
	if c.sequential {
		return &readaheadHandle{r: c, size: c.Size()}
	}
	return &c.rh
}

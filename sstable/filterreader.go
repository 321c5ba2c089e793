package sstable

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/filterpolicy"
	psst "github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// tableFilter is the filter piece of a Reader, as LevelDB's
// FilterBlockReader is of its table reader: it finds and decodes the
// table's filter block, answers the filter query, fixes a false positive
// (adaptive filters, reading the remote section of the table file), counts
// adaptations, and loads and saves the adaptive state file. The Reader
// owns Pebble's reader, lookups, iterators and the lookup stripes; it
// embeds a tableFilter, so the filter's fields and methods are its own.
// The zero value is "no filter" (a table opened with SkipFilter).
type tableFilter struct {
	fs            vfs.FS
	path          string // the table's, for errors
	statePath     string
	stateReadOnly bool
	tableSize     uint64
	fixGate       func(key []byte) bool // ReaderOptions.FixFalsePositive
	remoteCache   *filterpolicy.RemoteCache
	cacheFPs      bool             // ReaderOptions.CacheFalsePositives (with a gate)
	fixReturning  bool             // ReaderOptions.FixReturning
	cachedReturn  func(key []byte) // ReaderOptions.CachedReturn
	fpCache       fpCache          // capacity 0: off; set by load for an adaptive filter

	filter    filter.Filter   // nil: no filter
	adaptive  filter.Adaptive // nil: static or no filter
	hdr       filterpolicy.Header
	remote    *filterpolicy.BlockRemote
	filterErr error
	stateErr  error
	filterOff int64 // filter block position in the file (tests)
	filterLen int64

	_              [cacheLine]byte // the counters below are written; the fields above are read by every lookup
	adaptations    atomic.Uint64
	preAdaptations atomic.Uint64 // see Reader.PreAdapt
	preAdaptChecks atomic.Uint64
	adaptErrors    atomic.Uint64
	fixesDeferred  atomic.Uint64
	fixesDropped   atomic.Uint64
	fpCached       atomic.Uint64 // false positives put in the cache (fpcache.go)
	lastAdaptErr   atomic.Pointer[error]
	savedAdapt     atomic.Uint64
	savedFPs       atomic.Uint64
	saveMu         sync.Mutex
	prior          FilterHistory // loaded with the adaptive state
}

// load finds the filter block among the table's filter blocks and decodes
// its local state (never the remote section, which stays on disk). Only
// I/O errors on the table fail it; a bad block is a fallback to no filter
// (FilterError says why).
func (t *tableFilter) load(file vfs.File, filters []psst.NamedBlockHandle) error {
	var bh psst.NamedBlockHandle
	found := false
	for _, nb := range filters {
		if strings.HasPrefix(nb.Name, filterpolicy.MetaBlockPrefix) {
			bh, found = nb, true
			break
		}
	}
	if !found {
		return nil
	}
	off, length := int64(bh.Handle.Offset), int64(bh.Handle.Length)
	t.filterOff, t.filterLen = off, length
	if length == 0 {
		return nil // Pebble writes an empty filter block for a table without keys
	}
	if length < filterpolicy.HeaderSize || off < 0 || off+length > int64(t.tableSize) {
		t.filterErr = fmt.Errorf("%w: filter block handle %d+%d out of range", filterpolicy.ErrCorruptBlock, off, length)
		return nil
	}
	block, h, ok, err := t.readLocal(file, bh.Name, off, length)
	if !ok || err != nil {
		return err
	}
	if h.HasRemote {
		t.remote = filterpolicy.NewBlockRemote(file, off, h)
		t.remote.SetCache(t.remoteCache)
	}
	var rem filter.Remote
	if t.remote != nil {
		rem = t.remote
	}
	f, hdr, err := filterpolicy.OpenBlock(block, rem)
	if err != nil {
		t.filterErr = err
		return nil
	}
	t.filter, t.hdr = f, hdr
	if af, ok := f.(filter.Adaptive); ok {
		t.adaptive = af
		t.loadState()
		if t.cacheFPs {
			t.fpCache.capacity = fpCacheEntries(hdr.NumKeys)
		}
	}
	return nil
}

// readLocal reads the header and local state of the filter block name at
// off (length bytes in the table). ok is false when the block is bad
// (t.filterErr says why) or the read failed (err).
func (t *tableFilter) readLocal(file vfs.File, name string, off, length int64) (block []byte, h filterpolicy.Header, ok bool, err error) {
	// A static policy's block is header and local state only: one read of
	// the whole block. An adaptive one also holds the remote section, which
	// stays on disk: read the header, then header and local state.
	if kind, ok := filterpolicy.KindOfMetaBlock(name); ok && !kind.Adaptive() {
		block = localBuffer(int(length))
		if _, err := file.ReadAt(block, off); err != nil {
			return nil, h, false, fmt.Errorf("%w: reading filter block: %w", ErrCorrupt, err)
		}
		if h, err = filterpolicy.ParseHeader(block); err != nil {
			t.filterErr = err
			return nil, h, false, nil
		}
	} else {
		var hb [filterpolicy.HeaderSize]byte
		if _, err := file.ReadAt(hb[:], off); err != nil {
			return nil, h, false, fmt.Errorf("%w: reading filter block header: %w", ErrCorrupt, err)
		}
		if h, err = filterpolicy.ParseHeader(hb[:]); err != nil {
			t.filterErr = err
			return nil, h, false, nil
		}
	}
	want := int64(h.LocalEnd())
	if h.HasRemote {
		want += int64(h.RemoteSize())
	}
	if want != length {
		t.filterErr = fmt.Errorf("%w: filter block length %d, header describes %d", filterpolicy.ErrCorruptBlock, length, want)
		return nil, h, false, nil
	}
	if block == nil {
		block = localBuffer(h.LocalEnd())
		if _, err := file.ReadAt(block, off); err != nil {
			return nil, h, false, fmt.Errorf("%w: reading filter block: %w", ErrCorrupt, err)
		}
	}
	return block[:h.LocalEnd()], h, true, nil
}

// localBuffer returns a buffer for n bytes of a filter block whose local
// state (after the block's header) starts a cache line: the filters query
// it in place, and a kind that lays its probing units out in cache-line
// multiples (the Prefix Filter's bins, the blocked Bloom filter's lines)
// then reads one line per unit (filter.AlignedBytes).
func localBuffer(n int) []byte { return filter.AlignedBytes(n, filterpolicy.HeaderSize) }

// metrics fills the filter's counters and sizes into m.
func (t *tableFilter) metrics(m *Metrics) {
	m.Adaptations = t.adaptations.Load()
	m.AdaptErrors = t.adaptErrors.Load()
	m.FixesDeferred = t.fixesDeferred.Load()
	m.FixesDropped = t.fixesDropped.Load()
	m.FalsePositivesCached = t.fpCached.Load()
	m.PreAdaptations = t.preAdaptations.Load()
	m.PreAdaptChecks = t.preAdaptChecks.Load()
	if t.filter != nil {
		m.FilterBytes = uint64(t.filter.SizeBytes() + t.fpCacheBytes())
		m.FilterKeys = t.hdr.NumKeys
	}
	if t.adaptive != nil {
		m.Rebuilds = t.adaptive.Stats().Rebuilds
	}
	if t.remote != nil {
		m.RemoteReads = t.remote.Reads()
	}
}

// falsePositive handles a lookup the filter answered "maybe" that found
// no version of key: an adaptive filter fixes it, now or through
// ReaderOptions.QueueFix (errors are counted; the lookup's answer stays
// right either way), or, when ReaderOptions.FixFalsePositive holds the
// fix back, the false-positive cache takes the key (if it is on).
func (r *Reader) falsePositive(key []byte) {
	t := &r.tableFilter
	if t.adaptive == nil {
		return
	}
	if t.fixGate != nil && !t.fixGate(key) {
		if t.fpCache.capacity > 0 {
			t.cacheFalsePositive(key)
			return
		}
		t.fixesDeferred.Add(1)
		return
	}
	r.startFix(key)
}

// returned handles a lookup the false-positive cache answered, under
// ReaderOptions.FixReturning: the key came back, so it leaves the cache
// and the filter is fixed for it. Only the lookup that takes the key out
// of the cache starts the fix; one that finds it gone (the fix is under
// way) does nothing more.
func (r *Reader) returned(key []byte) {
	if r.adaptive != nil && r.fpCache.remove(key) {
		r.startFix(key)
	}
}

// startFix fixes the filter for key, a false positive, now or through
// ReaderOptions.QueueFix.
func (r *Reader) startFix(key []byte) {
	t := &r.tableFilter
	if r.opts.QueueFix == nil {
		t.fix(key)
		return
	}
	k := bytes.Clone(key)
	if !r.opts.QueueFix(func() { r.fixQueued(k) }) {
		t.fixesDropped.Add(1)
	}
}

// fixQueued makes a fix QueueFix took. The filter may answer absent for
// the key by now (it came back and was queued again before the first fix
// ran, or another fix fixed it too): that false positive is fixed without
// a call to Adapt, and counted as the Get's own fix would have been, so
// every false positive let through is an adaptation, dropped, or an error,
// as with fixes made by the Get.
func (r *Reader) fixQueued(key []byte) {
	sh := r.enter()
	if sh == nil {
		return
	}
	defer r.exit(sh)
	if !r.filter.MayContain(key) {
		r.adaptations.Add(1)
		return
	}
	r.fix(key)
}

// fix adapts the filter to key, a false positive of the read path.
func (t *tableFilter) fix(key []byte) {
	if t.adapt(key) {
		t.adaptations.Add(1)
	}
}

// adapt adapts the filter to key, a false positive, and reports whether it
// did; a failure is counted and kept for LastAdaptError.
func (t *tableFilter) adapt(key []byte) bool {
	if err := t.adaptive.Adapt(key); err != nil {
		t.adaptErrors.Add(1)
		t.lastAdaptErr.Store(&err)
		return false
	}
	return true
}

// FilterError reports why the table's filter block could not be used (nil
// when it was loaded or the table has none).
func (t *tableFilter) FilterError() error { return t.filterErr }

// StateError reports why no saved adaptive state was loaded at Open (nil
// when it was, or when the filter is not adaptive or StatePath is empty).
// It wraps ErrNoState or ErrStateCorrupt.
func (t *tableFilter) StateError() error { return t.stateErr }

// LastAdaptError returns the last error an adaptation returned.
func (t *tableFilter) LastAdaptError() error {
	if p := t.lastAdaptErr.Load(); p != nil {
		return *p
	}
	return nil
}

// FilterKind is the registry name of the table's filter ("" for none).
func (t *tableFilter) FilterKind() string {
	if t.filter == nil {
		return ""
	}
	return filterpolicy.KindName(t.hdr.Code)
}

// Filter returns the in-memory filter (nil if the table has none).
func (t *tableFilter) Filter() filter.Filter { return t.filter }

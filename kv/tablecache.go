package kv

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/kv/internal/striped"
	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// tableCache keeps at most max tables open (more while readers hold them),
// closing an idle one the clock hand finds unused. Closing a reader saves
// its adaptive filter state (sstable.ReaderOptions.StatePath; never in a
// read-only store, which only loads it) and adds its counters to the
// running totals, so Metrics covers closed and deleted tables too.
//
// A lookup of an open table takes no lock: it reads an immutable snapshot of
// the map (republished under mu whenever a table opens or closes), takes a
// striped reference (kv/internal/striped) that fails once the entry was
// claimed for closing, and sets the entry's clock bit (a second-chance
// eviction instead of LRU list moves). Releasing drops the reference; only
// the release of a removed entry, or any release while the cache is over
// its size, takes the lock. Opening, eviction and closing stay under mu.
// A read that holds the table's metadata finds the entry in the metadata's
// slot instead of the map (getTable); a closing entry leaves its slots.
// See docs/ARCHITECTURE.md, "One read, end to end".
//
// The cache owns one reference to the block cache. closeAll closes the idle
// readers; a reader still in use (by an iterator left open at DB.Close) is
// closed by its last release, and the block cache reference is dropped once
// no reader is left, so a read never touches a released block cache.
type tableCache struct {
	fs       vfs.FS
	dir      string
	cache    *pebble.Cache
	max      int
	readOnly bool
	fixGate  func(key []byte) bool // sstable.ReaderOptions.FixFalsePositive; set before use
	cacheFPs bool                  // sstable.ReaderOptions.CacheFalsePositives; set before use
	// fixReturning is sstable.ReaderOptions.FixReturning; set before use.
	fixReturning bool
	// cachedReturn is sstable.ReaderOptions.CachedReturn; set before use.
	cachedReturn func(key []byte)
	fixes        *fixQueue // nil: fixes made by the Gets (Options.FixInline); set before use
	// fpProbes counts the false-positive probes of every reader the cache
	// opens (sstable.ReaderOptions.FalsePositives): DB.ReadCounts.
	fpProbes atomic.Uint64
	remote   *filterpolicy.RemoteCache // nil: none; set before use
	// unreserve gives the remote cache's bytes back to the block cache.
	unreserve func()

	// snap is a copy of m for lock-free lookups.
	snap atomic.Pointer[map[uint64]*tcEntry]
	// overfull: the last eviction left more than max tables open (all in
	// use), so releases take the lock to evict.
	overfull atomic.Bool

	mu        sync.Mutex
	m         map[uint64]*tcEntry
	clock     []*tcEntry // the entries of m, in the order the hand visits them
	hand      int
	closedSum sstable.Metrics
	// leaving holds the entries removed from m while in use (a deleted
	// table, or closeAll): metrics counts their readers until the last
	// release closes them and adds them to closedSum.
	leaving    map[*tcEntry]struct{}
	lastFilter map[uint64]filterSize // last known filter size of live tables not open
	closeErr   error
	closed     bool // closeAll ran: get fails with ErrClosed
	readers    int  // readers open or being opened, not yet closed
	// cacheReleased: the block cache reference was dropped (closed, and
	// no reader left).
	cacheReleased bool
}

type filterSize struct{ bytes, keys uint64 }

type tcEntry struct {
	fileNum uint64
	r       *sstable.Reader // set (with err) before opened; nil once closed
	err     error
	// refs counts the users; striped, so that lookups of one table from
	// several cores do not write one cache line. Closed (by claim, under
	// mu) when the reader is to be closed.
	refs   striped.RefCount
	used   atomic.Bool // clock bit: looked up since the hand last passed
	opened atomic.Bool // r or err is set and ready is closed
	gone   atomic.Bool // removed from the cache while in use: close on last release
	dead   bool        // claimed for closing (under mu)
	ready  chan struct{}
	// metas are the tables' metadata whose Open slot holds this entry
	// (getTable); closing the entry clears them (under mu).
	metas []*base.TableMeta
}

// tcHandle is a referenced entry: what get returns and release takes.
type tcHandle struct {
	*tcEntry
	ref striped.Ref
}

// claimLocked marks an unused entry for closing; false if it is in use or
// already claimed.
func (e *tcEntry) claimLocked() bool {
	if e.dead || !e.refs.CloseIfIdle() {
		return false
	}
	e.dead = true
	return true
}

func newTableCache(fs vfs.FS, dir string, cache *pebble.Cache, max int, readOnly bool) *tableCache {
	tc := &tableCache{fs: fs, dir: dir, cache: cache, max: max, readOnly: readOnly,
		m: make(map[uint64]*tcEntry), lastFilter: make(map[uint64]filterSize), leaving: make(map[*tcEntry]struct{})}
	tc.publishLocked()
	return tc
}

// publishLocked republishes the lookup snapshot from m.
func (tc *tableCache) publishLocked() {
	snap := make(map[uint64]*tcEntry, len(tc.m))
	for fn, e := range tc.m {
		snap[fn] = e
	}
	tc.snap.Store(&snap)
}

// addLocked puts e in m and on the clock.
func (tc *tableCache) addLocked(e *tcEntry) {
	tc.m[e.fileNum] = e
	tc.clock = append(tc.clock, e)
}

// removeLocked takes e out of m and off the clock.
func (tc *tableCache) removeLocked(e *tcEntry) {
	delete(tc.m, e.fileNum)
	if i := slices.Index(tc.clock, e); i >= 0 {
		tc.clock = slices.Delete(tc.clock, i, i+1)
		if tc.hand > i {
			tc.hand--
		}
	}
}

// get returns the open reader of table fn with a reference; release it.
// An open table is found without locking; the table is opened outside the
// cache's lock, and concurrent gets of the same table wait for the one open.
func (tc *tableCache) get(fn uint64) (tcHandle, error) {
	if e := (*tc.snap.Load())[fn]; e != nil && e.opened.Load() && e.err == nil {
		if ref, ok := e.refs.TryAcquire(); ok {
			return e.handle(ref), nil
		}
	}
	return tc.getSlow(fn)
}

// handle returns the handle of reference ref on e and sets e's clock bit
// (a load first: the bit is set already for a table in use).
func (e *tcEntry) handle(ref striped.Ref) tcHandle {
	if !e.used.Load() {
		e.used.Store(true)
	}
	return tcHandle{e, ref}
}

// getTable is get for the table t describes, found through t.Open while
// the table stays open: a read holding the metadata (a version's level)
// skips the map. An entry is put in a slot once it is open, by the get
// that found it in the map, and taken out when it closes, so a slot never
// keeps a closed reader's memory.
func (tc *tableCache) getTable(t *base.TableMeta) (tcHandle, error) {
	if e, _ := t.Open.Load().(*tcEntry); e != nil && !e.gone.Load() {
		if ref, ok := e.refs.TryAcquire(); ok {
			return e.handle(ref), nil
		}
	}
	h, err := tc.get(t.FileNum)
	if err == nil {
		tc.remember(t, h.tcEntry)
	}
	return h, err
}

// remember puts e, open and referenced by the caller, in t's slot, unless
// it is leaving the cache.
func (tc *tableCache) remember(t *base.TableMeta, e *tcEntry) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if cur, _ := t.Open.Load().(*tcEntry); cur == e || e.dead || e.gone.Load() {
		return
	}
	t.Open.Store(e)
	e.metas = append(e.metas, t)
}

// getSlow is get for a table not open (or opening, failed, or being closed).
func (tc *tableCache) getSlow(fn uint64) (tcHandle, error) {
	tc.mu.Lock()
	if tc.closed {
		tc.mu.Unlock()
		return tcHandle{}, ErrClosed
	}
	if e := tc.m[fn]; e != nil {
		// Entries in m are never claimed (claiming removes them, under mu).
		h := tcHandle{e, e.refs.Acquire()}
		e.used.Store(true)
		tc.mu.Unlock()
		<-e.ready
		if e.err != nil {
			tc.release(h)
			return tcHandle{}, e.err
		}
		return h, nil
	}
	e := &tcEntry{fileNum: fn, ready: make(chan struct{})}
	h := tcHandle{e, e.refs.Acquire()}
	tc.addLocked(e)
	tc.publishLocked()
	tc.readers++
	tc.mu.Unlock()

	// A read-only store loads the saved adaptive state (so earlier
	// adaptations hold) but never writes it. Every call on the reader holds
	// a reference (or runs under mu, as closeAll's SaveState), and the
	// reader is closed only once claimed idle, under mu: ClosedByOwner
	// spares each lookup the reader's own in-flight registration.
	ro := sstable.ReaderOptions{Cache: tc.cache, FileNum: fn,
		StatePath: tc.fs.PathJoin(tc.dir, stateFileName(fn)), StateReadOnly: tc.readOnly,
		ClosedByOwner: true, FixFalsePositive: tc.fixGate, RemoteCache: tc.remote, CacheFalsePositives: tc.cacheFPs,
		FixReturning: tc.fixReturning, CachedReturn: tc.cachedReturn, FalsePositives: &tc.fpProbes}
	if tc.fixes != nil {
		ro.QueueFix = func(fix func()) bool { return tc.queueFix(e, fix) }
	}
	r, err := sstable.Open(tc.fs, tc.fs.PathJoin(tc.dir, tableFileName(fn)), ro)
	if err != nil {
		err = fmt.Errorf("kv: open table %s: %w", tableFileName(fn), err)
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if err == nil && tc.closed {
		// closeAll ran during the open (and saved no state for it): the
		// reader was never used.
		_ = r.Close()
		r, err = nil, ErrClosed
	}
	e.r, e.err = r, err
	close(e.ready)
	e.opened.Store(true)
	if err != nil {
		tc.readerClosedLocked()
		// Forget the failed open, so that a later get retries it.
		if tc.m[fn] == e {
			tc.removeLocked(e)
			tc.publishLocked()
		}
		e.gone.Store(true)
		e.refs.Drop(h.ref)
		return tcHandle{}, err
	}
	tc.evictLocked()
	return h, nil
}

// release drops a reference taken by get. Only the last release of a
// removed entry, or any release while the cache is over its size, locks.
func (tc *tableCache) release(h tcHandle) {
	e := h.tcEntry
	e.refs.Drop(h.ref)
	if !e.gone.Load() && !tc.overfull.Load() {
		return
	}
	tc.mu.Lock()
	if e.gone.Load() && e.claimLocked() {
		tc.closeLocked(e)
	}
	tc.evictLocked()
	tc.mu.Unlock()
}

// evictLocked closes idle tables while more than max are open: the clock
// hand clears the bit of a recently used entry and closes an unused idle
// one (second chance). Entries in use or still opening are passed over;
// when a whole turn finds nothing to close, overfull makes releases retry.
func (tc *tableCache) evictLocked() {
	changed := false
	for idle := 0; len(tc.m) > tc.max && idle < 2*len(tc.clock); idle++ {
		if tc.hand >= len(tc.clock) {
			tc.hand = 0
		}
		e := tc.clock[tc.hand]
		if e.used.Load() {
			e.used.Store(false)
			tc.hand++
			continue
		}
		if !e.opened.Load() || e.err != nil || !e.claimLocked() {
			tc.hand++
			continue
		}
		tc.removeLocked(e)
		tc.closeLocked(e)
		changed, idle = true, 0
	}
	tc.overfull.Store(len(tc.m) > tc.max)
	if changed {
		tc.publishLocked()
	}
}

func (tc *tableCache) closeLocked(e *tcEntry) {
	for _, t := range e.metas {
		t.Open.CompareAndSwap(e, (*tcEntry)(nil))
	}
	e.metas = nil
	if e.r == nil {
		return // failed, closed or still opening
	}
	m := e.r.Metrics()
	addMetrics(&tc.closedSum, m)
	delete(tc.leaving, e)
	if !e.gone.Load() {
		tc.lastFilter[e.fileNum] = filterSize{m.FilterBytes, m.FilterKeys}
	}
	if err := e.r.Close(); err != nil && tc.closeErr == nil {
		tc.closeErr = err
	}
	e.r = nil
	tc.readerClosedLocked()
}

// readerClosedLocked counts a reader closed (or an open that failed) and
// releases the block cache once the cache is closed and no reader is left.
func (tc *tableCache) readerClosedLocked() {
	tc.readers--
	tc.releaseBlockCacheLocked()
}

// releaseBlockCacheLocked drops the block cache reference once the cache is
// closed and no reader is left.
func (tc *tableCache) releaseBlockCacheLocked() {
	if tc.closed && tc.readers == 0 && !tc.cacheReleased {
		tc.cacheReleased = true
		if tc.unreserve != nil {
			tc.unreserve()
		}
		tc.cache.Unref()
	}
}

// useRemoteCache sets up a cache of remote chunks of up to size bytes that
// every reader opened after it shares, taking its memory from the block
// cache as it fills (filterpolicy.RemoteCache.SetReserve).
func (tc *tableCache) useRemoteCache(size int64) {
	tc.remote = filterpolicy.NewRemoteCache(size)
	if tc.remote != nil {
		tc.remote.SetReserve(tc.cache.Reserve)
		tc.unreserve = tc.remote.Release
	}
}

// evict removes a deleted table: its reader is closed (now, or when its last
// user releases it).
func (tc *tableCache) evict(fn uint64) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	delete(tc.lastFilter, fn)
	e := tc.m[fn]
	if e == nil {
		return
	}
	tc.removeLocked(e)
	tc.publishLocked()
	e.gone.Store(true)
	if e.claimLocked() {
		tc.closeLocked(e)
	} else if e.r != nil {
		tc.leaving[e] = struct{}{}
	}
}

// closeAll closes the cache: later gets fail with ErrClosed. It closes
// every idle reader (saving its adaptive state) and saves the state of the
// readers still in use, which their last release closes; the block cache is
// released with the last reader. It returns the first close error met by
// the cache.
func (tc *tableCache) closeAll() error {
	tc.stopFixes()
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.closed {
		return tc.closeErr
	}
	tc.closed = true
	entries := slices.Clone(tc.clock)
	tc.m, tc.clock, tc.hand = map[uint64]*tcEntry{}, nil, 0
	tc.publishLocked()
	for _, e := range entries {
		e.gone.Store(true)
		if e.claimLocked() {
			tc.closeLocked(e)
		} else if e.r != nil {
			tc.leaving[e] = struct{}{}
			if !tc.readOnly {
				if err := e.r.SaveState(); err != nil && tc.closeErr == nil {
					tc.closeErr = err
				}
			}
		}
	}
	tc.releaseBlockCacheLocked()
	return tc.closeErr
}

// metrics returns the counters of every reader ever opened, and the filter
// size of the given live tables (open ones from their reader, others as last
// seen).
func (tc *tableCache) metrics(live []uint64) (sum sstable.Metrics, fBytes, fKeys uint64) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	sum = tc.closedSum
	for _, e := range tc.m {
		if e.r != nil {
			addMetrics(&sum, e.r.Metrics())
		}
	}
	for e := range tc.leaving {
		addMetrics(&sum, e.r.Metrics())
	}
	for _, fn := range live {
		if e := tc.m[fn]; e != nil && e.r != nil {
			m := e.r.Metrics()
			fBytes += m.FilterBytes
			fKeys += m.FilterKeys
		} else if fs, ok := tc.lastFilter[fn]; ok {
			fBytes += fs.bytes
			fKeys += fs.keys
		}
	}
	return sum, fBytes, fKeys
}

func addMetrics(dst *sstable.Metrics, m sstable.Metrics) {
	dst.FilterChecks += m.FilterChecks
	dst.FilterNegatives += m.FilterNegatives
	dst.FalsePositiveProbes += m.FalsePositiveProbes
	dst.TruePositiveProbes += m.TruePositiveProbes
	dst.DataBlockReads += m.DataBlockReads
	dst.Adaptations += m.Adaptations
	dst.Rebuilds += m.Rebuilds
	dst.RemoteReads += m.RemoteReads
	dst.PreAdaptations += m.PreAdaptations
	dst.PreAdaptChecks += m.PreAdaptChecks
	dst.FixesDeferred += m.FixesDeferred
	dst.FixesDropped += m.FixesDropped
	dst.FalsePositivesCached += m.FalsePositivesCached
	dst.CachedNegatives += m.CachedNegatives
}

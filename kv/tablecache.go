package kv

import (
	"container/list"
	"errors"
	"fmt"
	"sync"

	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// tableCache keeps at most max tables open (more while readers hold them),
// closing the least recently used idle one. Closing a reader saves its
// adaptive filter state (sstable.ReaderOptions.StatePath; never in a
// read-only store, which only loads it) and adds its
// counters to the running totals, so Metrics covers closed and deleted
// tables too.
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

	mu         sync.Mutex
	m          map[uint64]*tcEntry
	lru        list.List // of *tcEntry, most recent first
	closedSum  sstable.Metrics
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
	r       *sstable.Reader
	refs    int
	elem    *list.Element
	gone    bool          // removed from the cache while in use: close on last release
	ready   chan struct{} // closed once r or err is set
	err     error
}

func newTableCache(fs vfs.FS, dir string, cache *pebble.Cache, max int, readOnly bool) *tableCache {
	return &tableCache{fs: fs, dir: dir, cache: cache, max: max, readOnly: readOnly,
		m: make(map[uint64]*tcEntry), lastFilter: make(map[uint64]filterSize)}
}

// get returns the open reader of table fn with a reference; release it.
// The table is opened outside the cache's lock; concurrent gets of the same
// table wait for the one open.
func (tc *tableCache) get(fn uint64) (*tcEntry, error) {
	tc.mu.Lock()
	if tc.closed {
		tc.mu.Unlock()
		return nil, ErrClosed
	}
	if e := tc.m[fn]; e != nil {
		e.refs++
		tc.lru.MoveToFront(e.elem)
		tc.mu.Unlock()
		<-e.ready
		if e.err != nil {
			tc.release(e)
			return nil, e.err
		}
		return e, nil
	}
	e := &tcEntry{fileNum: fn, refs: 1, ready: make(chan struct{})}
	e.elem = tc.lru.PushFront(e)
	tc.m[fn] = e
	tc.readers++
	tc.mu.Unlock()

	// A read-only store loads the saved adaptive state (so earlier
	// adaptations hold) but never writes it.
	ro := sstable.ReaderOptions{Cache: tc.cache, FileNum: fn,
		StatePath: tc.fs.PathJoin(tc.dir, stateFileName(fn)), StateReadOnly: tc.readOnly}
	r, err := sstable.Open(tc.fs, tc.fs.PathJoin(tc.dir, tableFileName(fn)), ro)
	if err != nil {
		err = fmt.Errorf("kv: open table %s: %w", tableFileName(fn), corruptionErr(err))
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
	if err != nil {
		tc.readerClosedLocked()
		// Forget the failed open, so that a later get retries it.
		if tc.m[fn] == e {
			tc.lru.Remove(e.elem)
			delete(tc.m, fn)
		}
		e.gone = true
		e.refs--
		return nil, err
	}
	tc.evictLocked()
	return e, nil
}

func (tc *tableCache) release(e *tcEntry) {
	tc.mu.Lock()
	e.refs--
	if e.refs == 0 && e.gone {
		tc.closeLocked(e)
	}
	tc.evictLocked()
	tc.mu.Unlock()
}

func (tc *tableCache) evictLocked() {
	for el := tc.lru.Back(); el != nil && len(tc.m) > tc.max; {
		e := el.Value.(*tcEntry)
		prev := el.Prev()
		if e.refs == 0 {
			tc.lru.Remove(el)
			delete(tc.m, e.fileNum)
			tc.closeLocked(e)
		}
		el = prev
	}
}

func (tc *tableCache) closeLocked(e *tcEntry) {
	if e.r == nil {
		return // failed, closed or still opening
	}
	m := e.r.Metrics()
	addMetrics(&tc.closedSum, m)
	if !e.gone {
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
		tc.cache.Unref()
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
	tc.lru.Remove(e.elem)
	delete(tc.m, fn)
	e.gone = true
	if e.refs == 0 {
		tc.closeLocked(e)
	}
}

// closeAll closes the cache: later gets fail with ErrClosed. It closes
// every idle reader (saving its adaptive state) and saves the state of the
// readers still in use, which their last release closes; the block cache is
// released with the last reader. It returns the first close error met by
// the cache.
func (tc *tableCache) closeAll() error {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.closed {
		return tc.closeErr
	}
	tc.closed = true
	for fn, e := range tc.m {
		tc.lru.Remove(e.elem)
		delete(tc.m, fn)
		e.gone = true
		if e.refs == 0 {
			tc.closeLocked(e)
		} else if e.r != nil && !tc.readOnly {
			if err := e.r.SaveState(); err != nil && tc.closeErr == nil {
				tc.closeErr = err
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

// corruptionErr wraps table corruption reported by the sstable package with
// ErrCorruption too.
func corruptionErr(err error) error {
	if err != nil && errors.Is(err, sstable.ErrCorrupt) && !errors.Is(err, ErrCorruption) {
		return fmt.Errorf("%w: %w", ErrCorruption, err)
	}
	return err
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
}

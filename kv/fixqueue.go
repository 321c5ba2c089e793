package kv

import (
	"sync"
	"time"
)

// Fixes in the background: a Get that meets a false positive of an
// adaptive filter hands the fix (a read of the table's remote section and
// the adaptation) to one goroutine per store through a bounded queue and
// returns at once (sstable.ReaderOptions.QueueFix), so no Get waits for a
// fix's read, which on cold storage is a device read. The Get only appends
// to the queue: it does not wake the goroutine, which takes the queue every
// fixPollInterval while fixes come (a wake-up per fix, a futex call and a
// cross-core interrupt, cost the Get more than an in-memory fix) and sleeps
// once none came for fixParkAfter; the first fix after that wakes it. A key
// asked again before its fix runs costs its probe again; a fix that finds
// the queue full, or its table being closed, is dropped and counted
// (Metrics.FixesDropped), and the key is fixed when it comes back. Close
// runs the fixes still queued (at most fixQueueSize), so their
// adaptations are saved. Options.FixInline turns the queue off.

const (
	// fixQueueSize bounds the fixes waiting to run (about 40 bytes each
	// and the key).
	fixQueueSize = 1024
	// fixPollInterval is how often the goroutine takes the queue while
	// fixes come: what a fix may wait, beyond its own read.
	fixPollInterval = 200 * time.Microsecond
	// fixParkAfter is how long the goroutine polls an empty queue before
	// it sleeps until the next fix.
	fixParkAfter = 20 * time.Millisecond
)

// fixQueue is the table cache's queue of fixes and its goroutine.
type fixQueue struct {
	mu      sync.Mutex
	pending []queuedFix
	parked  bool // the goroutine waits on wake
	closed  bool // stopFixes ran: nothing more is queued, pending runs once more
	wake    chan struct{}
	done    chan struct{} // closed when the goroutine has ended
}

// queuedFix is a fix and the reference to its table that keeps the reader
// open until it has run. A zero h is a barrier (waitFixes).
type queuedFix struct {
	h   tcHandle
	fix func()
}

// startFixes starts the queue; before any table is opened.
func (tc *tableCache) startFixes() {
	q := &fixQueue{wake: make(chan struct{}, 1), done: make(chan struct{})}
	tc.fixes = q
	go tc.runFixes(q)
}

// push queues f, waking the goroutine if it sleeps; it refuses when the
// queue is closed, or full and not force.
func (q *fixQueue) push(f queuedFix, force bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || (len(q.pending) >= fixQueueSize && !force) {
		return false
	}
	q.pending = append(q.pending, f)
	if q.parked {
		q.parked = false
		q.wake <- struct{}{} // cap 1, and only the parked goroutine takes it
	}
	return true
}

// queueFix is the sstable.ReaderOptions.QueueFix of the reader of e.
func (tc *tableCache) queueFix(e *tcEntry, fix func()) bool {
	ref, ok := e.refs.TryAcquire() // held by the Get: fails only while closing
	if !ok {
		return false
	}
	h := tcHandle{e, ref}
	if !tc.fixes.push(queuedFix{h, fix}, false) {
		tc.release(h)
		return false
	}
	return true
}

func (tc *tableCache) runFixes(q *fixQueue) {
	defer close(q.done)
	var batch []queuedFix
	idleSince := time.Now()
	for {
		q.mu.Lock()
		batch, q.pending = q.pending, batch[:0]
		closed := q.closed
		if len(batch) == 0 && !closed && time.Since(idleSince) >= fixParkAfter {
			q.parked = true
			q.mu.Unlock()
			<-q.wake
			idleSince = time.Now()
			continue
		}
		q.mu.Unlock()
		for i, f := range batch {
			// At Close too: what a Get queued lands, as it would inline.
			f.fix()
			if f.h.tcEntry != nil { // not a barrier (waitFixes)
				tc.release(f.h)
			}
			batch[i] = queuedFix{}
		}
		if closed {
			return
		}
		if len(batch) > 0 {
			idleSince = time.Now()
		}
		time.Sleep(fixPollInterval)
	}
}

// stopFixes runs the fixes still queued, releases their tables and ends
// the goroutine (closeAll, before it closes the readers; not under mu, which
// releases may take).
func (tc *tableCache) stopFixes() {
	q := tc.fixes
	if q == nil {
		return
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		<-q.done
		return
	}
	q.closed = true
	if q.parked {
		q.parked = false
		q.wake <- struct{}{}
	}
	q.mu.Unlock()
	<-q.done
}

// waitFixes returns once every fix queued before the call has run (for
// tests that look at a filter's state right after the Gets that fixed it).
func (tc *tableCache) waitFixes() {
	if tc.fixes == nil {
		return
	}
	done := make(chan struct{})
	if tc.fixes.push(queuedFix{fix: func() { close(done) }}, true) {
		<-done
	}
}

// Package striped holds the store's counters that every read updates: a
// reference count (RefCount) and a plain counter (Counter), each striped
// over cache lines so that goroutines on different cores do not write the
// same line. A single shared word makes each update a cache-line transfer
// between cores; on the read path (a pinned read state and a table per
// Get) that cost kept two goroutines from reading faster than one. Each
// update goes to the caller's stripe (package internal/stripe).
//
// Closing a RefCount follows a store-then-load protocol on sequentially
// consistent atomics: an acquisition increments its stripe and then checks
// the closed flag; closing sets the flag and then sums the stripes. One of
// the two sees the other, so no acquisition succeeds on a count that the
// closer saw at zero.
package striped

import (
	"sync/atomic"

	"github.com/adaptkv/adaptkv/internal/stripe"
)

// Stripes is the number of stripes (a power of two): enough that the
// goroutines of a few cores rarely share one, few enough to sum quickly.
// Two goroutines whose hints share a stripe share it for their lives (the
// hint is their stack's address) on every striped counter at once; on 2
// cores such a pair read absent keys 3.5x slower (BenchmarkGetParallel:
// 322 ns instead of 73-92, one run in 6 with 8 stripes). With 32 the odds
// for two goroutines are 1 in 32, at 2 KiB per counter.
const Stripes = 32

const stripes = Stripes

// cacheLine is the size of the cache line that stripes must not share.
const cacheLine = 64

type line struct {
	n atomic.Int64
	_ [cacheLine - 8]byte // one cache line per stripe
}

// Counter is a striped counter. The zero Counter is zero.
//
// The leading pad keeps the first stripe's word off the cache line of
// whatever precedes the Counter in its enclosing struct (Go aligns structs
// to 8 bytes, not 64): without it, the goroutines counting into stripe 0
// would invalidate a line that others read on every lookup (a table cache
// entry's reader, the sketch's sets). Each stripe's word starts its 64
// bytes, so the line holding the last one ends within the Counter too.
type Counter struct {
	_ [cacheLine]byte
	s [stripes]line
}

// Add adds d to the caller's stripe and returns that stripe's new value
// (a threshold on the total can be checked, cheaply, once a stripe holds
// its share of it).
func (c *Counter) Add(d int64) int64 { return c.s[stripe.Hint()&(stripes-1)].n.Add(d) }

// Reset sets the counter to zero; adds racing with it may be lost.
func (c *Counter) Reset() {
	for i := range c.s {
		c.s[i].n.Store(0)
	}
}

// Load returns the sum of the stripes.
func (c *Counter) Load() int64 {
	var n int64
	for i := range c.s {
		n += c.s[i].n.Load()
	}
	return n
}

// RefCount is a striped reference count with a closed flag. The zero
// RefCount is open and holds no reference. Counts closed for good (Close)
// run their OnFree function once, when the last reference is dropped;
// counts closed only when idle (CloseIfIdle) are decided by their owner.
type RefCount struct {
	c      Counter
	closed atomic.Bool
	freed  atomic.Bool
	onFree func()
}

// Ref is one reference: drop it with Release or Drop.
type Ref uint8

// OnFree sets the function run, once, when a count closed by Close holds
// no reference. Set it before the count is shared.
func (rc *RefCount) OnFree(f func()) { rc.onFree = f }

// Acquire takes a reference whether or not the count is closed.
func (rc *RefCount) Acquire() Ref {
	r := Ref(stripe.Hint() & (stripes - 1))
	rc.c.s[r].n.Add(1)
	return r
}

// TryAcquire takes a reference unless the count is closed. A failed
// attempt may be what the count waited for (its momentary increment hid
// the last Release's zero), so it checks for zero too.
func (rc *RefCount) TryAcquire() (Ref, bool) {
	r := rc.Acquire()
	if rc.closed.Load() {
		rc.c.s[r].n.Add(-1)
		rc.tryFree()
		return 0, false
	}
	return r, true
}

// Release drops r; the last reference of a count closed by Close runs
// OnFree. Counts closed with CloseIfIdle use Drop instead (Release would
// take that momentary close for a final one).
func (rc *RefCount) Release(r Ref) {
	rc.c.s[r].n.Add(-1)
	if rc.closed.Load() {
		rc.tryFree()
	}
}

// Drop drops r and does nothing else: for counts whose owner closes them
// with CloseIfIdle under its own lock.
func (rc *RefCount) Drop(r Ref) { rc.c.s[r].n.Add(-1) }

// Close closes the count for good: TryAcquire fails from now on, and
// OnFree runs once no reference is left (now, or at the last Release).
func (rc *RefCount) Close() {
	rc.closed.Store(true)
	rc.tryFree()
}

// CloseIfIdle closes the count for good if no reference is held, and
// reports whether it did. The owner serializes its calls (a lock) and
// calls it at most until it succeeds; OnFree is not run. A TryAcquire
// racing with it may fail even when it returns false.
func (rc *RefCount) CloseIfIdle() bool {
	rc.closed.Store(true)
	if rc.c.Load() == 0 {
		rc.freed.Store(true)
		return true
	}
	rc.closed.Store(false)
	return false
}

// tryFree runs OnFree if the count is closed for good, at zero, and this
// is the first call to see it so. A count momentarily closed by
// CloseIfIdle has no OnFree.
func (rc *RefCount) tryFree() {
	if rc.onFree != nil && rc.c.Load() == 0 && rc.freed.CompareAndSwap(false, true) {
		rc.onFree()
	}
}

// Held returns the number of references held (exact when no acquisition
// or release is in flight).
func (rc *RefCount) Held() int64 { return rc.c.Load() }

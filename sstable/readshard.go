package sstable

// The stripes of a Reader's in-flight lookups and per-lookup counters.

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/adaptkv/adaptkv/internal/stripe"
)

// readShard is one stripe of a Reader's in-flight lookups and per-lookup
// counters, alone on its cache line. A lookup adds itself to inFlight of
// one stripe (picked by shardFor: the same stripe for the same goroutine,
// usually different ones for different goroutines), checks closed, counts
// into the same stripe, and removes itself when done. Close sets closed
// and waits until every stripe's inFlight is zero: with sequentially
// consistent atomics a lookup either is seen by that wait or sees closed.
type readShard struct {
	inFlight        atomic.Int64
	filterNegatives atomic.Uint64
	cachedNegatives atomic.Uint64
	fpProbes        atomic.Uint64
	tpProbes        atomic.Uint64
	_               [cacheLine - 5*8]byte
}

// maxReadShards bounds the stripes per Reader (64 bytes each).
const maxReadShards = 64

// numReadShards is the stripe count for GOMAXPROCS procs: a power of two
// of about sixteen stripes per proc, so that goroutines running at once
// rarely share one. Two goroutines whose hints share a stripe keep
// sharing it for their lives (the hint is their stack's address), and on
// 2 cores such a pair read absent keys 3.5x slower (BenchmarkGetParallel
// in kv: 322 ns instead of 73-92, in one run of 6 with 8 stripes); with
// 32 the odds for two goroutines are 1 in 32 instead of 1 in 8.
func numReadShards(procs int) int {
	n := 1
	for n < 16*procs && n < maxReadShards {
		n <<= 1
	}
	return n
}

// shardFor returns the calling goroutine's stripe (see package stripe).
func (r *Reader) shardFor() *readShard {
	return &r.shards[uintptr(stripe.Hint())&r.shardMask]
}

// enter registers a lookup; it returns nil if the Reader is closed. The
// caller passes the stripe to exit when done. With ClosedByOwner nothing
// is registered (the owner keeps Close from running concurrently): the
// stripe is only where the lookup counts.
func (r *Reader) enter() *readShard {
	s := r.shardFor()
	if r.opts.ClosedByOwner {
		if r.closed.Load() {
			return nil
		}
		return s
	}
	s.inFlight.Add(1)
	if r.closed.Load() {
		s.inFlight.Add(-1)
		return nil
	}
	return s
}

// exit ends a lookup entered on stripe s.
func (r *Reader) exit(s *readShard) {
	if !r.opts.ClosedByOwner {
		s.inFlight.Add(-1)
	}
}

// waitLookups waits until no lookup is in flight. Lookups are short, but
// one that adapts reads the remote representation from the file, so the
// wait yields, then sleeps.
func (r *Reader) waitLookups() {
	for spin := 0; ; spin++ {
		var n int64
		for i := range r.shards {
			n += r.shards[i].inFlight.Load()
		}
		if n == 0 {
			return
		}
		if spin < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(min(time.Duration(spin-63)*10*time.Microsecond, time.Millisecond))
		}
	}
}

package kv

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// readGate counts the reads in flight (Gets, and iterator constructions) so
// that Close can wait for them before it closes the table cache, without a
// lock on the read path: a read adds itself to one of several striped
// counters (the same stripe for the same goroutine, usually different ones
// for different goroutines, so concurrent reads rarely write one cache
// line), then checks the closed flag; Close sets the flag, then waits until
// every stripe is zero. With sequentially consistent atomics a read either
// is seen by that wait or sees the flag and fails with ErrClosed.
type readGate struct {
	closed  atomic.Bool
	stripes []gateStripe // len is a power of two
	mask    uintptr
}

// cacheLine is the padding unit keeping stripes on separate cache lines.
const cacheLine = 64

type gateStripe struct {
	inFlight atomic.Int64
	_        [cacheLine - 8]byte
}

func newReadGate() *readGate {
	n := 1
	for n < 4*runtime.GOMAXPROCS(0) && n < 64 {
		n <<= 1
	}
	return &readGate{stripes: make([]gateStripe, n), mask: uintptr(n - 1)}
}

// enter registers a read; it returns nil once the gate is closed. The
// caller passes the stripe to exit when done. The stripe hint is the
// address of a local variable: goroutine stacks are disjoint, so it is
// stable for one goroutine and differs between goroutines (a collision
// only costs speed).
func (g *readGate) enter() *gateStripe {
	var marker byte
	h := uint64(uintptr(unsafe.Pointer(&marker))>>11) * 0x9E3779B97F4A7C15
	s := &g.stripes[uintptr(h>>32)&g.mask]
	s.inFlight.Add(1)
	if g.closed.Load() {
		s.inFlight.Add(-1)
		return nil
	}
	return s
}

func (s *gateStripe) exit() { s.inFlight.Add(-1) }

// close makes later enters fail.
func (g *readGate) close() { g.closed.Store(true) }

// wait returns once no read entered before close is in flight. Reads are
// short (one may read a filter's remote representation to adapt), so it
// yields, then sleeps.
func (g *readGate) wait() {
	for spin := 0; ; spin++ {
		var n int64
		for i := range g.stripes {
			n += g.stripes[i].inFlight.Load()
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

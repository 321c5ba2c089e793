package seqlock

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// pair is data with an invariant (a == b) that writers break while they
// write.
type pair struct {
	l    Lock
	a, b atomic.Uint64
}

func (p *pair) write(v uint64) {
	p.l.BeginWrite()
	p.a.Store(v)
	p.b.Store(v)
	p.l.EndWrite()
}

func (p *pair) read() [2]uint64 { return [2]uint64{p.a.Load(), p.b.Load()} }

// TestReadSeesWholeWrites: readers never act on a half-written pair
// while two writers keep writing (run with -race).
func TestReadSeesWholeWrites(t *testing.T) {
	var p pair
	var stop atomic.Bool
	var torn, reads atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if v := Read(&p.l, p.read); v[0] != v[1] {
					torn.Add(1)
				}
				reads.Add(1)
			}
		}()
	}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20_000 {
				p.write(uint64(2*i + w))
			}
		}()
	}
	for reads.Load() < 1000 {
		p.write(1)
	}
	stop.Store(true)
	wg.Wait()
	require.Zero(t, torn.Load())
	require.Equal(t, uint64(0), p.l.Seq()%2, "no write in progress")
}

// TestReadWaitsForWriteInProgress: a reader that meets a write in
// progress on every try waits for it (hold) and returns the written
// state, not a guess or a torn one.
func TestReadWaitsForWriteInProgress(t *testing.T) {
	var p pair
	p.l.BeginWrite()
	p.a.Store(7) // half written: b is still 0
	got := make(chan [2]uint64)
	go func() { got <- Read(&p.l, p.read) }()
	for range 2 * Tries { // the reader's tries pass while the write is open
		select {
		case v := <-got:
			require.FailNow(t, "read returned during a write", "%v", v)
		default:
		}
		runtime.Gosched() // let the reader try
	}
	p.b.Store(7)
	p.l.EndWrite()
	require.Equal(t, [2]uint64{7, 7}, <-got)
	require.Equal(t, uint64(2), p.l.Seq())

	// A reader that gave up on lock-free reads keeps writers off.
	p.l.mu.Lock()
	done := make(chan struct{})
	go func() { p.write(9); close(done) }()
	runtime.Gosched()
	require.Equal(t, [2]uint64{7, 7}, p.read())
	p.l.mu.Unlock()
	<-done
	require.Equal(t, [2]uint64{9, 9}, Read(&p.l, p.read))
}

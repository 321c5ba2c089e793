package striped

import (
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func TestCounter(t *testing.T) {
	var c Counter
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10_000; i++ {
				require.Positive(t, c.Add(2))
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(8*10_000*2), c.Load())
	c.Reset()
	require.Zero(t, c.Load())
}

// TestRefCountClose: goroutines take and drop references while the count
// is closed; no TryAcquire succeeds after Close, and OnFree runs exactly
// once, after every reference is gone.
func TestRefCountClose(t *testing.T) {
	for trial := 0; trial < 500; trial++ {
		var rc RefCount
		var frees, held atomic.Int64
		rc.OnFree(func() {
			require.Zero(t, held.Load(), "freed while held")
			frees.Add(1)
		})
		owner := rc.Acquire()
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					r, ok := rc.TryAcquire()
					if !ok {
						continue
					}
					held.Add(1)
					require.Zero(t, frees.Load(), "acquired a freed count")
					held.Add(-1)
					rc.Release(r)
				}
			}()
		}
		rc.Close()
		rc.Release(owner)
		wg.Wait()
		require.Equal(t, int64(1), frees.Load(), "trial %d", trial)
		require.Zero(t, rc.Held())
		_, ok := rc.TryAcquire()
		require.False(t, ok)
	}
}

// TestCloseIfIdle: an idle count closes, a held one does not and stays
// usable.
func TestCloseIfIdle(t *testing.T) {
	var rc RefCount
	r := rc.Acquire()
	require.False(t, rc.CloseIfIdle())
	r2, ok := rc.TryAcquire()
	require.True(t, ok)
	rc.Drop(r)
	rc.Drop(r2)
	require.True(t, rc.CloseIfIdle())
	_, ok = rc.TryAcquire()
	require.False(t, ok)
}

// TestLayout: every stripe's word has a cache line of its own within the
// Counter, wherever the Counter starts: at least a line's worth of bytes
// of the Counter before the first word and after each word.
func TestLayout(t *testing.T) {
	var c Counter
	base := uintptr(unsafe.Pointer(&c))
	size := unsafe.Sizeof(c)
	for i := range c.s {
		off := uintptr(unsafe.Pointer(&c.s[i].n)) - base
		require.GreaterOrEqual(t, off, uintptr(cacheLine-8), "stripe %d: bytes before", i)
		require.GreaterOrEqual(t, size-off, uintptr(cacheLine), "stripe %d: bytes after", i)
		if i > 0 {
			require.Equal(t, uintptr(cacheLine), uintptr(unsafe.Pointer(&c.s[i].n))-uintptr(unsafe.Pointer(&c.s[i-1].n)))
		}
	}
	// A RefCount's other words come after its stripes.
	var rc RefCount
	last := uintptr(unsafe.Pointer(&rc.c.s[stripes-1].n))
	require.GreaterOrEqual(t, uintptr(unsafe.Pointer(&rc.closed))-last, uintptr(cacheLine))
}

package freelist

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGetPut: an empty list has nothing; values come back last in, first
// out; Put refuses past the bound and keeps nothing with a bound of 0.
func TestGetPut(t *testing.T) {
	l := New[int](3)
	_, ok := l.Get()
	require.False(t, ok)
	for v := 1; v <= 3; v++ {
		require.True(t, l.Put(v))
	}
	require.False(t, l.Put(4), "past the bound")
	require.Equal(t, 3, l.Len())
	for want := 3; want >= 1; want-- {
		v, ok := l.Get()
		require.True(t, ok)
		require.Equal(t, want, v)
	}
	_, ok = l.Get()
	require.False(t, ok)
	require.Equal(t, 0, l.Len())

	none := New[[]byte](0)
	require.False(t, none.Put(make([]byte, 1)))
	require.Equal(t, 0, none.Len())
}

// TestGetDropsReference: a value handed out is no longer held in the
// list's backing array (so a dropped buffer can be collected).
func TestGetDropsReference(t *testing.T) {
	l := New[*int](2)
	x := new(int)
	require.True(t, l.Put(x))
	got, ok := l.Get()
	require.True(t, ok)
	require.Same(t, x, got)
	require.Nil(t, l.free[:1][0])
}

// TestConcurrent: goroutines getting and putting never see a value twice
// at once nor exceed the bound (run with -race).
func TestConcurrent(t *testing.T) {
	const max, goroutines, rounds = 4, 8, 2000
	l := New[*int](max)
	var mu sync.Mutex
	inUse := map[*int]bool{}
	var wg sync.WaitGroup
	errs := make(chan string, goroutines)
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				v, ok := l.Get()
				if !ok {
					v = new(int)
				}
				mu.Lock()
				if inUse[v] {
					errs <- "a value was handed out twice"
					mu.Unlock()
					return
				}
				inUse[v] = true
				mu.Unlock()
				if n := l.Len(); n > max {
					errs <- "the list passed its bound"
					return
				}
				mu.Lock()
				delete(inUse, v)
				mu.Unlock()
				l.Put(v)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	require.LessOrEqual(t, l.Len(), max)
}

package knownneg

import (
	"sync"
	"testing"

	"github.com/adaptkv/adaptkv/kv/internal/striped"
	"github.com/stretchr/testify/require"
)

// TestWindow: with SetWindow, Record counts only between OpenWindow and
// about the window's weight later (up to the checks' lateness), and an
// OpenWindow restarts the window from then. Seen is not windowed.
func TestWindow(t *testing.T) {
	const capacity, window = 1024, 4096
	s := New(capacity, NoSampling)
	s.SetWindow(window)
	require.False(t, s.Recording(), "closed until opened")
	s.Record(key(1))
	require.Zero(t, s.Len(), "nothing recorded while closed")

	s.OpenWindow()
	n := 0
	for ; s.Recording(); n++ {
		s.Record(key(n % 100))
	}
	// Each Record weighs 1; age checks every period/agingChecks of a
	// stripe's weight, and the close comes at the first check past the
	// end: up to striped.Stripes steps late.
	step := agingPeriod * s.Capacity() / agingChecks
	require.GreaterOrEqual(t, n, window)
	require.LessOrEqual(t, n, window+striped.Stripes*step)
	before := s.total()
	for i := range 1000 {
		s.Record(key(i))
	}
	require.Equal(t, before, s.total(), "no weight counted after the window")
	require.False(t, s.Seen(key(5000)), "Seen is not windowed")
	require.True(t, s.Contains(key(5000)))

	require.True(t, s.OpenWindow())
	require.True(t, s.Recording())
	s.Record(key(7000))
	require.True(t, s.Contains(key(7000)), "recorded in the new window")
}

// TestWindowReopenedWhileClosing: OpenWindow calls racing Record's
// closing checks never leave the window closed before its weight is
// counted: once the goroutines are done, a window whose end the counted
// weight has not reached is open. Run with -race.
func TestWindowReopenedWhileClosing(t *testing.T) {
	s := New(64, NoSampling) // checks every weight of 2 a stripe
	s.SetWindow(16)
	for round := range 300 {
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 200 {
					s.Record(key(g*1000 + i))
				}
			}()
		}
		for range 20 {
			s.OpenWindow() // false while a miss holds the lock: the window then stays as it is
		}
		wg.Wait()
		if s.total() < s.windowEnd {
			require.True(t, s.Recording(), "round %d: closed with its weight not counted", round)
		}
	}
}

// TestWindowNotSet: a sketch without SetWindow records whatever
// OpenWindow is called or not.
func TestWindowNotSet(t *testing.T) {
	s := New(64, NoSampling)
	require.True(t, s.OpenWindow())
	require.True(t, s.Recording())
	s.Record(key(1))
	require.True(t, s.Contains(key(1)), "a sketch without SetWindow always records")
}

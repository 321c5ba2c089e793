package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// slowFake is a fake store whose Get takes getTime and whose accounting
// after a Get (AfterGet) takes afterTime, both spent on the CPU.
type slowFake struct {
	*fakeStore
	getTime, afterTime time.Duration
}

// spin keeps the CPU busy for d.
func spin(d time.Duration) {
	for end := monotonic() + d; monotonic() < end; {
	}
}

func (s *slowFake) Get(key []byte) (bool, error) {
	spin(s.getTime)
	return s.fakeStore.Get(key)
}

func (s *slowFake) AfterGet([]byte, bool) error {
	spin(s.afterTime)
	return nil
}

const (
	slowGet   = 20 * time.Microsecond
	slowAfter = 200 * time.Microsecond
)

func init() {
	open := func(cfg StoreConfig) (Store, error) {
		s, err := openFake(cfg, false)
		if err != nil {
			return nil, err
		}
		return &slowFake{fakeStore: s.(*fakeStore), getTime: slowGet, afterTime: slowAfter}, nil
	}
	extraStores["fakeslow"], extraStores["fakeslow2"] = open, open
}

// TestOpsPerSecCountsStoreCalls: ops/s is operations per second of the
// store's calls. A store whose Gets take 20 us and whose accounting after
// each takes 200 us runs 500 absent Gets in 10 ms of its own time: the
// reported time is at least that, and far from the 110 ms the worker
// spends (below 60 ms). Taking turns with another store, a worker's waits for its turn
// are not taken off either (that would leave nothing, or less).
func TestOpsPerSecCountsStoreCalls(t *testing.T) {
	const ops = 500
	// At most half the accounting's time on top of the Gets': the fake's
	// own work (slower under -race) is the store's, the accounting is not.
	lo, hi := (ops * slowGet).Seconds(), (ops * (slowGet + slowAfter/2)).Seconds()
	args := []string{"-workloads", "negzipf", "-records", "1000", "-ops", "500", "-calibrate", "50"}
	for _, stores := range []struct{ policies, interleave string }{
		{"fakeslow", "0"},
		{"fakeslow,fakeslow2", "50"},
	} {
		_, results, _ := runJSON(t, append(args, "-policies", stores.policies, "-interleave", stores.interleave)...)
		require.NotEmpty(t, results)
		for _, r := range results {
			require.Equal(t, uint64(ops), r.Gets, r.Policy)
			require.GreaterOrEqual(t, r.Seconds, lo, "%s, -interleave %s: the Gets' own time", r.Policy, stores.interleave)
			require.Less(t, r.Seconds, hi, "%s, -interleave %s: kvbench's and the accounting's time is not the store's",
				r.Policy, stores.interleave)
			require.InDelta(t, float64(ops)/r.Seconds, r.OpsPerSec, 1e-9*r.OpsPerSec)
		}
	}
}

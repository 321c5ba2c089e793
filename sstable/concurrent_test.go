package sstable

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestConcurrentGetsWhileAdapting has many goroutines look up stored and
// absent keys on one table while its filter adapts (and its state is saved):
// no stored key is ever reported missing. Run it under -race.
func TestConcurrentGetsWhileAdapting(t *testing.T) {
	n, queries, workers := 30_000, 40_000, 8
	if testing.Short() {
		n, queries = 10_000, 10_000
	}
	for _, name := range []string{"taf", "exaf"} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeTable(t, fs, "t.sst", mustPolicy(t, name, 21), n)
			r, err := Open(fs, "t.sst", ReaderOptions{Cache: pebble.NewCache(1 << 20), StatePath: "t.state"})
			require.NoError(t, err)
			var wg sync.WaitGroup
			errs := make(chan error, workers+1)
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; i < queries; i++ {
						j := (i*7919 + w*104729) % n
						v, ok, err := r.Get(storedKey(j))
						if err != nil || !ok || string(v) != string(value(j)) {
							errs <- errorf("stored key %d: ok=%v err=%v", j, ok, err)
							return
						}
						// Workers share absent keys, so the same false
						// positive is often adapted concurrently.
						if _, ok, err := r.Get(absentKey((i * 31) % (4 * n))); err != nil || ok {
							errs <- errorf("absent key: ok=%v err=%v", ok, err)
							return
						}
					}
				}(w)
			}
			var stop atomic.Bool
			saved := make(chan int)
			go func() {
				saves := 0
				for !stop.Load() {
					if err := r.SaveState(); err != nil {
						errs <- err
						break
					}
					saves++
					time.Sleep(time.Millisecond)
				}
				saved <- saves
			}()
			wg.Wait()
			stop.Store(true)
			require.Positive(t, <-saved)
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			m := r.Metrics()
			t.Logf("%s: %d adaptations, %d adapt errors, %d fp probes", name, m.Adaptations, m.AdaptErrors, m.FalsePositiveProbes)
			require.Positive(t, m.Adaptations)
			require.NoError(t, r.Close())

			r, err = Open(fs, "t.sst", ReaderOptions{StatePath: "t.state"})
			require.NoError(t, err)
			require.NoError(t, r.StateError())
			checkAllStored(t, r, n)
			require.NoError(t, r.Close())
		})
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

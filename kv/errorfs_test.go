package kv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// TestInjectedErrors fails random file operations (errorfs) while writing,
// flushing, compacting and reading: every failure is a returned error
// (nothing panics, no Get returns a wrong value), and after the faults stop
// and the store is reopened every acknowledged write is there.
func TestInjectedErrors(t *testing.T) {
	for run := 0; run < 4; run++ {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			seed := uint64(time.Now().UnixNano()) + uint64(run)
			mem := vfs.NewMem()
			var on atomic.Bool
			var mu sync.Mutex
			rng := rand.New(rand.NewPCG(seed, 11))
			injRng := rand.New(rand.NewPCG(seed, 12)) // used under mu
			inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
				if !on.Load() {
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				if injRng.IntN(300) == 0 {
					return errorfs.ErrInjected
				}
				return nil
			})
			fs := errorfs.Wrap(mem, inj)
			opts := &Options{FS: fs, MemTableSize: 16 << 10, L0CompactionThreshold: 2, TargetFileSize: 8 << 10, MaxOpenFiles: 4}
			acked := map[string]string{}
			attempted := map[string]bool{}
			var failures int
			verify := func(db *DB) {
				for k, v := range acked {
					got, err := db.Get([]byte(k))
					require.NoError(t, err, "seed %d: acknowledged key %s lost", seed, k)
					// The last acknowledged value, or a later attempted one
					// (a failed write may still have reached the WAL).
					if string(got) != v {
						var gi, vi int
						fmt.Sscanf(string(got), "v%d", &gi)
						fmt.Sscanf(v, "v%d", &vi)
						require.Greater(t, gi, vi, "seed %d key %s: older value resurfaced", seed, k)
					}
				}
				it, err := db.NewIter(nil)
				require.NoError(t, err)
				for ok := it.First(); ok; ok = it.Next() {
					require.True(t, attempted[string(it.Key())], "phantom key %q", it.Key())
				}
				require.NoError(t, it.Close())
			}
			i := 0
			for epoch := 0; epoch < 8; epoch++ {
				db, err := Open("db", opts)
				require.NoError(t, err, "seed %d epoch %d: reopen after faults", seed, epoch)
				verify(db)
				on.Store(true)
				for n := 0; n < 400; n, i = n+1, i+1 {
					k := fmt.Sprintf("key%05d", rng.IntN(1000))
					v := fmt.Sprintf("v%d", i)
					var err error
					switch r := rng.IntN(100); {
					case r < 70:
						attempted[k] = true
						err = db.Set([]byte(k), []byte(v), Sync)
						if err == nil {
							acked[k] = v
						}
					case r < 72:
						err = db.Flush()
					case r < 73:
						err = db.Compact(nil, nil)
					default:
						got, gerr := db.Get([]byte(k))
						if gerr == nil {
							require.Contains(t, string(got), "v", "seed %d", seed)
						} else if !errors.Is(gerr, ErrNotFound) {
							require.ErrorIs(t, gerr, errorfs.ErrInjected, "seed %d", seed)
						}
					}
					if err != nil {
						failures++
						require.ErrorIs(t, err, errorfs.ErrInjected, "seed %d op %d", seed, i)
					}
				}
				on.Store(false)
				_ = db.Close() // may report the sticky error
			}
			db, err := Open("db", &Options{FS: mem})
			require.NoError(t, err)
			verify(db)
			require.NoError(t, db.Close())
			t.Logf("seed %d: %d failed operations, %d acknowledged keys", seed, failures, len(acked))
			require.Positive(t, failures)
		})
	}
}

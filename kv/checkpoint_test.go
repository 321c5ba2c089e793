package kv

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestCheckpoint: checkpoints taken while two writers write open as stores
// that hold every write acknowledged before the call, and for each writer
// a prefix of its writes (one moment of the store); the adaptive state and
// the known negatives go along; the original goes on unchanged.
func TestCheckpoint(t *testing.T) {
	for _, onDisk := range []bool{false, true} {
		t.Run(fmt.Sprintf("disk=%v", onDisk), func(t *testing.T) {
			fs, dir := vfs.FS(vfs.NewMem()), "db"
			if onDisk {
				fs, dir = vfs.Default, t.TempDir()+"/db"
			}
			db, err := Open(dir, &Options{FS: fs, MemTableSize: 64 << 10, FilterPolicy: "aprefix", RecordAbsent: RecordAlways})
			require.NoError(t, err)
			for i := range 20_000 {
				require.NoError(t, db.Set(stateTestKey(i), []byte("v"), NoSync))
			}
			require.NoError(t, db.Compact(nil, nil))
			for i := range 20_000 { // false positives to fix, and known negatives
				_, err := db.Get(stateTestKey(20_000 + i%2000))
				require.ErrorIs(t, err, ErrNotFound)
			}
			db.tc.waitFixes()
			require.Positive(t, db.Metrics().Adaptations)

			var acked [2]atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for g := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if err := db.Set(fmt.Appendf(nil, "w%d-%08d", g, i), fmt.Appendf(nil, "%d", i), NoSync); err != nil {
							return
						}
						acked[g].Store(int64(i + 1))
					}
				}()
			}
			var before [2]int64
			for i := range 3 {
				for g := range 2 {
					for w := acked[g].Load(); acked[g].Load() < w+500; {
						runtime.Gosched() // let the writers get ahead
					}
					before[g] = acked[g].Load()
				}
				cp := fmt.Sprintf("%s-cp%d", dir, i)
				require.NoError(t, db.Checkpoint(cp))
				require.ErrorIs(t, db.Checkpoint(cp), ErrCheckpointExists)

				c, err := Open(cp, &Options{FS: fs, FilterPolicy: "aprefix"})
				require.NoError(t, err)
				for g := range 2 {
					n := int64(0) // this writer's writes in the checkpoint: a prefix
					for ; ; n++ {
						v, err := c.Get(fmt.Appendf(nil, "w%d-%08d", g, n))
						if errors.Is(err, ErrNotFound) {
							break
						}
						require.NoError(t, err)
						require.Equal(t, fmt.Sprint(n), string(v))
					}
					require.GreaterOrEqual(t, n, before[g], "writer %d: acknowledged writes missing", g)
					for k := n + 1; k < n+50; k++ {
						_, err := c.Get(fmt.Appendf(nil, "w%d-%08d", g, k))
						require.ErrorIs(t, err, ErrNotFound, "writer %d: a hole before %d", g, k)
					}
				}
				for j := 0; j < 20_000; j += 97 {
					_, err := c.Get(stateTestKey(j))
					require.NoError(t, err)
				}
				// Adapted: the fixed absent keys cost (nearly) no probe.
				m0 := c.Metrics()
				require.Positive(t, m0.KnownNegatives, "known negatives copied")
				for j := range 2000 {
					_, err := c.Get(stateTestKey(20_000 + j))
					require.ErrorIs(t, err, ErrNotFound)
				}
				require.LessOrEqual(t, c.Metrics().FalsePositiveProbes-m0.FalsePositiveProbes, uint64(2))
				require.NoError(t, c.Close())
			}
			close(stop)
			wg.Wait()
			require.NoError(t, db.Close())

			// The original is whole.
			db, err = Open(dir, &Options{FS: fs, FilterPolicy: "aprefix"})
			require.NoError(t, err)
			for g := range 2 {
				for k := int64(0); k < acked[g].Load(); k += 37 {
					v, err := db.Get(fmt.Appendf(nil, "w%d-%08d", g, k))
					require.NoError(t, err)
					require.Equal(t, fmt.Sprint(k), string(v))
				}
			}
			require.NoError(t, db.Close())
			_, err = db.Get([]byte("x"))
			require.ErrorIs(t, err, ErrClosed)
			require.ErrorIs(t, db.Checkpoint(dir+"-late"), ErrClosed)
		})
	}
}

// TestCheckpointDamaged: a checkpoint whose manifest is gone or damaged does
// not open as an empty store: ErrCorruption.
func TestCheckpointDamaged(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	for i := range 1000 {
		require.NoError(t, db.Set(stateTestKey(i), []byte("v"), NoSync))
	}
	require.NoError(t, db.Checkpoint("cp"))
	require.NoError(t, db.Close())
	require.NoError(t, fs.Remove("cp/"+manifestFileName(1)))
	_, err = Open("cp", &Options{FS: fs})
	require.ErrorIs(t, err, ErrCorruption)

	ro, err := Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	require.ErrorIs(t, ro.Checkpoint("cp2"), ErrReadOnly)
	require.NoError(t, ro.Close())
}

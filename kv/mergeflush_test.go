package kv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// mergeFlushKeys is the key space of the merged-flush tests (intraL0Key).
const mergeFlushKeys = 4000

// mergeFlushOpts are small memtables, L0 compactions only at depth 32 (so
// the depth the tests build stays), merged flushes from depth 2, and
// depth per flush: one table each.
func mergeFlushOpts(fs vfs.FS, depth int) *Options {
	return &Options{FS: fs, MemTableSize: 64 << 10, L0CompactionThreshold: 64,
		MergeFlushL0Depth: depth, FlushSplitBytes: -1}
}

// mergeFlushStore opens a store on opts with two flushed layers over the
// whole key space, so L0 is two deep, and returns it with its contents.
func mergeFlushStore(t *testing.T, opts *Options) (*DB, map[string][]byte) {
	t.Helper()
	db, err := Open("db", opts)
	require.NoError(t, err)
	return db, mergeFlushLayers(t, db)
}

// mergeFlushLayers writes and flushes mergeFlushStore's two layers into
// db and returns its contents.
func mergeFlushLayers(t *testing.T, db *DB) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	for layer := 0; layer < 2; layer++ {
		for i := layer; i < mergeFlushKeys; i += 97 {
			v := fmt.Appendf(nil, "layer%d", layer)
			require.NoError(t, db.Set(intraL0Key(i), v, NoSync))
			want[string(intraL0Key(i))] = v
		}
		require.NoError(t, db.Flush())
	}
	require.Equal(t, 2, db.Metrics().Levels[0].Sublevels)
	require.Equal(t, uint64(2), db.Metrics().Flushes)
	return want
}

// writeUntilRotated writes (or, one in five, deletes) random keys with
// values of 100 bytes until the mutable memtable is replaced by a new one.
func writeUntilRotated(t *testing.T, db *DB, want map[string][]byte, rng *rand.Rand) {
	t.Helper()
	require.NoError(t, rotateByWrites(db, want, rng))
}

// rotateByWrites is writeUntilRotated without a testing.T, for a
// goroutine of its own.
func rotateByWrites(db *DB, want map[string][]byte, rng *rand.Rand) error {
	db.mu.Lock()
	mem := db.mu.mem
	db.mu.Unlock()
	for n := 0; n < 100000; n++ {
		k := intraL0Key(rng.IntN(mergeFlushKeys))
		var err error
		if rng.IntN(5) == 0 {
			err = db.Delete(k, NoSync)
			want[string(k)] = nil
		} else {
			v := fmt.Appendf(nil, "%d-%0100d", n, rng.Uint64())
			err = db.Set(k, v, NoSync)
			want[string(k)] = v
		}
		if err != nil {
			return err
		}
		db.mu.Lock()
		rotated := db.mu.mem != mem
		db.mu.Unlock()
		if rotated {
			return nil
		}
	}
	return errors.New("the memtable never rotated")
}

// queuedMemtables is the number of immutable memtables waiting.
func queuedMemtables(db *DB) int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return len(db.mu.imm)
}

// TestMergedFlushHoldsWhileL0Deep: with L0 two deep, a full memtable is
// held (not flushed, still read) until the next one is full, and the two
// are flushed together into one layer: L0 three deep, not four. Every
// version (overwrites and deletions across the two memtables) reads
// right, before, after and after a reopen.
func TestMergedFlushHoldsWhileL0Deep(t *testing.T) {
	opts := mergeFlushOpts(vfs.NewMem(), 2)
	db, want := mergeFlushStore(t, opts)
	defer func() { db.Close() }()
	rng := rand.New(rand.NewPCG(1, 2))

	writeUntilRotated(t, db, want, rng)
	require.Never(t, func() bool { return db.Metrics().Flushes != 2 }, 300*time.Millisecond, 5*time.Millisecond,
		"a memtable full while L0 is 2 deep was flushed alone")
	require.Equal(t, 1, queuedMemtables(db))
	requireIntraL0Values(t, db, want, mergeFlushKeys)

	writeUntilRotated(t, db, want, rng)
	require.Eventually(t, func() bool { return db.Metrics().Flushes == 4 }, 10*time.Second, time.Millisecond)
	m := db.Metrics()
	require.Equal(t, uint64(1), m.MergedFlushes)
	require.Equal(t, 3, db.Metrics().Levels[0].Sublevels, "two memtables, one layer")
	require.Zero(t, queuedMemtables(db))
	requireIntraL0Values(t, db, want, mergeFlushKeys)
	db = reopenChecked(t, db, opts, want, mergeFlushKeys)
}

// heldMemtableStore opens a store whose L0 compacts from depth 2, with
// compactions paused (resume starts them) and the quiet period quiet,
// builds mergeFlushStore's two layers and fills a memtable with rng's
// writes, and returns once flushLoop holds it for a merged flush.
func heldMemtableStore(t *testing.T, quiet time.Duration, rng *rand.Rand) (*Options, *DB, map[string][]byte, func()) {
	t.Helper()
	opts := mergeFlushOpts(vfs.NewMem(), 2)
	opts.L0CompactionThreshold = 4 // L0 compacts from depth 2
	db, err := Open("db", opts)
	require.NoError(t, err)
	db.mu.Lock()
	db.heldQuiet = quiet
	db.mu.Unlock()
	resume := db.pauseCompactions()
	want := mergeFlushLayers(t, db)
	writeUntilRotated(t, db, want, rng)
	require.Eventually(t, func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		return len(db.mu.imm) == 1 && db.mu.held == db.mu.imm[0]
	}, 10*time.Second, time.Millisecond, "the full memtable was not held")
	return opts, db, want, resume
}

// TestMergedFlushReleasedWhenL0Drains: a memtable held while L0 is deep
// is flushed alone once a compaction takes L0 below MergeFlushL0Depth and
// no write follows for the quiet period: reads stop searching it then,
// not when a next memtable fills.
func TestMergedFlushReleasedWhenL0Drains(t *testing.T) {
	opts, db, want, resume := heldMemtableStore(t, heldQuiet, rand.New(rand.NewPCG(5, 6)))
	defer func() { db.Close() }()
	require.Never(t, func() bool { return db.Metrics().Flushes != 2 }, 200*time.Millisecond, 5*time.Millisecond,
		"a memtable full while L0 is 2 deep was flushed alone")
	require.Equal(t, 1, queuedMemtables(db))

	resume()
	require.Eventually(t, func() bool { return queuedMemtables(db) == 0 && db.Metrics().Flushes == 3 },
		10*time.Second, time.Millisecond, "the held memtable stayed after L0 drained")
	m := db.Metrics()
	require.Zero(t, m.MergedFlushes)
	require.Positive(t, m.Compactions)
	requireIntraL0Values(t, db, want, mergeFlushKeys)
	db = reopenChecked(t, db, opts, want, mergeFlushKeys)
}

// TestMergedFlushHeldWhileWritesGoOn: after L0 drains, a held memtable
// stays while writes go on (the next memtable may fill and merge with
// it), and goes alone once they pause for the quiet period. The writes
// start before the compactions resume, so they are already going when L0
// drains, however late the test sees the drain.
func TestMergedFlushHeldWhileWritesGoOn(t *testing.T) {
	// A write every 10 ms: long against the quiet period even under -race
	// on a loaded machine, and the next memtable (64 KiB) fills in ~10 s.
	const quiet, every = 400 * time.Millisecond, 10 * time.Millisecond
	rng := rand.New(rand.NewPCG(7, 8))
	_, db, want, resume := heldMemtableStore(t, quiet, rng)
	defer func() { db.Close() }()

	stop, done := make(chan struct{}), make(chan error, 1)
	go func() { // owns want until done
		for tick := time.NewTicker(every); ; {
			select {
			case <-stop:
				tick.Stop()
				done <- nil
				return
			case <-tick.C:
			}
			k := intraL0Key(rng.IntN(mergeFlushKeys))
			v := fmt.Appendf(nil, "slow-%d", rng.Uint64())
			if err := db.Set(k, v, NoSync); err != nil {
				done <- err
				return
			}
			want[string(k)] = v
		}
	}()
	resume()
	require.Eventually(t, func() bool {
		m := db.Metrics()
		return m.Compactions > 0 && m.Levels[0].Sublevels == 0
	}, 10*time.Second, time.Millisecond, "L0 did not drain")
	time.Sleep(3 * quiet)
	flushes, queued := db.Metrics().Flushes, queuedMemtables(db)
	close(stop)
	require.NoError(t, <-done)
	require.Equal(t, uint64(2), flushes, "the held memtable went while writes went on")
	require.Equal(t, 1, queued)

	require.Eventually(t, func() bool { return queuedMemtables(db) == 0 && db.Metrics().Flushes == 3 },
		10*time.Second, time.Millisecond, "the held memtable stayed after writes paused")
	require.Zero(t, db.Metrics().MergedFlushes)
	requireIntraL0Values(t, db, want, mergeFlushKeys)
}

// TestMergedFlushOff: with MergeFlushL0Depth negative (or L0 shallower
// than it) a full memtable is flushed on its own.
func TestMergedFlushOff(t *testing.T) {
	for _, depth := range []int{-1, 3} {
		t.Run(fmt.Sprint(depth), func(t *testing.T) {
			db, want := mergeFlushStore(t, mergeFlushOpts(vfs.NewMem(), depth))
			defer db.Close()
			writeUntilRotated(t, db, want, rand.New(rand.NewPCG(3, 4)))
			require.Eventually(t, func() bool { return db.Metrics().Flushes == 3 }, 10*time.Second, time.Millisecond)
			require.Zero(t, db.Metrics().MergedFlushes)
			require.Equal(t, 3, db.Metrics().Levels[0].Sublevels)
			requireIntraL0Values(t, db, want, mergeFlushKeys)
		})
	}
}

// TestMergedFlushFlushNotHeld: Flush returns with L0 deep, alone and with
// a memtable already held (then both are flushed together).
func TestMergedFlushFlushNotHeld(t *testing.T) {
	db, want := mergeFlushStore(t, mergeFlushOpts(vfs.NewMem(), 2))
	defer db.Close()
	flush := func() {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- db.Flush() }()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Flush held back")
		}
	}
	require.NoError(t, db.Set(intraL0Key(1), []byte("small"), NoSync))
	want[string(intraL0Key(1))] = []byte("small")
	flush()
	require.Equal(t, uint64(3), db.Metrics().Flushes)

	rng := rand.New(rand.NewPCG(5, 6))
	writeUntilRotated(t, db, want, rng)
	require.Never(t, func() bool { return db.Metrics().Flushes != 3 }, 100*time.Millisecond, 5*time.Millisecond)
	require.Equal(t, 1, queuedMemtables(db))
	require.NoError(t, db.Set(intraL0Key(2), []byte("after"), NoSync))
	want[string(intraL0Key(2))] = []byte("after")
	flush()
	m := db.Metrics()
	require.Equal(t, uint64(5), m.Flushes)
	require.Equal(t, uint64(1), m.MergedFlushes)
	require.Zero(t, queuedMemtables(db))
	requireIntraL0Values(t, db, want, mergeFlushKeys)
}

// TestMergedFlushOneImmutable: with MaxImmutableMemTables 1 a held
// memtable would stall writers for good; none is held.
func TestMergedFlushOneImmutable(t *testing.T) {
	opts := mergeFlushOpts(vfs.NewMem(), 2)
	opts.MaxImmutableMemTables = 1
	db, want := mergeFlushStore(t, opts)
	// Were a memtable held, the next rotation would wait for good (and
	// Close with it: the store is left open then).
	done := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(7, 8))
		var err error
		for i := 0; i < 3 && err == nil; i++ {
			err = rotateByWrites(db, want, rng)
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("writers stalled behind a held memtable")
	}
	defer db.Close()
	require.Eventually(t, func() bool { return db.Metrics().Flushes == 5 }, 10*time.Second, time.Millisecond)
	require.Zero(t, db.Metrics().MergedFlushes)
	requireIntraL0Values(t, db, want, mergeFlushKeys)
}

// TestMergedFlushCrash: a machine crash while a memtable is held loses
// none of its writes (its WAL was synced whole when it rotated), nor
// those of the memtable after it, up to the last Sync write; nor does a
// Close with the memtable held.
func TestMergedFlushCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	opts := mergeFlushOpts(fs, 2)
	db, want := mergeFlushStore(t, opts)
	defer func() { db.Close() }()
	rng := rand.New(rand.NewPCG(9, 10))
	writeUntilRotated(t, db, want, rng)
	require.Equal(t, 1, queuedMemtables(db))
	require.NoError(t, db.Set(intraL0Key(3), []byte("synced"), Sync))
	want[string(intraL0Key(3))] = []byte("synced")

	for pct := 0; pct <= 100; pct += 50 {
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(pct), 11))})
		o := *opts
		o.FS = crashed
		db2, err := Open("db", &o)
		require.NoError(t, err)
		requireIntraL0Values(t, db2, want, mergeFlushKeys)
		require.NoError(t, db2.Close())
	}
	// And a clean Close with the memtable still held.
	require.Equal(t, 1, queuedMemtables(db))
	db = reopenChecked(t, db, opts, want, mergeFlushKeys)
}

// TestMergeFlushL0DepthDefault: the default is the depth at which L0
// compactions start (L0CompactionThreshold/2, at least 1); a set value
// stays.
func TestMergeFlushL0DepthDefault(t *testing.T) {
	for _, c := range []struct{ threshold, depth, want int }{{0, 0, 2}, {4, 0, 2}, {9, 0, 4}, {1, 0, 1}, {4, -1, -1}, {4, 5, 5}} {
		o, err := (&Options{L0CompactionThreshold: c.threshold, MergeFlushL0Depth: c.depth}).withDefaults()
		require.NoError(t, err)
		require.Equal(t, c.want, o.MergeFlushL0Depth, "%+v", c)
	}
}

// TestMemTableMetrics: Metrics counts the memtables held for writes and
// flushes and the memory of their arenas: one after a flush, two while a
// full one is held for a merged flush (each full one at least
// MemTableSize, the new one a chunk), one again after the merged flush.
func TestMemTableMetrics(t *testing.T) {
	opts := mergeFlushOpts(vfs.NewMem(), 2)
	db, want := mergeFlushStore(t, opts)
	defer db.Close()
	m := db.Metrics()
	require.Equal(t, 1, m.MemTables)
	require.Positive(t, m.MemTableBytes)
	require.Less(t, m.MemTableBytes, uint64(opts.MemTableSize), "an empty memtable holds a chunk or two")

	rng := rand.New(rand.NewPCG(5, 6))
	writeUntilRotated(t, db, want, rng)
	require.Equal(t, 1, queuedMemtables(db), "held for a merged flush")
	m = db.Metrics()
	require.Equal(t, 2, m.MemTables)
	require.GreaterOrEqual(t, m.MemTableBytes, uint64(opts.MemTableSize))
	require.Less(t, m.MemTableBytes, uint64(3*opts.MemTableSize))

	writeUntilRotated(t, db, want, rng)
	require.Eventually(t, func() bool { return db.Metrics().Flushes == 4 }, 10*time.Second, time.Millisecond)
	m = db.Metrics()
	require.Equal(t, 1, m.MemTables)
	require.Less(t, m.MemTableBytes, uint64(opts.MemTableSize))
}

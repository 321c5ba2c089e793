package kv

import (
	"fmt"
	"testing"
	"time"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestCompactDropsTombstones: deleting everything and compacting the whole
// range leaves no table at all (shadowed versions and bottommost
// tombstones are dropped) and deletes the files of the old tables.
func TestCompactDropsTombstones(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, MemTableSize: 32 << 10})
	require.NoError(t, err)
	defer db.Close()
	for i := 0; i < 3000; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%05d", i), []byte("value"), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	m := db.Metrics()
	require.Positive(t, m.Levels[6].NumFiles)
	for i := 0; i < 3000; i++ {
		require.NoError(t, db.Delete(fmt.Appendf(nil, "k%05d", i), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	m = db.Metrics()
	for lvl, l := range m.Levels {
		require.Zero(t, l.NumFiles, "L%d", lvl)
	}
	names, err := fs.List("db")
	require.NoError(t, err)
	for _, n := range names {
		ft, _ := parseFileName(n)
		require.NotEqual(t, fileTypeTable, ft, "obsolete table %s not deleted", n)
		require.NotEqual(t, fileTypeState, ft, "obsolete state file %s not deleted", n)
	}
}

// TestSnapshotSurvivesCompaction: a snapshot keeps seeing the versions it
// saw through overwrites, deletes, flushes and full compactions; after it is
// closed a compaction drops them.
func TestSnapshotSurvivesCompaction(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set([]byte("a"), []byte("v1"), nil))
	require.NoError(t, db.Set([]byte("b"), []byte("v1"), nil))
	snap := db.NewSnapshot()
	require.NoError(t, db.Set([]byte("a"), []byte("v2"), nil))
	require.NoError(t, db.Delete([]byte("b"), nil))
	require.NoError(t, db.Set([]byte("c"), []byte("v2"), nil))
	it, err := db.NewIter(nil) // implicit snapshot, taken before the compaction
	require.NoError(t, err)
	require.NoError(t, db.Compact(nil, nil))
	require.NoError(t, db.Set([]byte("d"), []byte("v3"), nil))

	check := func(get func([]byte) ([]byte, error), key, want string) {
		v, err := get([]byte(key))
		if want == "" {
			require.ErrorIs(t, err, ErrNotFound, key)
			return
		}
		require.NoError(t, err, key)
		require.Equal(t, want, string(v), key)
	}
	check(snap.Get, "a", "v1")
	check(snap.Get, "b", "v1")
	check(snap.Get, "c", "")
	check(db.Get, "a", "v2")
	check(db.Get, "b", "")
	check(db.Get, "c", "v2")
	var keys []string
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, string(it.Key())+"="+string(it.Value()))
	}
	require.NoError(t, it.Close())
	require.Equal(t, []string{"a=v2", "c=v2"}, keys, "the iterator ignores writes after its creation")
	sit, err := snap.NewIter(nil)
	require.NoError(t, err)
	keys = nil
	for ok := sit.Last(); ok; ok = sit.Prev() {
		keys = append(keys, string(sit.Key())+"="+string(sit.Value()))
	}
	require.NoError(t, sit.Close())
	require.Equal(t, []string{"b=v1", "a=v1"}, keys)
	require.NoError(t, snap.Close())
	require.NoError(t, db.Compact(nil, nil))
	check(db.Get, "a", "v2")
	check(db.Get, "b", "")
	check(db.Get, "d", "v3")
}

// TestMetricsAfterReopen: the level shape and the filter size survive a
// restart (tables are loaded by the background pass after Open).
func TestMetricsAfterReopen(t *testing.T) {
	fs := vfs.NewMem()
	opts := &Options{FS: fs, MemTableSize: 32 << 10, TargetFileSize: 16 << 10}
	db, err := Open("db", opts)
	require.NoError(t, err)
	for i := 0; i < 5000; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%05d", i), []byte("value"), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	before := db.Metrics()
	require.Positive(t, before.FilterBitsPerKey)
	require.Positive(t, before.FilterMemoryBytes)
	require.Greater(t, before.Levels[6].NumFiles, 1)
	require.NoError(t, db.Close())

	db, err = Open("db", opts)
	require.NoError(t, err)
	defer db.Close()
	require.Eventually(t, func() bool {
		return db.Metrics().FilterMemoryBytes == before.FilterMemoryBytes
	}, 10*time.Second, 10*time.Millisecond)
	after := db.Metrics()
	require.Equal(t, before.Levels, after.Levels)
	require.InDelta(t, before.FilterBitsPerKey, after.FilterBitsPerKey, 1e-9)
}

// TestL0StopWrites: under a write burst, flushes wait for compactions once
// L0 holds L0StopWritesThreshold tables, so L0 never grows past it.
func TestL0StopWrites(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, MemTableSize: 8 << 10, L0CompactionThreshold: 2, L0StopWritesThreshold: 3, MaxImmutableMemTables: 2})
	require.NoError(t, err)
	defer db.Close()
	n := 20000
	if testing.Short() {
		n = 5000
	}
	done := make(chan struct{})
	maxL0 := 0
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			if err := db.Set(fmt.Appendf(nil, "k%07d", (i*7919)%n), []byte("some value bytes"), NoSync); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(time.Millisecond):
		}
		maxL0 = max(maxL0, db.Metrics().Levels[0].NumFiles)
	}
	m := db.Metrics()
	t.Logf("max L0 %d, flushes %d, compactions %d", maxL0, m.Flushes, m.Compactions)
	require.LessOrEqual(t, maxL0, 3)
	require.Positive(t, m.Flushes)
	for i := 0; i < n; i++ {
		_, err := db.Get(fmt.Appendf(nil, "k%07d", i))
		require.NoError(t, err)
	}
}

// TestWriteAmplificationMetrics: flushes and compactions count the table
// bytes they write (and read), write amplification is their ratio to the
// bytes flushed, and a fully compacted store owes no compaction debt.
func TestWriteAmplificationMetrics(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 32 << 10, TargetFileSize: 16 << 10})
	require.NoError(t, err)
	defer db.Close()
	m := db.Metrics()
	require.Zero(t, m.WriteAmplification())
	require.Equal(t, compaction.NumLevels-1, m.BaseLevel, "an empty store compacts L0 into the last level")
	for i := range 20_000 {
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%06d", (i*7919)%20_000), make([]byte, 40), NoSync))
	}
	require.NoError(t, db.Flush())
	require.NoError(t, db.Compact(nil, nil))
	m = db.Metrics()
	t.Logf("flushed %d bytes, compactions read %d and wrote %d, write amplification %.2f, base level %d, debt %d",
		m.BytesFlushed, m.BytesCompactedIn, m.BytesCompacted, m.WriteAmplification(), m.BaseLevel, m.CompactionDebt)
	require.Positive(t, m.BytesFlushed)
	require.Positive(t, m.BytesCompacted)
	require.GreaterOrEqual(t, m.BytesCompactedIn, m.BytesCompacted/2)
	require.Greater(t, m.WriteAmplification(), 1.0)
	require.InDelta(t, float64(m.BytesFlushed+m.BytesCompacted)/float64(m.BytesFlushed), m.WriteAmplification(), 1e-9)
	require.Zero(t, m.CompactionDebt, "fully compacted")
}

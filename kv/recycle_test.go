package kv

import (
	"fmt"
	"testing"
	"time"

	"github.com/adaptkv/adaptkv/kv/internal/memtable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestMemtableMemoryRecycled: when several flushed memtables are freed at
// once (here by the iterators that kept them; in a write stream by a
// flush of several queued memtables), the store keeps the chunks of all
// of them, up to its memtable budget (MaxImmutableMemTables+1 memtables),
// and the writes that fill the next memtables allocate none: a fresh chunk
// costs the write that takes it the chunk's zeroing and page faults.
func TestMemtableMemoryRecycled(t *testing.T) {
	opts := &Options{FS: vfs.NewMem(), MemTableSize: 256 << 10, MaxImmutableMemTables: 4}
	db, err := Open("db", opts)
	require.NoError(t, err)
	defer db.Close()
	value := make([]byte, 1000)
	key := 0
	fillMemtable := func() {
		for n := 0; n < opts.MemTableSize/len(value); n++ {
			require.NoError(t, db.Set(fmt.Appendf(nil, "k%08d", key), value, NoSync))
			key++
		}
	}
	var iters []*Iterator
	for range 4 {
		it, err := db.NewIter(nil) // keeps the memtable being filled
		require.NoError(t, err)
		iters = append(iters, it)
		fillMemtable()
	}
	require.NoError(t, db.Flush())
	for _, it := range iters {
		require.NoError(t, it.Close())
	}
	rec := db.memRecycler
	waitPrefill(t, db)
	require.GreaterOrEqual(t, rec.Held(), 3*opts.MemTableSize, "the freed memtables' chunks are not all kept")
	require.Equal(t, uint64(rec.Held()), db.Metrics().MemTableKeptBytes)
	allocated, reused := rec.Allocated(), rec.Reused()
	for range 3 {
		fillMemtable()
	}
	require.Equal(t, allocated, rec.Allocated(), "the next memtables allocated fresh chunks")
	require.Greater(t, rec.Reused(), reused)
}

// TestMemtablePrefilled: a new store faults in its first memtable's chunks
// on a goroutine of its own (prefillMemtable), so the writes that fill it
// take no fresh chunk (the memtable Open made took its first); each
// rotation tops the recycler up again (here while an iterator keeps the
// flushed memtable's chunks from it).
func TestMemtablePrefilled(t *testing.T) {
	opts := &Options{FS: vfs.NewMem(), MemTableSize: 256 << 10}
	db, err := Open("db", opts)
	require.NoError(t, err)
	defer db.Close()
	rec := db.memRecycler
	waitPrefilled := func() {
		t.Helper()
		waitPrefill(t, db)
		require.GreaterOrEqual(t, rec.Held(), opts.MemTableSize, "the recycler holds less than a memtable")
	}
	waitPrefilled()
	prefilled, allocated := rec.Prefilled(), rec.Allocated() // the first chunk: Open's
	require.Positive(t, prefilled)
	it, err := db.NewIter(nil) // keeps the memtable being filled
	require.NoError(t, err)
	defer it.Close()
	value := make([]byte, 1000)
	for i := 0; i < opts.MemTableSize*9/10/len(value); i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%08d", i), value, NoSync))
	}
	require.Equal(t, allocated, rec.Allocated(), "the first memtable's writes took fresh chunks")
	require.NoError(t, db.Flush())
	waitPrefilled()
	require.Greater(t, rec.Prefilled(), prefilled, "the rotation did not top the recycler up")
}

// waitPrefill waits until no goroutine prefills db's memtable recycler.
func waitPrefill(t *testing.T, db *DB) {
	t.Helper()
	require.Eventually(t, func() bool { return !db.prefilling.Load() }, 10*time.Second, time.Millisecond)
}

// TestMemtablePrefillBounded: a store with a memtable larger than
// prefillMaxBytes faults in prefillMaxBytes ahead, not a memtable's worth
// (a bulk load's memtable is hundreds of MiB).
func TestMemtablePrefillBounded(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 4 * prefillMaxBytes})
	require.NoError(t, err)
	defer db.Close()
	waitPrefill(t, db)
	held := db.memRecycler.Held()
	require.GreaterOrEqual(t, held, prefillMaxBytes-memtable.ChunkSize(4*prefillMaxBytes), "the prefill stopped short")
	require.LessOrEqual(t, held, prefillMaxBytes+memtable.ChunkSize(4*prefillMaxBytes), "the prefill went past prefillMaxBytes")
}

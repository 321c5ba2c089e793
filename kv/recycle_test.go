package kv

import (
	"fmt"
	"testing"

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
	require.GreaterOrEqual(t, rec.Held(), 3*opts.MemTableSize, "the freed memtables' chunks are not all kept")
	require.Equal(t, uint64(rec.Held()), db.Metrics().MemTableKeptBytes)
	allocated, reused := rec.Allocated(), rec.Reused()
	for range 3 {
		fillMemtable()
	}
	require.Equal(t, allocated, rec.Allocated(), "the next memtables allocated fresh chunks")
	require.Greater(t, rec.Reused(), reused)
}

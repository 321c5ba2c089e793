package kv

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestImplicitSnapshotRacesRewriteAndCompaction runs a rewrite of a key, a
// flush and a full compaction just before a Get or NewIter pins its read
// state. Compaction keeps only the newest version of the key (an implicit
// snapshot is not registered), so a read whose sequence number was taken
// before the pin found no visible version of a key that always had one.
func TestImplicitSnapshotRacesRewriteAndCompaction(t *testing.T) {
	for _, read := range []string{"Get", "NewIter"} {
		t.Run(read, func(t *testing.T) {
			db, err := Open("db", &Options{FS: vfs.NewMem()})
			require.NoError(t, err)
			defer db.Close()
			k := []byte("k")
			require.NoError(t, db.Set(k, []byte("v1"), Sync))
			require.NoError(t, db.Flush())

			ran := false
			db.testHookBeforePin = func() {
				if ran {
					return
				}
				ran = true
				require.NoError(t, db.Set(k, []byte("v2"), Sync))
				require.NoError(t, db.Compact(nil, nil))
				require.Equal(t, 1, db.Metrics().Levels[6].NumFiles, "v1 compacted away")
			}
			var got []byte
			if read == "Get" {
				got, err = db.Get(k)
				require.NoError(t, err, "k always had a value (v1, then v2)")
			} else {
				it, err := db.NewIter(nil)
				require.NoError(t, err)
				require.True(t, it.First(), "k always had a value (v1, then v2)")
				require.Equal(t, k, it.Key())
				got = append([]byte(nil), it.Value()...)
				require.False(t, it.Next())
				require.NoError(t, it.Close())
			}
			require.True(t, ran)
			// The read began after v2's write finished: it must see v2.
			require.Equal(t, "v2", string(got))
		})
	}
}

// TestMemtableRecycledAfterLastReader opens an iterator on a memtable,
// flushes it and writes several more memtables, whose memory the store
// recycles from flushed ones: the iterator still reads exactly what it
// saw, so the memtable's memory went back to the Recycler only once the
// iterator's read state was freed (a memtable recycled at its flush would
// be written over by the next one). Once it is closed, the store reuses
// memory.
func TestMemtableRecycledAfterLastReader(t *testing.T) {
	db, err := Open(t.TempDir(), &Options{MemTableSize: 32 << 10})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	const n = 150
	for i := 0; i < n; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "a%04d", i), fmt.Appendf(nil, "old-%04d", i), NoSync))
	}
	it, err := db.NewIter(nil)
	require.NoError(t, err)
	require.NoError(t, db.Flush())
	reusedBefore := db.memRecycler.Reused()
	for i := 0; i < 4000; i++ {
		// Same keys and lengths, new values: recycled nodes and bytes
		// would land where the iterator reads.
		require.NoError(t, db.Set(fmt.Appendf(nil, "a%04d", i%n), fmt.Appendf(nil, "new-%04d", i%n), NoSync))
		if i%500 == 499 {
			// Flushed and unread, the memtables before this one are
			// recycled: the next ones are built on their memory.
			require.NoError(t, db.Flush())
		}
	}
	require.NoError(t, db.Flush())
	require.Greater(t, db.memRecycler.Reused(), reusedBefore, "no memtable memory was recycled")
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		require.Equal(t, fmt.Sprintf("a%04d", i), string(it.Key()))
		require.Equal(t, fmt.Sprintf("old-%04d", i), string(it.Value()))
		i++
	}
	require.NoError(t, it.Error())
	require.Equal(t, n, i)
	require.NoError(t, it.Close())
}

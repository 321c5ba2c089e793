package kv

import (
	"fmt"
	"testing"

	"github.com/adaptkv/adaptkv/internal/directio"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestDirectReads: with Options.DirectReads a store on the OS file system
// reads its tables around the page cache: every key reads back (Gets,
// an iterator, a compaction, after a reopen), absent keys stay absent,
// and the reads are counted as aligned device reads; without it the same
// counters count page-cache reads of exactly the bytes asked for.
func TestDirectReads(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			dir := t.TempDir()
			opts := &Options{DirectReads: direct, MemTableSize: 64 << 10, BlockCacheSize: 64 << 10, FilterPolicy: "taf"}
			db, err := Open(dir, opts)
			if direct && err != nil {
				require.ErrorIs(t, err, ErrInvalidOptions)
				t.Skipf("no O_DIRECT in %s: %v", dir, err)
			}
			require.NoError(t, err)
			const n = 20000
			for i := range n {
				require.NoError(t, db.Set(fmt.Appendf(nil, "key%06d", i), fmt.Appendf(nil, "value%d", i), NoSync))
			}
			require.NoError(t, db.Flush())
			require.NoError(t, db.Compact(nil, nil))
			require.Positive(t, db.Metrics().CompactionReads, "compaction inputs read through the counting file system")
			require.NoError(t, db.Close())

			db, err = Open(dir, opts)
			require.NoError(t, err)
			defer db.Close()
			m0 := db.Metrics()
			for i := 0; i < n; i += 7 {
				v, err := db.Get(fmt.Appendf(nil, "key%06d", i))
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("value%d", i), string(v))
				_, err = db.Get(fmt.Appendf(nil, "key%06d!", i))
				require.ErrorIs(t, err, ErrNotFound)
			}
			it, err := db.NewIter(nil)
			require.NoError(t, err)
			count := 0
			for ok := it.First(); ok; ok = it.Next() {
				count++
			}
			require.NoError(t, it.Close())
			require.Equal(t, n, count)
			m := db.Metrics()
			reads, bytes := m.TableReads-m0.TableReads, m.TableReadBytes-m0.TableReadBytes
			require.Positive(t, reads, "a 64 KiB block cache misses")
			require.GreaterOrEqual(t, reads, m.DataBlockReads-m0.DataBlockReads, "every data block the cache missed is a file read")
			if direct {
				require.Zero(t, bytes%directio.Align, "direct reads read whole aligned blocks")
				require.GreaterOrEqual(t, bytes, reads*directio.Align)
			}
		})
	}
}

// TestDirectReadsRejected: DirectReads needs the operating system's file
// system.
func TestDirectReadsRejected(t *testing.T) {
	_, err := Open("db", &Options{FS: vfs.NewMem(), DirectReads: true})
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.ErrorIs(t, (&Options{FS: vfs.NewMem(), DirectReads: true}).Validate(), ErrInvalidOptions)

}

package kv

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// BenchmarkGetAbsentRangeDels measures absent Gets on a compacted store of
// 100k keys with an L0 table on top that holds 1000 point keys and 0, 10
// or 1000 range tombstones, spread over the whole key space (each deleting
// one key that was never written): every Get passes the L0 table's
// tombstones, then the filters.
func BenchmarkGetAbsentRangeDels(b *testing.B) {
	const n = 100_000
	for _, tombstones := range []int{0, 10, 1000} {
		b.Run(fmt.Sprintf("tombstones=%d", tombstones), func(b *testing.B) {
			db := benchDB(b, vfs.NewMem(), n)
			defer db.Close()
			batch := NewBatch()
			for i := 0; i < 1000; i++ {
				require.NoError(b, batch.Set(benchKey(2*(n+i)), make([]byte, 100)))
			}
			for i := 0; i < tombstones; i++ {
				k := benchKey(2*(2*n+i) + 1)
				require.NoError(b, batch.DeleteRange(k, append(k, 0)))
			}
			require.NoError(b, db.Apply(batch, NoSync))
			require.NoError(b, db.Flush())
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := db.Get(benchKey(2*(i%n) + 1)); err != ErrNotFound {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDeleteRange deletes the 1M keys of a compacted store with one
// DeleteRange, and one by one (Deletes in batches of 1000), each followed
// by Flush and a full Compact, so that the keys are gone from the tables
// too. ns/op is the deletion, the flush and the compaction; wal-B/op the
// batch bytes the WAL took; table-B/op the bytes flushed and compacted.
func BenchmarkDeleteRange(b *testing.B) {
	const n = 1_000_000
	key := func(i int) []byte { return fmt.Appendf(nil, "key%08d", i) }
	for _, mode := range []string{"range", "one-by-one"} {
		b.Run(mode, func(b *testing.B) {
			var walBytes, tableBytes uint64
			for b.Loop() {
				b.StopTimer()
				db, err := Open("db", &Options{FS: vfs.NewMem()})
				require.NoError(b, err)
				batch := NewBatch()
				for i := 0; i < n; i++ {
					require.NoError(b, batch.Set(key(i), make([]byte, 100)))
					if batch.Count() == 1000 {
						require.NoError(b, db.Apply(batch, NoSync))
						batch.Reset()
					}
				}
				require.NoError(b, db.Compact(nil, nil))
				before := db.Metrics()
				b.StartTimer()
				if mode == "range" {
					batch.Reset()
					require.NoError(b, batch.DeleteRange(key(0), key(n)))
					walBytes += uint64(batch.Len())
					require.NoError(b, db.Apply(batch, NoSync))
				} else {
					for i := 0; i < n; i++ {
						require.NoError(b, batch.Delete(key(i)))
						if batch.Count() == 1000 || i == n-1 {
							walBytes += uint64(batch.Len())
							require.NoError(b, db.Apply(batch, NoSync))
							batch.Reset()
						}
					}
				}
				require.NoError(b, db.Flush())
				require.NoError(b, db.Compact(nil, nil))
				b.StopTimer()
				after := db.Metrics()
				tableBytes += after.BytesFlushed + after.BytesCompacted - before.BytesFlushed - before.BytesCompacted
				it, err := db.NewIter(nil)
				require.NoError(b, err)
				require.False(b, it.First(), "every key deleted")
				require.NoError(b, it.Close())
				require.NoError(b, db.Close())
				b.StartTimer()
			}
			b.ReportMetric(float64(walBytes)/float64(b.N), "wal-B/op")
			b.ReportMetric(float64(tableBytes)/float64(b.N), "table-B/op")
		})
	}
}

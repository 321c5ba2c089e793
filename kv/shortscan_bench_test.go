package kv

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkShortScan: a new iterator, SeekGE to a stored key, 1 or 10
// rows, Close (YCSB E's short scans, issue 41), on a compacted store of
// 100k keys with a few L0 tables on top.
func BenchmarkShortScan(b *testing.B) {
	const n = 100_000
	db := benchDB(b, vfs.NewMem(), n)
	defer db.Close()
	for i := 0; i < 3; i++ { // L0 tables over the key range
		for j := i; j < n; j += 97 {
			if err := db.Set(benchKey(2*j), make([]byte, 100), NoSync); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	for _, rows := range []int{1, 10} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				it, err := db.NewIter(nil)
				if err != nil {
					b.Fatal(err)
				}
				c := 0
				for ok := it.SeekGE(benchKey(2 * ((i * 7919) % n))); ok && c < rows; ok = it.Next() {
					c++
				}
				if err := it.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

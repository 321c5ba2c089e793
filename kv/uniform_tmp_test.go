package kv

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func BenchmarkTmpUniformAbsent(b *testing.B) {
	const n = 1_000_000
	for _, policy := range []string{"fuse", "prefix", "aprefix", "bloom"} {
		b.Run(policy, func(b *testing.B) {
			db := benchDBWith(b, &Options{FS: vfs.NewMem(), FilterPolicy: policy}, n)
			defer db.Close()
			key := make([]byte, 0, 16)
			m0 := db.Metrics()
			j := 2 * n
			for b.Loop() {
				key = appendBenchKey(key[:0], j)
				j++
				if _, err := db.Get(key); err != ErrNotFound {
					b.Fatal(err)
				}
			}
			m := db.Metrics()
			b.ReportMetric(float64(m.FalsePositiveProbes-m0.FalsePositiveProbes)*1000/float64(b.N), "fp/1k")
		})
	}
}

package sstable

import (
	"fmt"
	"testing"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkGetAbsent measures Reader.Get of absent keys per policy on a
// 100k-key table with a warm block cache. Gets cycle through 4096 distinct
// absent keys spread over a range of 2M, so each key repeats: a static
// filter pays for its false positives on every round, an adaptive one once.
// Reported: ns/op, allocs/op, and false-positive probes per 1000 Gets.
func BenchmarkGetAbsent(b *testing.B) {
	const n, distinct = 100_000, 1 << 20
	for _, name := range filterpolicy.Names() {
		b.Run(name, func(b *testing.B) {
			fs := vfs.NewMem()
			writeTable(b, fs, "t.sst", mustPolicy(b, name, 99), n)
			r, err := Open(fs, "t.sst", ReaderOptions{Cache: pebble.NewCache(64 << 20)})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			keys := make([][]byte, 4096)
			for i := range keys {
				keys[i] = absentKey(i * (distinct / len(keys)))
			}
			before := r.Metrics()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, ok, err := r.Get(keys[i&(len(keys)-1)]); ok || err != nil {
					b.Fatal("absent key found", err)
				}
			}
			b.StopTimer()
			m := r.Metrics()
			b.ReportMetric(1000*float64(m.FalsePositiveProbes-before.FalsePositiveProbes)/float64(b.N), "fp-probes/1k")
		})
	}
}

// BenchmarkGetPresent measures Reader.Get of stored keys (the one
// allocation is the value copied out for the caller).
func BenchmarkGetPresent(b *testing.B) {
	const n = 100_000
	for _, name := range []string{"none", "bloom", "taf", "bloom-pool32"} {
		b.Run(name, func(b *testing.B) {
			pool := true // default: no idle iterators kept
			if name == "bloom-pool32" {
				name, pool = "bloom", false // a new Pebble iterator per Get
			}
			fs := vfs.NewMem()
			writeTable(b, fs, "t.sst", mustPolicy(b, name, 99), n)
			r, err := Open(fs, "t.sst", ReaderOptions{Cache: pebble.NewCache(64 << 20)})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			if !pool {
				r.maxPooled = 32
			}
			keys := make([][]byte, 4096)
			for i := range keys {
				keys[i] = storedKey((i * 7919) % n)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, ok, err := r.Get(keys[i&(len(keys)-1)]); !ok || err != nil {
					b.Fatal(fmt.Sprint("stored key missing", err))
				}
			}
		})
	}
}

package sstable

import (
	"fmt"
	"sync/atomic"
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
	for _, name := range []string{"none", "bloom", "prefix", "aprefix", "taf"} {
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

// BenchmarkGetParallel measures Reader.Get on one 100k-key taf table from
// GOMAXPROCS goroutines at once (run with -cpu 1,2,...): ns/op is wall time
// per Get over all goroutines, so it should fall as -cpu grows unless the
// goroutines contend on shared words of the Reader. "absent" asks 4096
// repeated absent keys whose false positives were all fixed before the
// timer starts (the filter answers every Get: the cheapest path, where a
// shared write costs the most); "present" asks stored keys (filter, then a
// block-cache lookup and a value copy).
func BenchmarkGetParallel(b *testing.B) {
	const n, distinct = 100_000, 1 << 20
	fs := vfs.NewMem()
	writeTable(b, fs, "t.sst", mustPolicy(b, "taf", 99), n)
	r, err := Open(fs, "t.sst", ReaderOptions{Cache: pebble.NewCache(64 << 20)})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	absent := make([][]byte, 4096)
	present := make([][]byte, 4096)
	for i := range absent {
		absent[i] = absentKey(i * (distinct / len(absent)))
		present[i] = storedKey((i * 7919) % n)
	}
	for round := 0; round < 2; round++ { // adapt every false positive, warm the cache
		for i := range absent {
			if _, _, err := r.Get(absent[i]); err != nil {
				b.Fatal(err)
			}
			if _, _, err := r.Get(present[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		keys  [][]byte
		found bool
	}{{"absent", absent, false}, {"present", present, true}} {
		b.Run(tc.name, func(b *testing.B) {
			var worker atomic.Uint64
			before := r.Metrics()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(worker.Add(1)) * 1021 // each goroutine starts elsewhere
				for pb.Next() {
					_, ok, err := r.Get(tc.keys[i&(len(tc.keys)-1)])
					if ok != tc.found || err != nil {
						b.Errorf("Get: found=%v, want %v, err=%v", ok, tc.found, err)
						return
					}
					i++
				}
			})
			b.StopTimer()
			m := r.Metrics()
			b.ReportMetric(1000*float64(m.FalsePositiveProbes-before.FalsePositiveProbes)/float64(b.N), "fp-probes/1k")
		})
	}
}

// BenchmarkWrite measures writing a table of 16k keys (one Set each, 15-byte
// keys, 12-byte values) per policy, as a flush or a compaction output
// would: ns/op and B/op are per table, ns/key per key. The plain names
// write columnar blocks (the default), row/<policy> row blocks.
func BenchmarkWrite(b *testing.B) {
	const n = 16 << 10
	keys, values := make([][]byte, n), make([][]byte, n)
	for i := range keys {
		keys[i], values[i] = storedKey(i), value(i)
	}
	for _, format := range []Format{FormatColumnar, FormatRow} {
		for _, name := range []string{"none", "bloom", "prefix", "aprefix", "taf"} {
			bench := name
			if format != FormatColumnar {
				bench = format.String() + "/" + name
			}
			b.Run(bench, func(b *testing.B) { benchWrite(b, name, format, keys, values) })
		}
	}
}

func benchWrite(b *testing.B, name string, format Format, keys, values [][]byte) {
	fs := vfs.NewMem()
	p := mustPolicy(b, name, 99)
	b.ReportAllocs()
	for b.Loop() {
		w, err := Create(fs, "t.sst", WriterOptions{Policy: p, Format: format})
		if err != nil {
			b.Fatal(err)
		}
		for i := range keys {
			if err := w.Add(InternalKey{UserKey: keys[i], Seq: uint64(i + 1), Kind: KeyKindSet}, values[i]); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
}

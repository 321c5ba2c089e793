package kv

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/adaptkv/adaptkv/internal/merging"
	"github.com/adaptkv/adaptkv/kv/internal/memtable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func benchKey(i int) []byte { return appendBenchKey(nil, i) }

// appendBenchKey appends benchKey(i) to dst.
func appendBenchKey(dst []byte, i int) []byte {
	return binary.BigEndian.AppendUint64(append(dst, "user"...), uint64(i)*0x9E3779B97F4A7C15)
}

func benchDB(b *testing.B, fs vfs.FS, n int) *DB {
	return benchDBWith(b, &Options{FS: fs}, n)
}

func benchDBWith(b *testing.B, o *Options, n int) *DB {
	o.MemTableSize, o.BlockCacheSize = 1<<20, 64<<20
	db, err := Open("db", o)
	require.NoError(b, err)
	benchFill(b, db, n)
	return db
}

// benchFill writes the n even benchKeys with 100-byte values into db and
// compacts them.
func benchFill(b *testing.B, db *DB, n int) {
	batch := NewBatch()
	for i := 0; i < n; i++ {
		require.NoError(b, batch.Set(benchKey(2*i), make([]byte, 100)))
		if batch.Count() == 1000 {
			require.NoError(b, db.Apply(batch, NoSync))
			batch.Reset()
		}
	}
	require.NoError(b, db.Apply(batch, NoSync))
	require.NoError(b, db.Compact(nil, nil))
}

// BenchmarkGet measures point reads of present and absent keys on a
// compacted store of 100k keys in memory.
func BenchmarkGet(b *testing.B) {
	const n = 100_000
	db := benchDB(b, vfs.NewMem(), n)
	defer db.Close()
	b.Run("present", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := db.Get(benchKey(2 * (i % n))); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("absent", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := db.Get(benchKey(2*(i%n) + 1)); err != ErrNotFound {
				b.Fatal(err)
			}
		}
	})
	b.Run("memtable", func(b *testing.B) {
		require.NoError(b, db.Set([]byte("hot"), []byte("v"), NoSync))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := db.Get([]byte("hot")); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGetParallel measures point reads from GOMAXPROCS goroutines at
// once (run with -cpu 1,2,...) on the store of BenchmarkGet: ns/op is wall
// time per Get over all goroutines, so it falls as -cpu grows unless the
// goroutines contend on the DB's shared words. The absent keys repeat, so
// with the default policy their false positives are fixed before the timer
// starts and every absent Get ends at a filter.
//
// cpu-ns/op is the process's CPU time per Get: on a shared or noisy
// machine, where other processes take cores from the benchmark and skew
// ns/op, it still shows what contention between the goroutines costs (a
// cache line moving between cores is CPU time; waiting for a core is not).
// Perfect scaling keeps it constant as -cpu grows.
func BenchmarkGetParallel(b *testing.B) {
	const n, distinct = 100_000, 4096
	db := benchDB(b, vfs.NewMem(), n)
	defer db.Close()
	for i := 0; i < distinct; i++ { // adapt the absent keys' false positives
		if _, err := db.Get(benchKey(2*(i*(n/distinct)) + 1)); err != ErrNotFound {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		key  func(i int) []byte
		want error
	}{
		{"present", func(i int) []byte { return benchKey(2 * (i % n)) }, nil},
		{"absent", func(i int) []byte { return benchKey(2*((i%distinct)*(n/distinct)) + 1) }, ErrNotFound},
	} {
		b.Run(tc.name, func(b *testing.B) {
			keys := make([][]byte, distinct)
			for i := range keys {
				keys[i] = tc.key(i * 7919)
			}
			var worker atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				i := int(worker.Add(1)) * 1021
				for pb.Next() {
					if _, err := db.Get(keys[i%distinct]); err != tc.want {
						b.Errorf("Get: %v, want %v", err, tc.want)
						return
					}
					i++
				}
			})
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkGetAbsentKnownNegatives measures absent Gets with the record of
// known negatives off and on (RecordAlways: default capacity and sampling), on a
// compacted store of 100k keys: "uniform" cycles through 64k keys drawn
// from 1M absent ones, "fresh" asks absent keys that never repeat (the
// record's worst case: none is worth a slot), "zipf" a Zipfian stream
// over 100k absent keys.
func BenchmarkGetAbsentKnownNegatives(b *testing.B) {
	const n = 100_000
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 1, n-1)
	streams := map[string][][]byte{"uniform": make([][]byte, 1<<16), "zipf": make([][]byte, 1<<16)}
	for i := range 1 << 16 {
		streams["uniform"][i] = benchKey(2*r.IntN(10*n) + 1)
		streams["zipf"][i] = benchKey(2*int(z.Uint64()) + 1)
	}
	for _, record := range []string{"off", "on"} {
		o := &Options{FS: vfs.NewMem(), RecordAbsent: RecordAlways}
		if record == "off" {
			o.KnownNegatives = -1
		}
		db := benchDBWith(b, o, n)
		fresh := 0 // the fresh keys asked so far, over all runs
		for _, dist := range []string{"uniform", "fresh", "zipf"} {
			keys := streams[dist]
			b.Run("record="+record+"/"+dist, func(b *testing.B) {
				b.ReportAllocs()
				buf := make([]byte, 0, 16)
				for i := 0; b.Loop(); i++ {
					var k []byte
					if keys != nil {
						k = keys[i&(1<<16-1)]
					} else {
						fresh++
						k = appendBenchKey(buf[:0], 20*n+2*fresh+1)
					}
					if _, err := db.Get(k); err != ErrNotFound {
						b.Fatal(err)
					}
				}
			})
		}
		require.NoError(b, db.Close())
	}
}

// BenchmarkSet measures NoSync writes of 100-byte values.
func BenchmarkSet(b *testing.B) {
	db, err := Open("db", &Options{FS: vfs.NewMem()})
	require.NoError(b, err)
	defer db.Close()
	v := make([]byte, 100)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := db.Set(benchKey(i), v, NoSync); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSetSyncParallel measures Sync writes from many goroutines on the
// OS file system, where group commit shares each fsync among the writers
// queued behind it.
func BenchmarkSetSyncParallel(b *testing.B) {
	db, err := Open(b.TempDir(), nil)
	require.NoError(b, err)
	defer db.Close()
	v := make([]byte, 100)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if err := db.Set(benchKey(i), v, Sync); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkScan measures iterating 100 keys from a random start.
func BenchmarkScan(b *testing.B) {
	const n = 100_000
	db := benchDB(b, vfs.NewMem(), n)
	defer db.Close()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		it, err := db.NewIter(nil)
		if err != nil {
			b.Fatal(err)
		}
		c := 0
		for ok := it.SeekGE(benchKey(2 * (i % n))); ok && c < 100; ok = it.Next() {
			c++
		}
		if err := it.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFlushCompactKnownNegatives measures the table writes of a flush
// (a 20k-entry memtable into one table) and of a compaction (the 200k keys
// of a compacted store rewritten into 2 MiB tables), their filters
// pre-adapted as they are built, with the record of known negatives off
// and on (full: about 29k absent keys spread over the key range). The
// outputs are deleted, not installed, so every iteration does the same
// work and no background compaction runs; both modes open the new tables
// in the table cache, as the store does to warm them.
func BenchmarkFlushCompactKnownNegatives(b *testing.B) {
	const n, memKeys = 200_000, 20_000
	for _, record := range []string{"off", "on"} {
		o := &Options{FS: vfs.NewMem(), RecordAbsent: RecordAlways}
		if record == "off" {
			o.KnownNegatives = -1
		}
		db := benchDBWith(b, o, n)
		if db.kn != nil {
			for i := 0; db.kn.Len() < db.kn.Capacity()*9/10; i++ {
				db.kn.Add(benchKey(2*(i*7%n)+1), 16)
			}
		}
		warm := func(metas []*base.TableMeta) {
			for _, m := range metas {
				h, err := db.tc.get(m.FileNum)
				require.NoError(b, err)
				db.tc.release(h)
			}
		}
		discard := func(metas []*base.TableMeta) {
			for _, m := range metas {
				db.tc.evict(m.FileNum)
				require.NoError(b, db.fs.Remove(db.fs.PathJoin(db.dir, tableFileName(m.FileNum))))
				_ = db.fs.Remove(db.fs.PathJoin(db.dir, stateFileName(m.FileNum)))
			}
		}
		mt := memtable.New()
		for i := 0; i < memKeys; i++ {
			mt.Add(base.InternalKey{UserKey: benchKey(2 * (n + i)), Seq: uint64(i + 1), Kind: base.KeyKindSet}, make([]byte, 100))
		}
		b.Run("record="+record+"/flush", func(b *testing.B) {
			for b.Loop() {
				meta, err := db.writeTable(mt.NewIter(), nil)
				require.NoError(b, err)
				warm([]*base.TableMeta{meta})
				b.StopTimer()
				discard([]*base.TableMeta{meta})
				b.StartTimer()
			}
		})
		b.Run("record="+record+"/compact", func(b *testing.B) {
			v := db.currentVersion()
			defer v.unref()
			var checks uint64
			for b.Loop() {
				var iters []base.Iterator
				for _, t := range v.Levels[manifest.NumLevels-1] {
					it, err := db.newCompactionIter(t.FileNum)
					require.NoError(b, err)
					iters = append(iters, it)
				}
				in := merging.NewIter(iters...)
				before := db.Metrics().PreAdaptChecks
				kn := db.buildNegatives()
				metas, err := compaction.Run(in, compaction.RunOptions{
					DropTombstones: true, TargetFileSize: db.opts.TargetFileSize,
					NewOutput: func() (compaction.Output, error) {
						return db.newOutputNum(db.allocFileNum(), kn, db.opts.TableFormat, 0, "compacting")
					},
				})
				require.NoError(b, err)
				require.NoError(b, in.Close())
				warm(metas)
				b.StopTimer()
				checks = db.Metrics().PreAdaptChecks - before
				discard(metas)
				b.StartTimer()
			}
			b.ReportMetric(float64(checks), "checks/op")
		})
		require.NoError(b, db.Close())
	}
}

// BenchmarkGetL0 measures absent Gets on a store whose L0 holds three split
// flushes over a last level of many tables (L0CompactionThreshold high
// enough that they stay): a point read finds its L0 tables per sublevel.
func BenchmarkGetL0(b *testing.B) {
	const n = 100_000
	db := benchDBWith(b, &Options{FS: vfs.NewMem(), L0CompactionThreshold: 16, TargetFileSize: 64 << 10, FlushSplitBytes: 4 << 10}, n)
	defer db.Close()
	for f := 0; f < 3; f++ {
		for i := f; i < n; i += 50 {
			require.NoError(b, db.Set(benchKey(2*i), make([]byte, 100), NoSync))
		}
		require.NoError(b, db.Flush())
	}
	m := db.Metrics()
	b.Logf("L0 %d tables, L6 %d tables", m.Levels[0].NumFiles, m.Levels[6].NumFiles)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := db.Get(benchKey(2*(i%n) + 1)); err != ErrNotFound {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetZipfAbsent is issue 36's read path: Zipfian absent Gets
// (rand.Zipf, s = 1.1, over 1M absent keys that sort among the stored
// ones) on a store of 1M records of 100 bytes on disk, fully compacted,
// with a 256 MiB block cache, per filter policy, through the page cache
// and (direct) with Options.DirectReads. The 64k keys the Gets cycle
// through are drawn before the timer starts, and one round of them warms
// the filters and the block cache as a long-running store's would be. It reports the device (or
// page-cache) reads and the false positives per 1k Gets beside ns/op.
// aprefix/record records every absent Get as known negatives
// (RecordAlways), which the store by default does only while tables are
// rewritten: the record's cost on an absent Get.
//
//	go test ./kv -run '^$' -bench GetZipfAbsent -benchtime 2000000x
func BenchmarkGetZipfAbsent(b *testing.B) {
	const n = 1_000_000
	for _, direct := range []bool{false, true} {
		for _, policy := range []string{"taf", "bloom", "prefix", "aprefix", "aprefix/record"} {
			name := policy
			if direct {
				name += "/direct"
			}
			b.Run(name, func(b *testing.B) {
				db := absentBenchDB(b, policy, direct, n)
				defer db.Close()
				zipf := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, n-1)
				keys := make([][]byte, 1<<16)
				for i := range keys {
					keys[i] = benchKey(2*int(zipf.Uint64()) + 1)
				}
				for _, k := range keys { // warm up
					if _, err := db.Get(k); err != ErrNotFound {
						b.Fatal(err)
					}
				}
				m0 := db.Metrics()
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if _, err := db.Get(keys[i&(len(keys)-1)]); err != ErrNotFound {
						b.Fatal(err)
					}
				}
				reportAbsentGets(b, db, m0)
			})
		}
	}
}

// BenchmarkGetNewAbsent is BenchmarkGetZipfAbsent's store read with
// absent keys that never repeat (kvbench neguniform's stream): every Get
// asks a key no Get asked before, scattered among the stored ones, so a
// false positive is never asked again and an adaptive filter's fixes,
// cache and record can only cost. The first 64k Gets warm the filters and
// the block cache.
//
//	go test ./kv -run '^$' -bench GetNewAbsent -benchtime 2000000x
func BenchmarkGetNewAbsent(b *testing.B) {
	const n = 1_000_000
	for _, direct := range []bool{false, true} {
		for _, policy := range []string{"fuse", "prefix", "aprefix"} {
			name := policy
			if direct {
				name += "/direct"
			}
			b.Run(name, func(b *testing.B) {
				db := absentBenchDB(b, policy, direct, n)
				defer db.Close()
				var key []byte
				next := 0
				get := func() {
					// Odd indices past the stored ones: absent, each once.
					key = appendBenchKey(key[:0], 2*(n+next)+1)
					next++
					if _, err := db.Get(key); err != ErrNotFound {
						b.Fatal(err)
					}
				}
				for range 1 << 16 { // warm up
					get()
				}
				m0 := db.Metrics()
				b.ReportAllocs()
				for b.Loop() {
					get()
				}
				reportAbsentGets(b, db, m0)
			})
		}
	}
}

// absentBenchDB opens BenchmarkGetZipfAbsent's and BenchmarkGetNewAbsent's
// store of n records with policy (p/record: p with RecordAbsent
// RecordAlways), with DirectReads if direct.
func absentBenchDB(b *testing.B, policy string, direct bool, n int) *DB {
	o := &Options{FilterPolicy: policy, DirectReads: direct}
	if p, ok := strings.CutSuffix(policy, "/record"); ok {
		o.FilterPolicy, o.RecordAbsent = p, RecordAlways
	}
	return benchDBOnDisk(b, o, n)
}

// reportAbsentGets reports the table reads (device or page cache) and the
// false positives per 1k Gets of db since m0, beside ns/op.
func reportAbsentGets(b *testing.B, db *DB, m0 Metrics) {
	m := db.Metrics()
	b.ReportMetric(float64(m.TableReads-m0.TableReads)*1000/float64(b.N), "reads/1k")
	b.ReportMetric(float64(m.FalsePositiveProbes-m0.FalsePositiveProbes)*1000/float64(b.N), "fp/1k")
}

// benchDBOnDisk is benchDBWith on the OS file system in a temporary
// directory, with a 256 MiB block cache.
func benchDBOnDisk(b *testing.B, o *Options, n int) *DB {
	dir := b.TempDir()
	o.MemTableSize, o.BlockCacheSize = 8<<20, 256<<20
	db, err := Open(dir, o)
	if err != nil && o.DirectReads {
		b.Skipf("no direct reads here: %v", err)
	}
	require.NoError(b, err)
	benchFill(b, db, n)
	return db
}

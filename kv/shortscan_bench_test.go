package kv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
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

// BenchmarkShortScanVsPebble: issue 41's shape, the store against a
// pebble.DB (bloom filters, the store's memtable and L0 settings) holding
// the same keys: 1M records of 100 random bytes, 80% written and compacted
// to the bottom, the other 20% written on top and flushed, then each
// store's own compactions finished; a 64 MiB block cache each, both on disk
// (the OS page cache warm). A scan is a new iterator, SeekGE to a stored
// key, rows rows, Close; misses/op are the block cache's. The
// sub-benchmarks alternate the stores; compare them with benchstat.
//
//	go test ./kv -run '^$' -bench ShortScanVsPebble -benchtime 200000x -count 6
func BenchmarkShortScanVsPebble(b *testing.B) {
	const n = 1_000_000
	stores := map[string]func(key []byte, rows int) (int, error){}
	misses := map[string]func() int64{}

	db, err := Open(b.TempDir(), &Options{BlockCacheSize: 64 << 20})
	require.NoError(b, err)
	defer db.Close()
	po := &pebble.Options{Logger: quietPebbleLogger{}, Cache: pebble.NewCache(64 << 20)}
	defer po.Cache.Unref()
	pebbleLikeKV(po, Options{})
	po.EnsureDefaults()
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	pdb, err := pebble.Open(b.TempDir(), po)
	require.NoError(b, err)
	defer pdb.Close()

	pool := make([]byte, 64<<10) // incompressible values, as YCSB's
	prng := rand.New(rand.NewPCG(7, 7))
	for i := range pool {
		pool[i] = byte(prng.Uint32())
	}
	valueOf := func(i int) []byte { off := (i * 7919) % (len(pool) - 100); return pool[off : off+100] }
	load := func(keep func(i int) bool) {
		kb, pb := NewBatch(), pdb.NewBatch()
		for i := 0; i < n; i++ {
			if !keep(i) {
				continue
			}
			require.NoError(b, kb.Set(benchKey(i), valueOf(i)))
			require.NoError(b, pb.Set(benchKey(i), valueOf(i), nil))
			if kb.Count() == 1000 {
				require.NoError(b, db.Apply(kb, NoSync))
				require.NoError(b, pb.Commit(pebble.NoSync))
				kb.Reset()
				pb = pdb.NewBatch()
			}
		}
		require.NoError(b, db.Apply(kb, NoSync))
		require.NoError(b, pb.Commit(pebble.NoSync))
	}
	load(func(i int) bool { return i%5 != 0 })
	require.NoError(b, db.Compact(nil, nil))
	require.NoError(b, pdb.Compact(context.Background(), []byte{0}, []byte{0xff}, false))
	load(func(i int) bool { return i%5 == 0 })
	require.NoError(b, db.Flush())
	require.NoError(b, pdb.Flush())
	// Let both finish the compactions the writes started, so that each is
	// measured in the shape its own policy leaves.
	for quiet := 0; quiet < 3; time.Sleep(100 * time.Millisecond) {
		if db.Metrics().CompactionsRunning == 0 && pdb.Metrics().Compact.NumInProgress == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}

	misses["kv"] = func() int64 { return db.Metrics().BlockCacheMisses }
	misses["pebble"] = func() int64 { return pdb.Metrics().BlockCache.Misses }
	stores["kv"] = func(key []byte, rows int) (int, error) {
		it, err := db.NewIter(nil)
		if err != nil {
			return 0, err
		}
		return scanRows(it, key, rows)
	}
	stores["pebble"] = func(key []byte, rows int) (int, error) {
		it, err := pdb.NewIter(nil)
		if err != nil {
			return 0, err
		}
		return scanRows(it, key, rows)
	}
	for _, rows := range []int{1, 10, 100} {
		for _, name := range []string{"kv", "pebble"} {
			scan := stores[name]
			b.Run(fmt.Sprintf("rows=%d/%s", rows, name), func(b *testing.B) {
				b.ReportAllocs()
				rng := rand.New(rand.NewPCG(1, uint64(rows)))
				m0 := misses[name]()
				for b.Loop() {
					c, err := scan(benchKey(rng.IntN(n-rows)), rows)
					if err != nil || c == 0 {
						b.Fatal(c, err)
					}
				}
				b.ReportMetric(float64(misses[name]()-m0)/float64(b.N), "misses/op")
			})
		}
	}
}

// scanRows reads up to rows rows from the first key >= key and closes it.
func scanRows(it interface {
	SeekGE([]byte) bool
	Next() bool
	Close() error
}, key []byte, rows int) (int, error) {
	c := 0
	for ok := it.SeekGE(key); ok && c < rows; c++ {
		if c+1 < rows {
			ok = it.Next()
		}
	}
	return c, it.Close()
}

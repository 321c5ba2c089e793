package main

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/adaptkv/adaptkv/cmd/kvbench/internal/ycsb"
	"github.com/adaptkv/adaptkv/internal/directio"
	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// fakeFPs is the number of the fake's tables whose filter is fooled by key.
func fakeFPs(key []byte) uint64 {
	n := uint64(0)
	for t := 0; t < fakeTables; t++ {
		if fakeFP(key, t) {
			n++
		}
	}
	return n
}

// TestFPBoundExactOnFake checks the FP bound, the denominator of the
// headline column, against counts made without kvbench's runner: the
// fakes' filters are a known function of (key, table), so eps is the
// share of fooled (calibration key, table) pairs, the unique absent keys
// are those the fake was asked, and an ideal adaptive filter (the
// adaptive fake) pays exactly one probe per fooled (key, table) pair,
// while the static fake pays one per Get of such a pair.
func TestFPBoundExactOnFake(t *testing.T) {
	const seed, records, ops, cal = 7, 3000, 6000, 2000
	dir := t.TempDir()
	_, results, _ := runJSON(t, "-policies", "fake,fakeadaptive", "-workloads", "negzipf", "-records", fmt.Sprint(records),
		"-ops", fmt.Sprint(ops), "-calibrate", fmt.Sprint(cal), "-seed", fmt.Sprint(seed), "-dir", dir)
	require.Len(t, results, 2)

	var fooled uint64
	for i := range uint64(cal) {
		fooled += fakeFPs(ycsb.AbsentKey(i, fmt.Sprintf("calibrate%d", seed)))
	}
	eps := float64(fooled) / float64(cal*fakeTables)

	for _, r := range results {
		checkConsistent(t, r)
		v, ok := fakeDirs.Load(filepath.Join(dir, r.Policy, "db"))
		require.True(t, ok, r.Policy)
		f := v.(*fakeStore)
		var unique, pairs, static uint64
		f.absentAsks.Range(func(k, n any) bool {
			if strings.HasSuffix(k.(string), fmt.Sprintf("!negzipf%d", seed)) {
				unique++
				fp := fakeFPs([]byte(k.(string)))
				pairs += fp
				static += fp * n.(*atomic.Uint64).Load()
			}
			return true
		})
		require.Equal(t, unique, r.UniqueAbsentKeys, "%s: the runner's unique absent keys are the fake's", r.Policy)
		require.InDelta(t, eps, r.Eps, 1e-12, r.Policy)
		require.Equal(t, float64(fakeTables), r.ChecksPerAbsentGet, r.Policy)
		require.NotNil(t, r.FPLowerBound)
		require.InDelta(t, eps*float64(unique*fakeTables), *r.FPLowerBound, 1e-9, r.Policy)
		if r.Policy == "fakeadaptive" {
			require.Equal(t, pairs, *r.FalsePositiveProbes, "one probe per fooled (key, table) pair")
			// The bound and the adaptive fake estimate the same rate (2% of
			// pairs) from two samples: their ratio is 1 within four
			// standard deviations of both counts.
			sd := math.Sqrt(1/float64(pairs) + 1/float64(fooled))
			ratio := float64(pairs) / *r.FPLowerBound
			require.InDelta(t, 1, ratio, 4*sd, "FP/bound of an ideal adaptive filter")
		} else {
			require.Equal(t, static, *r.FalsePositiveProbes, "one probe per Get of a fooled pair")
			require.Greater(t, *r.FalsePositiveProbes, pairs, "a zipfian stream repeats its fooled keys")
		}
	}
}

// TestPebbleL6ProbesCounted: Pebble's DB.Get probes L6 without its
// filter; kvbench counts that probe for every absent key inside an L6
// table's range. On a tree whose tables are all in L6 (no filter is asked
// at all) a Get probed a table exactly when it touched Pebble's block
// cache (the index and data blocks a probe reads; with the cache too
// small to hold the tables, hits and misses both count), which Pebble
// counts itself: that count, Get by Get, must be kvbench's.
func TestPebbleL6ProbesCounted(t *testing.T) {
	cfg := smallConfig(t)
	s, err := openPebble(cfg, false)
	require.NoError(t, err)
	defer s.Close()
	r := testRunner(s, "pebble", 1)
	require.NoError(t, r.loadBottom(5000))
	require.NoError(t, s.Settle(settleQuiet)) // no compaction under the Gets
	var shape Counters
	require.NoError(t, s.Footprint(&shape))
	require.Equal(t, [7]int{0, 0, 0, 0, 0, 0, shape.Files[6]}, shape.Files, "only L6")
	require.Greater(t, shape.Files[6], 1)
	const k = 3000
	var touched uint64 // Gets that touched the block cache: Pebble's count of probes
	before := mustMetrics(t, s)
	for i := range uint64(k) {
		key := ycsb.AbsentKey(i, "l6probes")
		c0 := s.db.Metrics().BlockCache
		found, err := s.Get(key)
		require.NoError(t, err)
		require.False(t, found)
		require.NoError(t, s.AfterGet(key, found))
		if c1 := s.db.Metrics().BlockCache; c1.Hits+c1.Misses > c0.Hits+c0.Misses {
			touched++
		}
	}
	d := mustMetrics(t, s).Sub(before)
	require.Zero(t, d.FilterChecks, "DB.Get asks no filter on this tree")
	require.Equal(t, touched, d.UnfilteredProbes, "one L6 probe per Get that read a block")
	require.Greater(t, d.UnfilteredProbes, uint64(k*9/10), "absent keys sort among stored ones")
	require.Equal(t, d.UnfilteredProbes, d.Maybes())
	require.Equal(t, d.UnfilteredProbes, d.FalsePositiveProbes)
}

func mustMetrics(t *testing.T, s Store) Counters {
	t.Helper()
	c, err := s.Metrics()
	require.NoError(t, err)
	return c
}

// TestLoadInSteps: the load on top flushes once per step, so no memtable
// fills on its own (a step is half a memtable), every record is stored,
// and stores of different policies end with the same levels of the tree
// (the same tables an absent Get checks: L0's, one per level below; how
// many tables a level has depends on the filter's size in the files).
func TestLoadInSteps(t *testing.T) {
	const bottom, top = 8000, 10000
	var shapes [][7]int // L0's tables, then 1 for each level below that holds any
	for _, policy := range []string{"bloom", "aprefix"} {
		cfg := defaultConfig(options{bits: 10, memTable: 64 << 10, targetFile: 64 << 10, cacheSize: defaultCache}, sstable.FormatColumnar)
		cfg.Dir = t.TempDir()
		s, err := openStore(policy, cfg)
		require.NoError(t, err)
		r := testRunner(s, policy, 3)
		r.topStep = topStep(cfg, r.valueSize)
		require.NoError(t, r.loadBottom(bottom))
		m0 := mustMetrics(t, s)
		require.NoError(t, r.load(bottom, top))
		steps := (top - bottom + r.topStep - 1) / r.topStep
		require.Greater(t, steps, uint64(2))
		require.Equal(t, steps, mustMetrics(t, s).Flushes-m0.Flushes, "%s: one flush per step", policy)
		require.Equal(t, uint64(top), r.records)
		for i := uint64(0); i < top; i += 7 {
			found, err := s.Get(ycsb.Key(i))
			require.NoError(t, err)
			require.True(t, found, "%s: record %d", policy, i)
		}
		var shape Counters
		require.NoError(t, s.Footprint(&shape))
		levels := shape.Files
		for l := 1; l < len(levels); l++ {
			levels[l] = min(levels[l], 1)
		}
		shapes = append(shapes, levels)
		require.NoError(t, s.Close())
	}
	require.Equal(t, shapes[0], shapes[1], "the same levels whatever the policy")
}

// TestKVFilterChecksMatchTableRanges: an adaptkv store's filter checks for
// absent keys are the tables whose key range holds each key, counted from
// the table files themselves, and on the flushed store every Get of a
// stored key finds it in exactly one table (one true-positive probe).
func TestKVFilterChecksMatchTableRanges(t *testing.T) {
	cfg := defaultConfig(options{bits: 10, memTable: 64 << 10, targetFile: 64 << 10, cacheSize: defaultCache}, sstable.FormatColumnar)
	cfg.Dir = t.TempDir()
	s, err := openStore("bloom", cfg)
	require.NoError(t, err)
	r := testRunner(s, "bloom", 3)
	require.NoError(t, r.loadBottom(8000))
	require.NoError(t, r.load(8000, 10000))
	var shape Counters
	require.NoError(t, s.Footprint(&shape))
	above := 0
	for _, n := range shape.Files[:6] {
		above += n
	}
	require.Positive(t, above, "tables above the last level")
	const k = 2000
	get := func(key []byte, want bool) {
		found, err := s.Get(key)
		require.NoError(t, err)
		require.Equal(t, want, found, "%q", key)
	}
	m0 := mustMetrics(t, s)
	for i := range uint64(k) {
		get(ycsb.AbsentKey(i, "ranges"), false)
	}
	m1 := mustMetrics(t, s)
	for i := range uint64(k) {
		get(ycsb.Key(i*5), true)
	}
	m2 := mustMetrics(t, s)
	require.NoError(t, s.Close())
	absent, stored := m1.Sub(m0), m2.Sub(m1)
	require.Equal(t, uint64(k), stored.TruePositiveProbes, "every stored key found in one table")
	require.Zero(t, absent.TruePositiveProbes)

	// The live tables: after Close the directory holds no obsolete one.
	names, err := filepath.Glob(filepath.Join(cfg.Dir, "*.sst"))
	require.NoError(t, err)
	require.Len(t, names, above+shape.Files[6])
	var want uint64
	keys := make([][]byte, k)
	for i := range keys {
		keys[i] = ycsb.AbsentKey(uint64(i), "ranges")
	}
	for _, name := range names {
		tr, err := sstable.Open(vfs.Default, name, sstable.ReaderOptions{})
		require.NoError(t, err)
		it, err := tr.NewIter(nil, nil)
		require.NoError(t, err)
		require.True(t, it.First())
		lo := bytes.Clone(it.Key().UserKey)
		require.True(t, it.Last())
		hi := it.Key().UserKey
		for _, key := range keys {
			if bytes.Compare(lo, key) <= 0 && bytes.Compare(key, hi) <= 0 {
				want++
			}
		}
		require.NoError(t, it.Close())
		require.NoError(t, tr.Close())
	}
	require.Greater(t, want, uint64(k), "several tables hold an absent key's range")
	require.Equal(t, want, absent.FilterChecks, "filter checks of absent keys = tables whose range holds them")
	require.Equal(t, want, absent.FilterNegatives+absent.FalsePositiveProbes, "each check a 'no' or a wasted probe")
}

// TestRotated: run i of n starts at store i*len/n, every store keeps its
// place in the cycle.
func TestRotated(t *testing.T) {
	s := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	require.Equal(t, s, rotated(s, 0, 3))
	require.Equal(t, []string{"c", "d", "e", "f", "g", "h", "a", "b"}, rotated(s, 1, 3))
	require.Equal(t, []string{"f", "g", "h", "a", "b", "c", "d", "e"}, rotated(s, 2, 3))
	firsts := map[string]bool{}
	for i := range len(s) {
		firsts[rotated(s, i, len(s))[0]] = true
	}
	require.Len(t, firsts, len(s), "with as many runs as stores each goes first once")
}

// TestRepeat: -repeat N runs every store N times with seeds -seed..-seed+N-1
// (JSON and CSV hold every run's rows), and the table shows one row per
// store and workload with the medians and the ops/s range.
func TestRepeat(t *testing.T) {
	objs, results, table := runJSON(t, "-policies", "fake,fakeadaptive", "-workloads", "negzipf,c", "-records", "2000",
		"-ops", "500", "-calibrate", "200", "-repeat", "3", "-seed", "5")
	require.Len(t, objs, 2*2*3)
	seen := map[string]int{}
	for _, r := range results {
		checkConsistent(t, r)
		require.Equal(t, uint64(5+r.Repeat), r.Seed)
		seen[fmt.Sprintf("%s/%s/%d", r.Policy, r.Workload, r.Repeat)]++
	}
	require.Len(t, seen, 12, "every store, workload and run once")
	require.Contains(t, table, "medians of 3 runs")
	require.Contains(t, table, "ops/s min-max")
	require.Equal(t, 2, strings.Count(table, "\n  fakeadaptive "), "one row per workload:\n%s", table)

	var out strings.Builder
	err := run([]string{"-repeat", "0", "-q"}, &out, &out)
	require.ErrorContains(t, err, "-repeat")
}

// TestSummarize: a summary row holds each figure's median over the runs
// (mean of the middle two for an even count), null where no run measured
// it, and the min-max of the figures that swing.
func TestSummarize(t *testing.T) {
	row := func(rep int, ops float64, fp *uint64, files int) *Result {
		return &Result{Policy: "p", Workload: "w", Repeat: rep, OpsPerSec: ops, Gets: uint64(10 * (rep + 1)),
			FalsePositiveProbes: fp, FPProbesPer1kGets: f64p(float64(rep)), TablesPerLevel: [7]int{files}}
	}
	got := summarize([]*Result{row(0, 300, u64p(7), 1), row(1, 100, u64p(9), 5), row(2, 200, u64p(8), 3)})
	require.Len(t, got, 1)
	m := got[0]
	require.Equal(t, 3, m.Runs)
	require.Equal(t, 200.0, m.OpsPerSec)
	require.Equal(t, uint64(20), m.Gets)
	require.Equal(t, uint64(8), *m.FalsePositiveProbes)
	require.Equal(t, 3, m.TablesPerLevel[0])
	require.Equal(t, [2]float64{100, 300}, *m.OpsPerSecRange)
	require.Equal(t, [2]float64{0, 2}, *m.FPPer1kGetsRange)

	even := summarize([]*Result{row(0, 100, nil, 1), row(1, 200, nil, 2)})[0]
	require.Equal(t, 150.0, even.OpsPerSec)
	require.Nil(t, even.FalsePositiveProbes, "no run measured it")
}

// TestConfigAlike: the Pebble peers run with the adaptkv store's memtable
// size, memtable and L0 stall thresholds, L0 trigger, compaction
// concurrency, table and level sizes, block size and cache, and open
// tables; the header lists the rest, each engine's own mechanism, and a
// -peer-memtable-size as a difference.
func TestConfigAlike(t *testing.T) {
	cfg := defaultConfig(options{bits: 10, memTable: defaultMemTable, targetFile: defaultTargetFile, cacheSize: defaultCache}, sstable.FormatColumnar)
	require.Equal(t, 4, cfg.MaxImmutableMemTables)
	require.Equal(t, 12, cfg.L0StopWrites)
	require.Equal(t, 2, cfg.Compactions)
	differ := map[string]bool{}
	for _, r := range configRows(cfg) {
		if r.kv != r.pebble {
			differ[r.name] = true
		}
	}
	require.Equal(t, map[string]bool{"L0 file threshold": true, "flush split": true, "merged flushes": true,
		"table format": true, "NoSync write returns once": true, "false positives fixed": true, "remote chunks cached": true,
		"absent Gets recorded": true, "point reads": true}, differ)
	p := pebbleOptions(cfg, nil, nil)
	require.Equal(t, 5, p.MemTableStopWritesThreshold)
	lo, hi := p.CompactionConcurrencyRange()
	require.Equal(t, [2]int{2, 2}, [2]int{lo, hi})

	cfg.PeerMemTableSize = 3 << 20
	var hdr strings.Builder
	printConfig(&hdr, cfg)
	require.Regexp(t, `memtable size +2 MiB +3 MiB`, hdr.String())
	require.Contains(t, hdr.String(), "memtables before writes stall 5")

	// The bulk load gives every store the same memtable, the peers too.
	bulk := bulkConfig(cfg, 100000, 100)
	require.Zero(t, bulk.PeerMemTableSize)
	require.Equal(t, bulk.MemTableSize, int(pebbleOptions(bulk, nil, nil).MemTableSize))
}

// TestMemoryColumns: a workload that writes reports the memtable memory
// each real store held and, with each store run alone, the process's peak
// resident set (Linux).
func TestMemoryColumns(t *testing.T) {
	_, results, table := runJSON(t, "-policies", "taf,pebble", "-workloads", "churn", "-records", "5000",
		"-ops", "20000", "-calibrate", "200", "-memtable-size", "65536", "-target-file-size", "65536", "-interleave", "0")
	require.Len(t, results, 2)
	for _, r := range results {
		checkConsistent(t, r)
		require.Positive(t, r.MemTablePeakBytes, r.Policy)
		require.Less(t, r.MemTablePeakBytes, uint64(6*65536+(1<<20)), "%s: at most five memtables and a chunk", r.Policy)
		if _, ok := peakRSS(); ok {
			require.NotNil(t, r.RSSPeakBytes, r.Policy)
			require.Greater(t, *r.RSSPeakBytes, uint64(1<<20), r.Policy)
		}
	}
	require.Contains(t, table, "memtbl MiB")
}

// TestDirectReadColumns: every real store counts the reads of its table
// files, through the page cache by default and with -direct around it
// (whole aligned blocks; Linux), and the header says which.
func TestDirectReadColumns(t *testing.T) {
	for _, direct := range []bool{false, true} {
		args := []string{"-policies", "taf,pebble,fake", "-workloads", "negzipf", "-records", "5000", "-ops", "3000",
			"-calibrate", "300", "-memtable-size", "65536", "-target-file-size", "65536"}
		if direct {
			args = append(args, "-direct")
		}
		_, results, table := runJSON(t, args...)
		require.Len(t, results, 3)
		for _, r := range results {
			checkConsistent(t, r)
			if r.Policy == "fake" {
				require.Nil(t, r.TableReads, "the fake has no files")
				continue
			}
			require.NotNil(t, r.TableReads, r.Policy)
			require.NotNil(t, r.TableKiBPerGet, r.Policy)
			if direct {
				require.Zero(t, *r.TableReadBytes%directio.Align, "%s: whole blocks", r.Policy)
			}
		}
		require.Contains(t, table, "reads/1k gets")
		if direct {
			require.Contains(t, table, "table reads O_DIRECT")
		} else {
			require.Contains(t, table, "table reads through the page cache")
		}
	}
}

// TestCheapFalsePositiveProbes: the counter the adversary reads around
// each Get (Store.FalsePositiveProbes) moves, Get by Get, by what Metrics
// counts over the same Gets, for a static and an adaptive adaptkv store
// and both Pebble peers.
func TestCheapFalsePositiveProbes(t *testing.T) {
	for _, name := range []string{"bloom", "aprefix", pebblePeerName, pebbleL6PeerName} {
		t.Run(name, func(t *testing.T) {
			cfg := smallConfig(t)
			var s Store
			var err error
			if name == pebblePeerName || name == pebbleL6PeerName {
				s, err = openPebble(cfg, name == pebbleL6PeerName)
			} else {
				s, err = openKV(name, cfg)
			}
			require.NoError(t, err)
			defer s.Close()
			r := testRunner(s, name, 1)
			require.NoError(t, r.loadBottom(20000))
			require.NoError(t, s.Settle(settleQuiet))
			before := mustMetrics(t, s)
			var sum uint64
			for i := range uint64(5000) {
				_, n, err := r.absentGet(ycsb.AbsentKey(i%2500, "cheapfp"))
				require.NoError(t, err)
				sum += n
			}
			d := mustMetrics(t, s).Sub(before)
			require.Positive(t, d.FalsePositiveProbes, "absent keys among stored ones meet false positives")
			require.Equal(t, d.FalsePositiveProbes, sum)
		})
	}
}

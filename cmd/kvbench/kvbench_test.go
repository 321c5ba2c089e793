package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adaptkv/adaptkv/cmd/kvbench/internal/ycsb"
	"github.com/adaptkv/adaptkv/kv"
	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// runJSON runs kvbench in-process and decodes its JSON output.
func runJSON(t *testing.T, args ...string) ([]map[string]any, []*Result, string) {
	t.Helper()
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	args = append(args, "-json", jsonPath, "-q")
	require.NoError(t, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
	raw, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var objs []map[string]any
	require.NoError(t, json.Unmarshal(raw, &objs), "well-formed JSON")
	var results []*Result
	require.NoError(t, json.Unmarshal(raw, &results))
	return objs, results, stdout.String()
}

var designFields = []string{"gets", "filter_checks", "filter_negatives", "false_positive_probes",
	"true_positive_probes", "data_block_reads", "adaptations", "rebuilds", "filter_bits_per_key",
	"remote_reads", "policy", "workload", "ops_per_sec", "p50_us", "p99_us", "p999_us",
	"probes_per_get", "fp_probes_per_1k_gets", "bits_per_key", "fp_lower_bound", "fp_probes_per_1k_checks",
	"write_amp"}

// checkConsistent asserts the invariants every result must satisfy.
func checkConsistent(t *testing.T, r *Result) {
	t.Helper()
	id := r.Policy + "/" + r.Workload
	require.Zero(t, r.StoredNotFound, "%s: stored keys not found", id)
	require.Equal(t, r.Reads, r.Gets, "%s: gets = reads issued", id)
	require.GreaterOrEqual(t, r.FilterChecks, r.FilterNegatives, id)
	if r.FilterChecks > 0 { // "none" has no filter to check: it probes every candidate table
		require.Equal(t, r.FilterChecks-r.FilterNegatives+r.UnfilteredProbes, r.FilterMaybes, id)
	}
	require.Positive(t, r.OpsPerSec, id)
	require.LessOrEqual(t, r.P50us, r.P99us, id)
	require.LessOrEqual(t, r.P99us, r.P999us, id)
	require.LessOrEqual(t, r.AbsentReads, r.Reads, id)
	if r.WriteAmp != nil {
		require.GreaterOrEqual(t, *r.WriteAmp, 1.0, "%s: write amplification", id)
	}
	require.LessOrEqual(t, r.UniqueAbsentKeys, r.AbsentReads, id)
	if r.Gets > 0 {
		require.InDelta(t, float64(r.FilterMaybes)/float64(r.Gets), r.ProbesPerGet, 1e-9, id)
	}
	if r.FalsePositiveProbes != nil {
		fp := *r.FalsePositiveProbes
		require.NotNil(t, r.TruePositiveProbes, id)
		require.GreaterOrEqual(t, r.FilterMaybes, fp, "%s: probes >= false-positive probes", id)
		// The store's probe split against its filter answers (kv counts
		// them in different places: the filter's "no" before the table
		// lookup, the lookup's outcome after it).
		require.Equal(t, r.FilterMaybes, fp+*r.TruePositiveProbes, id)
		// A Get finds its key in at most one table, and a Get of an
		// absent key in none (kvbench's count, not the store's).
		require.LessOrEqual(t, *r.TruePositiveProbes, r.Reads-r.AbsentReads, "%s: true positives <= stored-key reads", id)
		if r.Gets > 0 {
			require.NotNil(t, r.FPProbesPer1kGets, id)
			require.InDelta(t, float64(fp)*1000/float64(r.Gets), *r.FPProbesPer1kGets, 1e-9, id)
		}
		if r.FilterChecks > 0 {
			require.NotNil(t, r.FPProbesPer1kChecks, id)
			require.InDelta(t, float64(fp)*1000/float64(r.FilterChecks+r.UnfilteredProbes), *r.FPProbesPer1kChecks, 1e-9, id)
		}
		if r.AbsentReads == r.Reads {
			require.Zero(t, *r.TruePositiveProbes, "%s: absent-only reads have no true positives", id)
		}
	}
	if r.Adversary == nil {
		require.Equal(t, r.Ops, r.Reads-r.ReadModifyWrites+r.Updates+r.Inserts+r.Scans+r.ReadModifyWrites, id)
	}
	if r.FPLowerBound != nil {
		require.GreaterOrEqual(t, *r.FPLowerBound, 0.0, id)
	}
	if r.TableReads != nil && r.Gets > 0 {
		require.InDelta(t, float64(*r.TableReads)*1000/float64(r.Gets), *r.TableReadsPer1kGets, 1e-9, id)
		require.LessOrEqual(t, *r.TableReads, *r.TableReadBytes, "%s: a read reads a byte at least", id)
	}
	require.GreaterOrEqual(t, r.Eps, 0.0, id)
	require.LessOrEqual(t, r.Eps, 1.0, id)
}

// TestEndToEndTiny runs every shipped workload on the fakes, the Pebble peer
// and two adaptkv policies, and checks the JSON, CSV and plot.
func TestEndToEndTiny(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "out.csv")
	svgPath := filepath.Join(dir, "out.svg")
	pngPath := filepath.Join(dir, "out.png")
	workloads := "a,b,c,d,e,f,negzipf,mixed,adversary"
	policies := "fake,fakeadaptive,pebble,bloom,taf"
	objs, results, table := runJSON(t, "-policies", policies, "-workloads", workloads,
		"-records", "3000", "-ops", "1500", "-calibrate", "500", "-threads", "2",
		"-memtable-size", "65536", "-target-file-size", "65536", "-csv", csvPath, "-plot", svgPath)
	require.Len(t, objs, 5*9)
	for _, o := range objs {
		for _, f := range designFields {
			require.Contains(t, o, f)
		}
	}
	byKey := map[string]*Result{}
	for _, r := range results {
		checkConsistent(t, r)
		byKey[r.Policy+"/"+r.Workload] = r
	}
	for _, pol := range strings.Split(policies, ",") {
		for _, w := range []string{"workloada", "workloadc", "negzipf", "mixed"} {
			require.Equal(t, uint64(1500), byKey[pol+"/"+w].Ops, pol+"/"+w)
		}
		require.Equal(t, uint64(0), byKey[pol+"/workloadc"].AbsentReads)
		neg := byKey[pol+"/negzipf"]
		require.Equal(t, neg.Reads, neg.AbsentReads)
		require.NotNil(t, neg.FalsePositiveProbes, "negzipf FP is exact for every store")
		require.NotNil(t, neg.FPLowerBound)
		mixed := byKey[pol+"/mixed"]
		require.Greater(t, mixed.AbsentReads, uint64(0))
		require.Less(t, mixed.AbsentReads, mixed.Reads)
		require.Greater(t, byKey[pol+"/workloadd"].Inserts, uint64(0))
		require.Greater(t, byKey[pol+"/workloade"].Scans, uint64(0))
		require.Greater(t, byKey[pol+"/workloadf"].ReadModifyWrites, uint64(0))
		adv := byKey[pol+"/adversary"]
		require.NotNil(t, adv.Adversary)
		require.Equal(t, uint64(150), adv.UniqueAbsentKeys) // -ops / 10 subrounds
		require.Equal(t, 150, adv.Adversary.Rounds[0].Queries)
	}
	// The static fake repeats its false positives forever: the adversary
	// keeps every false-positive key and the last round is all false
	// positives. The adaptive fake fixes them: round 2 finds none.
	static, adaptive := byKey["fake/adversary"].Adversary, byKey["fakeadaptive/adversary"].Adversary
	require.Greater(t, static.Rounds[0].FPKeys, 0)
	require.Len(t, static.Rounds, 5)
	require.InDelta(t, 1.0, static.FinalFPRate, 1e-9)
	require.Len(t, adaptive.Rounds, 2)
	require.Zero(t, adaptive.Rounds[1].FPKeys)
	require.Zero(t, adaptive.FinalFPRate)
	// On negzipf the adaptive fake pays each (key, table) pair at most once.
	fa := byKey["fakeadaptive/negzipf"]
	require.LessOrEqual(t, *fa.FalsePositiveProbes, fa.UniqueAbsentKeys*fakeTables)
	require.Less(t, *fa.FalsePositiveProbes, *byKey["fake/negzipf"].FalsePositiveProbes)
	// Pebble: probes are not split on stored-key workloads.
	require.Nil(t, byKey["pebble/workloadc"].FalsePositiveProbes)
	require.Nil(t, byKey["pebble/workloadc"].DataBlockReads)
	require.NotNil(t, byKey["taf/workloadc"].DataBlockReads)
	require.NotNil(t, byKey["taf/workloadc"].Adaptations)
	require.Positive(t, byKey["taf/negzipf"].FilterMemoryBytes)
	require.Positive(t, byKey["pebble/negzipf"].FilterMemoryBytes)

	require.Contains(t, table, "== negzipf")
	require.Contains(t, table, "pebble")

	f, err := os.Open(csvPath)
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 1+len(results))
	require.Contains(t, rows[0], "fp_probes_per_1k_gets")

	svg, err := os.ReadFile(svgPath)
	require.NoError(t, err)
	require.Contains(t, string(svg), "<svg")

	require.NoError(t, writePlot(pngPath, results))
	png, err := os.ReadFile(pngPath)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")))
}

func TestReuseDataDir(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-policies", "pebble", "-workloads", "c", "-records", "2000", "-ops", "200",
		"-calibrate", "100", "-dir", dir, "-q"}
	var out bytes.Buffer
	require.NoError(t, run(args, &out, &out))
	require.NotContains(t, out.String(), "reusing")
	require.Regexp(t, `records ready in [0-9.]+s \(bottom: writes [0-9.]+s, flush [0-9.]+s, compaction [0-9.]+s; top: writes [0-9.]+s, flush and compactions [0-9.]+s\)`,
		out.String(), "a load's steps timed")
	out.Reset()
	require.NoError(t, run(args, &out, &out))
	require.Contains(t, out.String(), "reusing 2000 records")
	require.NotContains(t, out.String(), "bottom: writes", "nothing loaded")
	out.Reset()
	args[5] = "3000" // more records than kept: reload
	require.NoError(t, run(args, &out, &out))
	require.NotContains(t, out.String(), "reusing")
}

// TestTableFormatFlag: -table-format row reaches the adaptkv store (its
// kept tables are row tables) and the data set kept under -dir records it,
// so a run with the other layout loads afresh instead of reusing it.
func TestTableFormatFlag(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-policies", "bloom", "-workloads", "c", "-records", "3000", "-ops", "200",
		"-calibrate", "100", "-memtable-size", "16384", "-dir", dir, "-q", "-table-format", "row"}
	var out bytes.Buffer
	require.NoError(t, run(args, &out, &out))
	names, err := filepath.Glob(filepath.Join(dir, "bloom", "db", "*.sst"))
	require.NoError(t, err)
	require.NotEmpty(t, names)
	for _, name := range names {
		r, err := sstable.Open(vfs.Default, name, sstable.ReaderOptions{})
		require.NoError(t, err)
		require.Equal(t, sstable.FormatRow, r.Format(), name)
		require.NoError(t, r.Close())
	}
	out.Reset()
	args[len(args)-1] = "columnar"
	require.NoError(t, run(args, &out, &out))
	require.NotContains(t, out.String(), "reusing")
}

// TestPolicyVariant: "policy:name=value..." is a store of that policy with
// those kv.Options, beside the plain one: both run and report under their
// names, the variant's options reach its store (its OPTIONS file) and not
// the other's, and a variant of a Pebble peer, an unknown option, a bad
// value or another policy is refused. Variants are checked on the run's
// options: a remote cache of 16 MiB is valid in kvbench's 64 MiB block
// cache (not in kv's default 8 MiB), one of 2 MiB not in a 2 MiB one.
func TestPolicyVariant(t *testing.T) {
	dir := t.TempDir()
	variant := "aprefix:fix_rule=every:record_absent=never:remote_cache_size=16777216"
	args := []string{"-policies", "aprefix," + variant, "-workloads", "negzipf", "-records", "3000", "-ops", "2000",
		"-calibrate", "200", "-memtable-size", "65536", "-target-file-size", "65536", "-dir", dir, "-q"}
	_, results, _ := runJSON(t, args...)
	require.Len(t, results, 2)
	require.Equal(t, "aprefix", results[0].Policy)
	require.Equal(t, variant, results[1].Policy)
	for _, r := range results {
		checkConsistent(t, r)
		require.Zero(t, r.StoredNotFound)
		text, err := os.ReadFile(filepath.Join(dir, r.Policy, "db", "OPTIONS"))
		require.NoError(t, err)
		o := &kv.Options{}
		require.NoError(t, kv.ParseOptions(string(text), o))
		require.Equal(t, "aprefix", o.FilterPolicy)
		if r.Policy == variant {
			require.Equal(t, kv.FixEvery, o.FixRule)
			require.Equal(t, kv.RecordNever, o.RecordAbsent)
			require.Equal(t, int64(16<<20), o.RemoteCacheSize)
		} else {
			require.Equal(t, kv.FixCached, o.FixRule)
			require.Equal(t, kv.RecordAuto, o.RecordAbsent)
		}
	}
	for _, bad := range []string{"pebble:fix_rule=every", "aprefix:no_such_option=1", "aprefix:fix_rule=sometimes",
		"aprefix:fix_rule", "nosuchfilter:fix_rule=every", "aprefix:block_cache_size=-2", "aprefix:filter_policy=taf"} {
		var out bytes.Buffer
		require.Error(t, run([]string{"-policies", bad, "-q"}, &out, &out), bad)
	}
	var out bytes.Buffer
	err := run([]string{"-policies", "aprefix:remote_cache_size=2097152", "-cache-size", "2097152", "-q"}, &out, &out)
	require.ErrorIs(t, err, kv.ErrInvalidOptions)
	require.NotContains(t, out.String(), "records ready", "refused before any store is loaded")
}

func TestBadArguments(t *testing.T) {
	bad := [][]string{
		{"-policies", "nosuchfilter"},
		{"-workloads", "nosuchworkload"},
		{"-workloads", "/nonexistent/file"},
		{"-threads", "0"},
		{"-target", "-1"},
		{"-target", "0.5"},
		{"-target", "NaN"},
		{"-records", "0"},
		{"-table-format", "diagonal"},
		{"-peer-memtable-size", "100"},
		{"-peer-memtable-size", "-1"},
		{"-cache-size", "65536"},
		{"-value-size", "-1"},
		{"-value-size", "2000000"},
		{"-fix", "sometimes"},
		{"-read", "scan"},
		{"-wal", "direct"},
		{"-write", "-write-values", "0"},
		{"-write", "-write-writers", "two"},
		{"-write", "-write-sync", "always"},
		{"-write", "-write-keys", "sorted"},
		{"-write", "-write-ops", "0"},
		{"-write", "-markdown", "out.md"},
		{"-json", "-", "-markdown", "-"},
		{"-dir", t.TempDir(), "-repeat", "2"},
		{"-plot", "x.gif", "-records", "10", "-policies", "fake", "-workloads", "c", "-ops", "1"},
		{"positional"},
	}
	for _, args := range bad {
		var out bytes.Buffer
		require.Error(t, run(append(args, "-q"), &out, &out), "%v", args)
	}
	bad2 := filepath.Join(t.TempDir(), "bad")
	require.NoError(t, os.WriteFile(bad2, []byte("readproportion=2\n"), 0o644))
	var out bytes.Buffer
	err := run([]string{"-workloads", bad2, "-q"}, &out, &out)
	require.ErrorContains(t, err, "readproportion")
}

// TestReadSeekPrefix: -read seekprefix reaches the adaptkv stores (the
// header says so; TestReusedIteratorSeesWrites checks the reads go through
// the pooled iterators) and each SeekPrefixGE counts as a Get: the same
// streams under -read get and -read seekprefix read and find alike. (That
// SeekPrefixGE wastes what Get wastes is kv's TestSeekPrefixGEWastesAsGet,
// on stores with fixed filter seeds; here the seeds are random.)
func TestReadSeekPrefix(t *testing.T) {
	args := []string{"-policies", "aprefix,bloom", "-workloads", "negzipf,c", "-records", "3000", "-ops", "3000",
		"-calibrate", "500", "-memtable-size", "65536", "-target-file-size", "65536"}
	_, gets, _ := runJSON(t, args...)
	_, seeks, table := runJSON(t, append(args, "-read", "seekprefix")...)
	require.Contains(t, table, "Iterator.SeekPrefixGE, reused iterator")
	require.Len(t, seeks, len(gets))
	for i, r := range seeks {
		g := gets[i]
		checkConsistent(t, r)
		require.Equal(t, g.Policy+g.Workload, r.Policy+r.Workload)
		require.Equal(t, g.Reads, r.Reads)
		require.Equal(t, g.AbsentReads, r.AbsentReads)
		require.Zero(t, r.StoredNotFound, "%s/%s", r.Policy, r.Workload)
		require.Equal(t, g.Reads, r.Gets, "%s/%s: every SeekPrefixGE is a Get", r.Policy, r.Workload)
	}
}

// TestPebbleFilterCountersMatchPebble: the counting wrapper sees exactly the
// filter checks Pebble reports in db.Metrics().Filter, for both peers.
func TestPebbleFilterCountersMatchPebble(t *testing.T) {
	for _, l6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("l6=%v", l6), func(t *testing.T) {
			cfg := smallConfig(t)
			s, err := openPebble(cfg, l6)
			require.NoError(t, err)
			defer s.Close()
			r := testRunner(s, "pebble", 1)
			require.NoError(t, r.loadBottom(4000))
			require.NoError(t, r.load(4000, 5000))
			before := s.db.Metrics().Filter
			c0, _ := s.Metrics()
			_, err = r.calibrate(2000)
			require.NoError(t, err)
			after := s.db.Metrics().Filter
			c1, _ := s.Metrics()
			d := c1.Sub(c0)
			require.Positive(t, d.FilterChecks)
			require.Equal(t, uint64(after.Hits-before.Hits), d.FilterNegatives)
			require.Equal(t, uint64(after.Misses-before.Misses), d.FilterChecks-d.FilterNegatives)
		})
	}
}

// TestReusedIteratorSeesWrites: pebble-l6 and the adaptkv stores under
// -read seekprefix reuse iterators, but never one opened before a write
// that completed; while nothing is written one iterator serves every read.
func TestReusedIteratorSeesWrites(t *testing.T) {
	open := map[string]func(StoreConfig) (Store, func() int, error){
		"pebble-l6": func(cfg StoreConfig) (Store, func() int, error) {
			s, err := openPebble(cfg, true)
			if err != nil {
				return nil, nil, err
			}
			return s, func() int { return len(s.iters.pool) }, nil
		},
		"aprefix-seekprefix": func(cfg StoreConfig) (Store, func() int, error) {
			cfg.SeekPrefixReads = true
			s, err := openKV("aprefix", cfg)
			if err != nil {
				return nil, nil, err
			}
			return s, func() int { return len(s.(*kvStore).iters.pool) }, nil
		},
	}
	for name, open := range open {
		t.Run(name, func(t *testing.T) {
			s, pooled, err := open(smallConfig(t))
			require.NoError(t, err)
			for i := range 200 {
				k := []byte(fmt.Sprintf("user%06d", i))
				found, err := s.Get(k)
				require.NoError(t, err)
				require.False(t, found)
				require.NoError(t, s.Set(k, []byte("v")))
				found, err = s.Get(k)
				require.NoError(t, err)
				require.True(t, found, "key %d written before the Get", i)
				require.NoError(t, s.Delete(k))
				found, err = s.Get(k)
				require.NoError(t, err)
				require.False(t, found, "key %d deleted before the Get", i)
			}
			require.NoError(t, s.Set([]byte("user-x"), []byte("v")))
			for range 100 {
				found, err := s.Get([]byte("user-x"))
				require.NoError(t, err)
				require.True(t, found)
			}
			require.Equal(t, 1, pooled(), "one goroutine reuses one iterator")
			require.NoError(t, s.Close())
		})
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(timeMicros(i))
	}
	require.InDelta(t, 500, h.quantile(0.5), 500*0.04)
	require.InDelta(t, 990, h.quantile(0.99), 990*0.04)
	require.InDelta(t, 999, h.quantile(0.999), 999*0.04)
	var empty histogram
	require.Zero(t, empty.quantile(0.5))
	for v := uint64(1); v < 1<<40; v = v*3 + 1 {
		i := bucketOf(v)
		require.InDelta(t, float64(v), bucketMid(i), float64(v)*0.04+1, "v=%d", v)
	}
}

// TestJSONToStdout: with -json - the JSON is all of stdout (the table goes
// to stderr), and "none" (no filters) probes every candidate table.
func TestJSONToStdout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"-policies", "none", "-workloads", "negzipf", "-records", "10000", "-ops", "500",
		"-calibrate", "200", "-memtable-size", "65536", "-target-file-size", "65536", "-json", "-", "-q"}
	require.NoError(t, run(args, &stdout, &stderr), stderr.String())
	var results []*Result
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &results), "stdout is only JSON")
	require.Contains(t, stderr.String(), "== negzipf")
	require.Len(t, results, 1)
	r := results[0]
	checkConsistent(t, r)
	require.Equal(t, 1.0, r.Eps, "without filters every candidate table is a false positive")
	// Every candidate table is probed and every probe is wasted.
	require.InDelta(t, r.ChecksPerAbsentGet*float64(r.Reads), float64(*r.FalsePositiveProbes), 1e-6)
	require.Equal(t, *r.FalsePositiveProbes, r.FilterMaybes)
	require.Greater(t, r.ChecksPerAbsentGet, 1.0, "several tables per Get")
}

// TestBuiltinWorkloadsOutsideModule runs kvbench from a directory outside
// the source tree, as an installed binary would be: the built-in workloads
// come from the embedded copies, and a file in the working directory wins
// over a built-in of the same name.
func TestBuiltinWorkloadsOutsideModule(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // os.Chdir, restored when the test ends
	_, err := os.Stat(filepath.Join("testdata", "workloads"))
	require.True(t, os.IsNotExist(err), "the temporary directory has no testdata")

	_, results, table := runJSON(t, "-policies", "fake,bloom", "-workloads", "c,negzipf,adversary",
		"-records", "2000", "-ops", "300", "-calibrate", "200",
		"-memtable-size", "65536", "-target-file-size", "65536")
	require.Len(t, results, 2*3)
	got := map[string]bool{}
	for _, r := range results {
		checkConsistent(t, r)
		got[r.Workload] = true
		require.Equal(t, uint64(2000), r.Records)
	}
	require.Equal(t, map[string]bool{"workloadc": true, "negzipf": true, "adversary": true}, got)
	require.Contains(t, table, "== adversary")

	// Without -records the record count is the first built-in's recordcount.
	ws, err := loadWorkloads("a,b,c,d,e,f,negzipf,mixed,adversary")
	require.NoError(t, err)
	require.Len(t, ws, 9)
	require.Equal(t, uint64(500000), ws[0].RecordCount)

	// An existing file named like a built-in is read instead of the built-in.
	require.NoError(t, os.WriteFile("negzipf", []byte("name=localneg\nrecordcount=1500\nreadproportion=1\nnegativeproportion=1\n"), 0o644))
	ws, err = loadWorkloads("negzipf")
	require.NoError(t, err)
	require.Equal(t, "localneg", ws[0].Name)
	require.Equal(t, uint64(1500), ws[0].RecordCount)

	var out bytes.Buffer
	err = run([]string{"-workloads", "workloadz", "-q"}, &out, &out)
	require.ErrorContains(t, err, "not a built-in workload")
}

// TestUsage: -h is not an error for main, and the usage names every
// built-in workload and the record count the default run loads.
func TestUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run([]string{"-h"}, &stdout, &stderr)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Empty(t, stdout.String())
	usage := stderr.String()
	for _, name := range ycsb.BuiltinNames() {
		require.Contains(t, usage, name)
	}
	require.Contains(t, usage, "loads 500000 records")
	require.Contains(t, usage, "runs the workloads "+defaultWorkloads)
	require.NotContains(t, usage, "(default 500000)", "-records defaults to the first workload's recordcount")
}

// TestWriteAmp: a workload that writes reports each real store's write
// amplification (adaptkv's Metrics and Pebble's level metrics); one that
// only reads (first, on the settled store) flushes nothing and reports none.
func TestWriteAmp(t *testing.T) {
	_, results, table := runJSON(t, "-policies", "taf,pebble", "-workloads", "workloadc,workloada", "-records", "10000",
		"-ops", "20000", "-calibrate", "200", "-memtable-size", "65536", "-target-file-size", "65536")
	require.Len(t, results, 4)
	for _, r := range results {
		checkConsistent(t, r)
		if r.Workload == "workloadc" {
			require.Nil(t, r.WriteAmp, "%s: a read-only workload flushes nothing", r.Policy)
			continue
		}
		require.NotNil(t, r.WriteAmp, "%s: 10k updates flush", r.Policy)
		t.Logf("%s/%s: write amplification %.2f", r.Policy, r.Workload, *r.WriteAmp)
	}
	require.Contains(t, table, "WA")
}

// TestTarget: with -target a workload offers at most that many operations
// per second: two threads at 20000 ops/s in all (one operation each per
// 100 us) cannot finish 3000 operations before the last of each (its
// 1500th) is due, 149.9 ms after the start, less the pacer's slack. The
// fake store alone runs them in a few milliseconds.
func TestTarget(t *testing.T) {
	_, results, _ := runJSON(t, "-policies", "fake", "-workloads", "c", "-records", "2000", "-ops", "3000",
		"-threads", "2", "-target", "20000", "-calibrate", "100")
	require.Len(t, results, 1)
	r := results[0]
	require.Equal(t, uint64(3000), r.Ops)
	require.GreaterOrEqual(t, r.Seconds, 0.1499-pacerSlack.Seconds())
	require.LessOrEqual(t, r.OpsPerSec, 3000/(0.1499-pacerSlack.Seconds()))
}

// TestCacheAndValueSize: -cache-size sets every store's block cache (the
// adaptkv store's and the Pebble peer's), -value-size the records' values.
func TestCacheAndValueSize(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-policies", "bloom,pebble", "-workloads", "c", "-records", "3000", "-ops", "200",
		"-calibrate", "100", "-memtable-size", "16384", "-cache-size", "3145728", "-value-size", "40", "-dir", dir, "-q"}
	var out bytes.Buffer
	require.NoError(t, run(args, &out, &out))
	require.Contains(t, out.String(), "block cache 3 MiB")
	for _, store := range []string{"bloom", "pebble"} {
		m, ok := readMarker(filepath.Join(dir, store))
		require.True(t, ok, store)
		require.Equal(t, int64(3<<20), m.Config.BlockCacheSize, store)
		require.Equal(t, 40, m.ValueSize, store)
	}
	db, err := kv.Open(filepath.Join(dir, "bloom", "db"), &kv.Options{FilterPolicy: "bloom", ReadOnly: true})
	require.NoError(t, err)
	v, err := db.Get(ycsb.Key(0))
	require.NoError(t, err)
	require.Len(t, v, 40)
	require.NoError(t, db.Close())
}

// TestPeerMemTableSize: -peer-memtable-size sets only the Pebble peers'
// memtable; their level sizes and the adaptkv stores' memtable stay.
func TestPeerMemTableSize(t *testing.T) {
	cfg := StoreConfig{MemTableSize: 2 << 20, TargetFileSize: 2 << 20, BaseLevelBytes: 32 << 20, L0Trigger: 4}
	opts := pebbleOptions(cfg, nil, nil)
	require.Equal(t, uint64(2<<20), opts.MemTableSize)
	cfg.PeerMemTableSize = 3 << 20
	opts = pebbleOptions(cfg, nil, nil)
	require.Equal(t, uint64(3<<20), opts.MemTableSize)
	require.Equal(t, int64(32<<20), opts.LBaseMaxBytes)

	// The flag reaches the config (and the kept data set's marker).
	dir := t.TempDir()
	args := []string{"-policies", "pebble", "-workloads", "c", "-records", "3000", "-ops", "200",
		"-calibrate", "100", "-memtable-size", "16384", "-peer-memtable-size", "24576", "-dir", dir, "-q"}
	var out bytes.Buffer
	require.NoError(t, run(args, &out, &out))
	m, ok := readMarker(filepath.Join(dir, "pebble"))
	require.True(t, ok)
	require.Equal(t, 24576, m.Config.PeerMemTableSize)
	require.Equal(t, 16384, m.Config.MemTableSize)
}

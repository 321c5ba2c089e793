package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"time"

	"github.com/adaptkv/adaptkv/cmd/kvbench/internal/ycsb"
	"github.com/adaptkv/adaptkv/kv"
	"github.com/adaptkv/adaptkv/sstable"
)

const (
	defaultWorkloads = "workloadc,negzipf,mixed,churn,adversary"
	// The LSM shape of every store: small memtables and tables so that the
	// default data set (about 60 MB of records) makes tens of tables over
	// L0..L2 and beyond.
	defaultMemTable   = 2 << 20
	defaultTargetFile = 2 << 20
	defaultL0Trigger  = 4
	defaultCache      = 64 << 20
	// maxValueSize bounds -value-size (a record is one value).
	maxValueSize = 1 << 20
)

const usageText = `kvbench compares filter policies on read amplification and its cost.

Usage: kvbench [flags]

With no flags it loads %d records (100-byte values, keys "user"+FNV-64 of
the record number) into a fresh store per policy in a temporary directory,
runs the workloads %s on each, and on a Pebble peer
(a real pebble.DB with its bloom filter, read with DB.Get as "pebble" and
with a UseL6Filters iterator as "pebble-l6"), prints the comparison table and
removes its data; about two minutes on 2 cores. The adaptkv policies run
by default are %s; the others (none, fuse, rsqf, utaf) run
with -policies. Workloads run in the order given on the same store.

Load: 80%% of the records are bulk-loaded and compacted into the last level,
the other 20%% are written through memtable flushes and compactions on top,
so a read consults several tables. Every store gets the same LSM options:
%d MiB memtables, %d MiB tables, L0 trigger %d, level size ratio 10,
%d MiB block cache (-cache-size); the first level below L0 holds memtable
x L0 trigger x 4 bytes (adaptkv's rule, which the Pebble peer copies
through LBaseMaxBytes).
The Pebble peers also run with the adaptkv store's memtable and L0 stall
thresholds, compaction concurrency and open-table bound; the run header
prints the options both engines share and every one that differs (each
engine's own mechanisms: L0 file threshold, flush splits, merged flushes,
table format, NoSync durability).
The default run's trees after load: adaptkv L0 (one table), L5 and L6, about
30 tables; the Pebble peer L5 and L6, about 35 tables (both size levels
dynamically, so L5 is the base level). Pebble's DB.Get skips the filters of
L6, so "pebble" checks fewer filters per Get (the checks/get column) than
"pebble-l6" and the adaptkv stores, which check every level; the L6 table
it then probes for an absent key counts as a probe and a false positive.

Each workload reports its stores' peak memtable memory and the process's
peak resident set. With -repeat N everything runs N times, the stores in
a rotated order and run i with seed -seed+i, and the table shows medians.

With -write it runs write streams instead: for every combination of
-write-values, -write-writers, -write-sync and -write-keys, each store
(default: the adaptkv store's default policy and pebble) writes the same
stream of 16-byte keys and incompressible values into a fresh store, the
stores in rotated order in each of -repeat rounds, and a table per stream
shows writes per second, p50, p99, p99.9 and the longest write, the time
writers stalled, flushes, compactions and write amplification (medians
over the rounds; -json has every run).

Workloads are YCSB property files (recordcount, operationcount,
readproportion, updateproportion, insertproportion, scanproportion,
readmodifywriteproportion, requestdistribution=zipfian|uniform|latest,
maxscanlength, fieldcount, fieldlength) with kvbench's extensions
(negativeproportion, negativedistribution, negativeuniverse, negativeshift, adversary,
adversaryqueries, adversarysubrounds, adversarymaxrounds). Each -workloads
entry is a property file if that path exists, else a built-in workload:
%s
(a..f stand for workloada..workloadf). The built-ins are compiled into
kvbench (copies of the module's testdata/workloads), so an installed binary
runs from any directory; to change one, copy it from testdata/workloads,
edit it and pass its path.

Flags:
`

type options struct {
	policies, workloads     string
	records, ops            uint64
	threads, bits, knownNeg int
	target                  float64
	dir                     string
	seed                    uint64
	jsonPath, csvPath, plot string
	cpuProfile, tracePath   string
	tableFormat             string
	memTable, targetFile    int
	peerMemTable            int
	calibrate               int
	repeat                  int
	direct                  bool
	fixRule                 string
	record                  string
	fixInline               bool
	read                    string // -read: get or seekprefix
	remoteCache             int64
	cacheSize               int64 // -cache-size: every store's block cache
	valueSize               int   // -value-size: 0 keeps the workloads' own
	writeMode               bool
	write                   writeFlags
	quiet                   bool
	recordsSet              bool
}

// run is kvbench's main: it parses args, runs the benchmark, and writes the
// table to stdout (or stderr when the JSON goes to stdout).
func run(args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("kvbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, usageText, defaultRecordCount(), defaultWorkloads, strings.Join(defaultKVPolicies, ", "), defaultMemTable>>20,
			defaultTargetFile>>20, defaultL0Trigger, defaultCache>>20, strings.Join(ycsb.BuiltinNames(), ", "))
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nPolicies available in this build: %s\n", strings.Join(allPolicies(), ","))
	}
	fs.StringVar(&o.policies, "policies", "", "comma-separated policies (default: "+strings.Join(defaultPolicies(), ",")+")")
	fs.StringVar(&o.workloads, "workloads", defaultWorkloads, "comma-separated workload names or property-file paths")
	fs.Uint64Var(&o.records, "records", 0, "records to load (default: the first workload's recordcount; every built-in workload says 500000)")
	fs.Uint64Var(&o.ops, "ops", 0, "operations per workload (0: each file's operationcount); the adversary then starts with ops/adversarysubrounds keys")
	fs.IntVar(&o.threads, "threads", 1, "worker threads for load and mixed workloads (the adversary is single-threaded)")
	fs.Float64Var(&o.target, "target", 0, "throttle mixed workloads to N operations per second over all threads (YCSB's -target), so that\nstores are compared at the same offered load (0: as fast as each store goes)")
	fs.IntVar(&o.bits, "bits", 10, "bits/key of the bloom policy and of the Pebble peer's bloom filter")
	fs.IntVar(&o.knownNeg, "knownnegatives", 0, "absent keys each adaptkv store remembers for its new tables (kv.Options.KnownNegatives; 0: default, -1: off)")
	fs.StringVar(&o.record, "record", "auto", "which absent Gets the adaptkv stores record as known negatives (kv.Options.RecordAbsent): auto (with -direct,\na -fix other than every, or stacked), always or never")
	fs.StringVar(&o.dir, "dir", "", "keep each store's data in DIR/<policy> and reuse it when it matches (default: a temporary directory, removed);\nkept stores keep their adapted filters, so rerun with another -seed for fresh absent keys")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed of values, operation streams and the absent-key universes")
	fs.StringVar(&o.jsonPath, "json", "", "write results as JSON to FILE (- for stdout)")
	fs.StringVar(&o.csvPath, "csv", "", "write results as CSV to FILE")
	fs.StringVar(&o.plot, "plot", "", "draw wasted probes and ops/s per policy to FILE.svg or FILE.png")
	fs.IntVar(&o.memTable, "memtable-size", defaultMemTable, "memtable size in bytes")
	fs.IntVar(&o.peerMemTable, "peer-memtable-size", 0, "memtable size in bytes of the Pebble peers (0: -memtable-size; their level sizes and bulk load stay those of\n-memtable-size): an adaptkv store holds one more memtable while L0 is deep (kv.Options.MergeFlushL0Depth);\nthe memtbl MiB column shows each store's peak")
	fs.Int64Var(&o.cacheSize, "cache-size", defaultCache, "block cache size in bytes of every store (the Pebble peers' too); with -direct the only cache of table\nblocks, so a data set larger than it makes a wasted probe a device read")
	fs.IntVar(&o.valueSize, "value-size", 0, "bytes of every record's value, loaded and written (0: each workload's fieldcount x fieldlength)")
	fs.IntVar(&o.targetFile, "target-file-size", defaultTargetFile, "target table size in bytes")
	fs.StringVar(&o.tableFormat, "table-format", "columnar", "block layout of the adaptkv stores' tables: columnar or row (kv.Options.TableFormat;\ntheir flushes write row blocks either way; the Pebble peers write Pebble's default, row)")
	fs.IntVar(&o.calibrate, "calibrate", 20000, "fresh keys per calibration pass (eps and checks per Get for the FP bound)")
	fs.IntVar(&o.repeat, "repeat", 1, "run everything N times, run i with seed -seed+i and the stores in an order rotated by i*stores/N;\nthe table shows each figure's median over the runs (ops/s and FP/1k gets with their min-max), -json and -csv every run's rows")
	fs.BoolVar(&o.direct, "direct", false, "cold storage: every store reads its tables around the OS page cache (O_DIRECT; kv.Options.DirectReads,\nthe Pebble peers through the same reads), so the block cache is the only cache; Linux")
	fs.StringVar(&o.fixRule, "fix", "default", "which false positives the adaptkv stores' adaptive filters fix (kv.Options.FixRule): default (cached with\n-direct, else every), every, repeated (keys the known-negative record holds), auto (every one while absent keys repeat,\nelse those of keys asked before), or cached (those of keys asked before, the others cached per table)")
	fs.BoolVar(&o.fixInline, "fix-inline", false, "the adaptkv stores' Gets make their fixes themselves (kv.Options.FixInline) instead of queueing them\nto the store's background goroutine")
	fs.Int64Var(&o.remoteCache, "remote-cache", 0, "bytes of the adaptkv stores' block cache that keep remote chunks for fixes (kv.Options.RemoteCacheSize;\n0: the store's default, 1/16 of the block cache; -1: none)")
	fs.BoolVar(&o.writeMode, "write", false, "run write streams instead of the read workloads: every combination of -write-values, -write-writers,\n-write-sync and -write-keys, a fresh store per run, against the stores of -policies (default: the adaptkv\nstore's default policy and pebble); per write p50/p99/p99.9/max, stall time, flushes, compactions, write\namplification")
	fs.StringVar(&o.write.values, "write-values", "100,1024,4096", "-write: value sizes in bytes (keys are 16 bytes; values incompressible)")
	fs.StringVar(&o.write.writers, "write-writers", "1,2", "-write: writer goroutines")
	fs.StringVar(&o.write.sync, "write-sync", "nosync", "-write: nosync, sync, or both (nosync,sync)")
	fs.StringVar(&o.write.keys, "write-keys", "random", "-write: random, sequential, or both")
	fs.Int64Var(&o.write.ops, "write-ops", 300_000, "-write: writes a run (a tenth for sync)")
	fs.Int64Var(&o.write.bytes, "write-bytes", 256<<20, "-write: at most this many key and value bytes a run (fewer writes for large values)")
	fs.StringVar(&o.read, "read", "get", "how the adaptkv stores read points: get (DB.Get) or seekprefix (Iterator.SeekPrefixGE on an iterator reused\nwhile nothing is written, as pebble-l6 reads Pebble)")
	fs.BoolVar(&o.quiet, "q", false, "no progress bars")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to FILE (go tool pprof)")
	fs.StringVar(&o.tracePath, "trace", "", "write an execution trace of the whole run to FILE (go tool trace): where slow writes wait")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (flags only; see -h)", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "records" {
			o.recordsSet = true
		}
	})
	if o.threads < 1 || o.bits < 1 || o.memTable < 1<<10 || o.targetFile < 1<<10 || o.calibrate < 1 || o.repeat < 1 ||
		(o.peerMemTable != 0 && o.peerMemTable < 1<<10) {
		return errors.New("-threads, -bits, -calibrate, -repeat must be positive; -memtable-size, -target-file-size at least 1 KiB, -peer-memtable-size 0 or at least 1 KiB")
	}
	if o.cacheSize < 1<<20 {
		return fmt.Errorf("-cache-size %d: want at least 1 MiB", o.cacheSize)
	}
	if o.valueSize < 0 || o.valueSize > maxValueSize {
		return fmt.Errorf("-value-size %d: want 0 (the workloads' own) to %d", o.valueSize, maxValueSize)
	}
	tableFormat, err := sstable.ParseFormat(o.tableFormat)
	if err != nil {
		return fmt.Errorf("-table-format: %w", err)
	}
	if o.read != "get" && o.read != "seekprefix" {
		return fmt.Errorf("-read %q: want get or seekprefix", o.read)
	}
	if _, ok := recordRules[o.record]; !ok {
		return fmt.Errorf("-record %q: want auto, always or never", o.record)
	}
	if _, ok := fixRules[o.fixRule]; !ok {
		return fmt.Errorf("-fix %q: want every, repeated or auto", o.fixRule)
	}
	if !(o.target == 0 || (o.target >= 1 && o.target <= 1e9)) {
		return fmt.Errorf("-target %v: want 0 (unthrottled) or operations per second in [1, 1e9]", o.target)
	}
	workloads, err := loadWorkloads(o.workloads)
	if err != nil {
		return err
	}
	if !o.recordsSet {
		o.records = workloads[0].RecordCount
	}
	if o.valueSize > 0 {
		for _, w := range workloads {
			w.FieldCount, w.FieldLength = 1, o.valueSize
		}
	}
	if o.records == 0 {
		return errors.New("-records must be positive")
	}
	if o.writeMode && o.policies == "" {
		o.policies = kv.DefaultFilterPolicy + "," + pebblePeerName
	}
	policies, err := selectPolicies(o.policies)
	if err != nil {
		return err
	}
	if o.writeMode {
		if _, err := o.write.specs(); err != nil {
			return err
		}
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if o.tracePath != "" {
		f, err := os.Create(o.tracePath)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}

	table := stdout
	if o.jsonPath == "-" {
		table = stderr
	}
	showProgress := !o.quiet && isTerminal(stderr) && !(o.jsonPath == "-" && !isTerminal(stdout))
	prog := func(desc string, total int64) *progress {
		if !showProgress {
			return nil
		}
		return newProgress(stderr, desc, total)
	}

	base := o.dir
	if base == "" {
		base, err = os.MkdirTemp("", "kvbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(base)
	}
	cfg := defaultConfig(o, tableFormat)
	printConfig(table, cfg)
	if o.writeMode {
		return runWrites(o, cfg, policies, base, table, stdout, prog)
	}
	valueSize := workloads[0].ValueSize()
	var results []*Result
	start := time.Now()
	for rep := 0; rep < o.repeat; rep++ {
		ro := o
		ro.seed = o.seed + uint64(rep)
		for _, pol := range rotated(policies, rep, o.repeat) {
			// Each store starts from the memory the last one left:
			// nothing but what the process itself holds.
			runtime.GC()
			debug.FreeOSMemory()
			rs, err := benchPolicy(pol, cfg, base, ro, workloads, valueSize, prog, table)
			if err != nil {
				return fmt.Errorf("%s: %w", pol, err)
			}
			for _, r := range rs {
				r.Repeat, r.Seed = rep, ro.seed
			}
			results = append(results, rs...)
		}
	}
	shown := results
	if o.repeat > 1 {
		shown = summarize(results)
	}
	// Group by workload, policies in the order given.
	slices.SortStableFunc(shown, func(a, b *Result) int {
		return indexOf(workloads, a.Workload) - indexOf(workloads, b.Workload)
	})
	printTable(table, shown)
	fmt.Fprint(table, tableNotes)
	fmt.Fprintf(table, "total time %.1fs\n", time.Since(start).Seconds())

	if o.jsonPath != "" {
		w, closeJSON, err := outputTo(o.jsonPath, stdout)
		if err != nil {
			return err
		}
		defer closeJSON()
		if err := writeJSON(w, results); err != nil {
			return err
		}
	}
	if o.csvPath != "" {
		f, err := os.Create(o.csvPath)
		if err != nil {
			return err
		}
		if err := writeCSV(f, results); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if o.plot != "" {
		if err := writePlot(o.plot, shown); err != nil {
			return err
		}
	}
	return nil
}

// outputTo returns where -json FILE goes (stdout for "-") and what closes
// it.
func outputTo(path string, stdout io.Writer) (io.Writer, func() error, error) {
	if path == "-" {
		return stdout, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

// defaultRecordCount is the recordcount of the default run's first workload:
// the records the default run loads.
func defaultRecordCount() uint64 {
	ws, err := loadWorkloads(defaultWorkloads)
	if err != nil {
		return 0
	}
	return ws[0].RecordCount
}

// rotated returns the stores in the order of run rep of n: rotated by
// rep*len/n, so that over the runs each store runs early and late.
func rotated(stores []string, rep, n int) []string {
	k := rep * len(stores) / n
	return append(slices.Clone(stores[k:]), stores[:k]...)
}

func indexOf(ws []*ycsb.Workload, name string) int {
	for i, w := range ws {
		if w.Name == name {
			return i
		}
	}
	return len(ws)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// benchPolicy loads (or reuses) one store, calibrates it and runs every workload.
func benchPolicy(pol string, cfg StoreConfig, base string, o options, workloads []*ycsb.Workload,
	valueSize int, prog func(string, int64) *progress, log io.Writer) ([]*Result, error) {
	dir := filepath.Join(base, pol)
	cfg.Dir = filepath.Join(dir, "db")
	want := marker{Records: o.records, ValueSize: valueSize, Seed: o.seed, Config: cfg}
	have, ok := readMarker(dir)
	reuse := o.dir != "" && ok && !have.Incomplete && have.ValueSize == want.ValueSize &&
		have.Config == want.Config && have.Records >= o.records
	if !reuse {
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r := &runner{policy: pol, threads: o.threads, target: o.target, seed: o.seed, valueSize: valueSize, progress: prog}
	t0 := time.Now()
	split := uint64(float64(o.records) * bottomShare)
	if reuse {
		r.records = have.Records
		fmt.Fprintf(log, "%s: reusing %d records in %s\n", pol, r.records, dir)
	} else {
		if o.dir != "" {
			m := want
			m.Incomplete = true
			if err := writeMarker(dir, m); err != nil {
				return nil, err
			}
		}
		// The bottom of the tree: bulk-loaded with a memtable large enough
		// to hold it, then compacted to the last level.
		store, err := openStore(pol, bulkConfig(cfg, split, valueSize))
		if err != nil {
			return nil, err
		}
		r.store = store
		err = r.loadBottom(split)
		if cerr := store.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
	}
	store, err := openStore(pol, cfg)
	if err != nil {
		return nil, err
	}
	r.store = store
	closeStore := func() error {
		err := store.Close()
		if o.dir != "" {
			m := want
			m.Records = r.records
			m.Incomplete = err != nil
			err = errors.Join(err, writeMarker(dir, m))
		}
		return err
	}
	if !reuse {
		if err := r.load(split, o.records); err != nil {
			store.Close()
			return nil, err
		}
	}
	cal, err := r.calibrate(min(o.calibrate, int(r.records)))
	if err != nil {
		store.Close()
		return nil, err
	}
	// After calibration: a store may open its tables (and filters) lazily.
	var shape Counters
	if err := store.Footprint(&shape); err != nil {
		store.Close()
		return nil, err
	}
	fmt.Fprintf(log, "%-8s %d records ready in %.1fs; tables per level L0..L6 %v; filter %.2f bits/key, %.2f MiB; eps %.5f, %.2f tables considered per absent Get\n",
		pol, r.records, time.Since(t0).Seconds(), shape.Files, shape.FilterBitsPerKey,
		float64(shape.FilterMemoryBytes)/(1<<20), cal.eps, cal.checksPerAbsentGet)

	var results []*Result
	for _, w := range workloads {
		var res *Result
		var err error
		wl := *w
		if wl.Adversary {
			if o.ops > 0 {
				wl.AdversaryQueries = max(1, o.ops/uint64(wl.AdversarySubrounds))
			}
			res, err = r.adversary(&wl, cal)
		} else {
			ops := wl.OperationCount
			if o.ops > 0 {
				ops = o.ops
			}
			res, err = r.run(&wl, ops, cal)
		}
		if err != nil {
			closeStore()
			return nil, err
		}
		results = append(results, res)
	}
	return results, closeStore()
}

// bulkConfig is cfg with a memtable large enough to hold n records of
// valueSize bytes, the same for every store (the Pebble peers' too).
func bulkConfig(cfg StoreConfig, n uint64, valueSize int) StoreConfig {
	bulk := cfg
	bulk.MemTableSize = max(cfg.MemTableSize, int(n)*(valueSize+64)+(1<<20))
	bulk.PeerMemTableSize = 0
	return bulk
}

// loadWorkloads resolves and parses the -workloads list.
func loadWorkloads(list string) ([]*ycsb.Workload, error) {
	var out []*ycsb.Workload
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		w, err := loadWorkload(name)
		if err != nil {
			return nil, err
		}
		if seen[w.Name] {
			return nil, fmt.Errorf("workload %s listed twice", w.Name)
		}
		seen[w.Name] = true
		if len(out) > 0 && w.ValueSize() != out[0].ValueSize() {
			return nil, fmt.Errorf("workload %s: value size %d differs from %s's %d (one data set per run)",
				w.Name, w.ValueSize(), out[0].Name, out[0].ValueSize())
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, errors.New("-workloads is empty")
	}
	return out, nil
}

// loadWorkload parses one -workloads entry: an existing file wins; otherwise
// the name must be a built-in workload, whose property file is embedded in
// the binary (a copy of the module's testdata/workloads), so an installed
// kvbench needs no source tree.
func loadWorkload(name string) (*ycsb.Workload, error) {
	if st, err := os.Stat(name); err == nil && !st.IsDir() {
		return ycsb.ParseFile(name)
	}
	w, err := ycsb.Builtin(name)
	if errors.Is(err, ycsb.ErrUnknownWorkload) {
		return nil, fmt.Errorf("workload %q: no such file and not a built-in workload (built-in: %s; a..f for workloada..workloadf)",
			name, strings.Join(ycsb.BuiltinNames(), ","))
	}
	return w, err
}

// selectPolicies resolves -policies.
func selectPolicies(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return defaultPolicies(), nil
	}
	known := allPolicies()
	var out []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(known, p) {
			return nil, fmt.Errorf("%w %q (available: %s)", ErrUnknownStore, p, strings.Join(known, ","))
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("-policies is empty")
	}
	return out, nil
}

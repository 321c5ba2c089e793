package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/adaptkv/adaptkv/cmd/kvbench/internal/ycsb"
)

const (
	// The read-only workloads first, on the tree the load left (the same
	// for every store); then the ones that write.
	defaultWorkloads = "workloadc,negzipf,adversary,mixed,churn"
	// The LSM shape of every store: small memtables and tables so that the
	// default data set (about 60 MB of records) makes tens of tables over
	// L0..L2 and beyond.
	defaultMemTable   = 2 << 20
	defaultTargetFile = 2 << 20
	defaultL0Trigger  = 4
	defaultCache      = 64 << 20
	// defaultInterleave is the operations a store runs a turn while the
	// stores take turns (-interleave): about 5-50 ms of a read workload.
	defaultInterleave = 10000
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
with -policies. An adaptkv policy followed by ":name=value" pairs is a store
of that policy with those kv.Options set (their names as in the store's
OPTIONS file), beside the plain one: -policies
aprefix,aprefix:record_absent=always compares an option as policies are.
Workloads run in the order given on the same store.

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

Each workload reports its stores' peak memtable memory and, with
-interleave 0, the process's peak resident set. With -repeat N everything
runs N times, the stores in a rotated order and run i with seed -seed+i,
and the table shows medians.
The stores run each workload at once, taking turns of -interleave
operations (%d; a store's time is that of its own turns): on a machine
whose speed drifts, every store meets the same moments. -interleave 0 runs
each store's workloads alone, one store after another.

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
	markdown                string
	cpuProfile, tracePath   string
	tableFormat             string
	memTable, targetFile    int
	peerMemTable            int
	calibrate               int
	repeat                  int
	interleave              uint64 // -interleave: operations a store runs a turn (0: each store alone)
	direct                  bool
	fixRule                 string
	record                  string
	fixInline               bool
	read                    string // -read: get or seekprefix
	wal                     string // -wal: mapped, write or buffered
	remoteCache             int64
	cacheSize               int64 // -cache-size: every store's block cache
	valueSize               int   // -value-size: 0 keeps the workloads' own
	writeMode               bool
	write                   writeFlags
	quiet                   bool
	recordsSet              bool
	interleaveSet           bool // -interleave was given (its default gives way to -target and -write)
}

// run is kvbench's main: it parses args, runs the benchmark, and writes the
// table to stdout (or stderr when the JSON goes to stdout).
func run(args []string, stdout, stderr io.Writer) error {
	var o options
	fs := o.flagSet(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (flags only; see -h)", fs.Args())
	}
	o.noteSet(fs)
	tableFormat, err := o.check()
	if err != nil {
		return err
	}
	workloads, policies, err := o.selection()
	if err != nil {
		return err
	}
	cfg := defaultConfig(o, tableFormat)
	for _, p := range policies {
		if err := checkVariant(p, cfg); err != nil {
			return err
		}
	}
	stopProfiles, err := o.startProfiles()
	if err != nil {
		return err
	}
	defer stopProfiles()

	// With -json - or -markdown -, stdout carries that output: the table
	// goes to stderr.
	table, dataToStdout := stdout, o.jsonPath == "-" || o.markdown == "-"
	if dataToStdout {
		table = stderr
	}
	showProgress := !o.quiet && isTerminal(stderr) && !(dataToStdout && !isTerminal(stdout))
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
	printConfig(table, cfg)
	if o.writeMode {
		return runWrites(o, cfg, policies, base, table, stdout, prog)
	}
	start := time.Now()
	results, err := runReads(o, cfg, policies, workloads, base, prog, table)
	if err != nil {
		return err
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

	return writeOutputs(o, results, shown, stdout)
}

// runReads runs every workload on every store, -repeat times with the
// stores in rotated order, and returns every run's results.
func runReads(o options, cfg StoreConfig, policies []string, workloads []*ycsb.Workload, base string,
	prog func(string, int64) *progress, table io.Writer) ([]*Result, error) {
	valueSize := workloads[0].ValueSize()
	var results []*Result
	for rep := 0; rep < o.repeat; rep++ {
		ro := o
		ro.seed = o.seed + uint64(rep)
		if o.interleave > 0 {
			rs, err := runInterleaved(rotated(policies, rep, o.repeat), cfg, base, ro, workloads, valueSize, prog, table)
			if err != nil {
				return nil, err
			}
			for _, r := range rs {
				r.Repeat, r.Seed = rep, ro.seed
			}
			results = append(results, rs...)
			continue
		}
		for _, pol := range rotated(policies, rep, o.repeat) {
			// Each store starts from the memory the last one left:
			// nothing but what the process itself holds.
			runtime.GC()
			debug.FreeOSMemory()
			rs, err := benchPolicy(pol, cfg, base, ro, workloads, valueSize, prog, table)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", pol, err)
			}
			for _, r := range rs {
				r.Repeat, r.Seed = rep, ro.seed
			}
			results = append(results, rs...)
		}
	}
	return results, nil
}

// writeOutputs writes -json (every run's rows), -csv, -markdown and -plot
// (the rows shown).
func writeOutputs(o options, results, shown []*Result, stdout io.Writer) error {
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
	if o.markdown != "" {
		w, closeMD, err := outputTo(o.markdown, stdout)
		if err != nil {
			return err
		}
		if err := errors.Join(writeMarkdown(w, shown), closeMD()); err != nil {
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
	p, err := prepareStore(pol, cfg, base, o, valueSize, prog, log)
	if err != nil {
		return nil, err
	}
	results, err := p.r.runWorkloads(workloads, o.ops, p.cal)
	if err != nil {
		p.close()
		return nil, err
	}
	return results, p.close()
}

// preparedStore is an open store, loaded and calibrated, that workloads
// can run on; close closes it (and writes its -dir marker).
type preparedStore struct {
	r     *runner
	cal   calibration
	close func() error
}

// prepareStore loads (or reuses) one store and calibrates it.
func prepareStore(pol string, cfg StoreConfig, base string, o options, valueSize int,
	prog func(string, int64) *progress, log io.Writer) (*preparedStore, error) {
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
	r.topStep = topStep(cfg, valueSize)
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
		if err := r.buildBottom(bulkConfig(cfg, split, valueSize), split); err != nil {
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
	loaded := ""
	if !reuse {
		loaded = " (" + r.phases.String() + ")"
	}
	fmt.Fprintf(log, "%-8s %d records ready in %.1fs%s; tables per level L0..L6 %v; filter %.2f bits/key, %.2f MiB; eps %.5f, %.2f tables considered per absent Get\n",
		pol, r.records, time.Since(t0).Seconds(), loaded, shape.Files, shape.FilterBitsPerKey,
		float64(shape.FilterMemoryBytes)/(1<<20), cal.eps, cal.checksPerAbsentGet)

	return &preparedStore{r: r, cal: cal, close: closeStore}, nil
}

// buildBottom writes the bottom of the tree, split records, into a store
// of cfg: bulk-loaded with a memtable large enough to hold it, then
// compacted to the last level.
func (r *runner) buildBottom(cfg StoreConfig, split uint64) error {
	store, err := openStore(r.policy, cfg)
	if err != nil {
		return err
	}
	r.store = store
	err = r.loadBottom(split)
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	return err
}

// runWorkloads runs each workload on r's store, ops operations each (0:
// the workload's own count; the adversary starts with ops/subrounds keys).
// A workload that follows one that wrote starts once the store's
// compactions have settled, as the first starts after the load: neither
// is timed on the other's background work (churn's compactions ran into
// the adversary's Gets, by amounts that differed from store to store).
func (r *runner) runWorkloads(workloads []*ycsb.Workload, ops uint64, cal calibration) ([]*Result, error) {
	var results []*Result
	for i, w := range workloads {
		if i > 0 && wrote(results[i-1]) {
			if err := r.store.Settle(settleQuiet); err != nil {
				return nil, err
			}
		}
		res, err := r.runWorkload(w, ops, cal)
		if err != nil {
			return nil, err
		}
		results = append(results, res)
	}
	return results, nil
}

// runWorkload runs one workload on r's store, ops operations (0: the
// workload's own count; the adversary starts with ops/subrounds keys).
func (r *runner) runWorkload(w *ycsb.Workload, ops uint64, cal calibration) (*Result, error) {
	wl := *w
	if wl.Adversary {
		if ops > 0 {
			wl.AdversaryQueries = max(1, ops/uint64(wl.AdversarySubrounds))
		}
		return r.adversary(&wl, cal)
	}
	n := wl.OperationCount
	if ops > 0 {
		n = ops
	}
	return r.run(&wl, n, cal)
}

// workers returns how many workers run w on r's store: the adversary's
// one, else -threads.
func (r *runner) workers(w *ycsb.Workload) int {
	if w.Adversary {
		return 1
	}
	return r.threads
}

// wrote reports whether a workload's run wrote to the store.
func wrote(res *Result) bool { return res.Inserts+res.Updates+res.ReadModifyWrites > 0 }

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
		if policy, _ := splitVariant(p); !slices.Contains(known, policy) {
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

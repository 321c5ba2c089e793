package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strings"

	"github.com/adaptkv/adaptkv/cmd/kvbench/internal/ycsb"
	"github.com/adaptkv/adaptkv/kv"
	"github.com/adaptkv/adaptkv/sstable"
)

// flagSet returns kvbench's flags, each bound to its field of o, with
// usage on stderr.
func (o *options) flagSet(stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kvbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, usageText, defaultRecordCount(), defaultWorkloads, strings.Join(defaultKVPolicies, ", "), defaultMemTable>>20,
			defaultTargetFile>>20, defaultL0Trigger, defaultCache>>20, defaultInterleave, strings.Join(ycsb.BuiltinNames(), ", "))
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
	fs.StringVar(&o.record, "record", "auto", "which absent Gets the adaptkv stores record as known negatives (kv.Options.RecordAbsent): auto (every one with\n-fix repeated or auto, or stacked; else as rewriting), always, never or rewriting (while flushes and compactions write tables)")
	fs.StringVar(&o.dir, "dir", "", "keep each store's data in DIR/<policy> and reuse it when it matches (default: a temporary directory, removed);\na kept store is reused as the last run left it (written to, its filters adapted): rerun with another -seed\nfor fresh absent keys, and compare policies without -dir (not with -repeat)")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed of values, operation streams and the absent-key universes")
	fs.StringVar(&o.jsonPath, "json", "", "write results as JSON to FILE (- for stdout)")
	fs.StringVar(&o.csvPath, "csv", "", "write results as CSV to FILE")
	fs.StringVar(&o.markdown, "markdown", "", "write the table's rows (the medians with -repeat) as Markdown tables, one per workload, to FILE (- for stdout):\nthe layout of docs/BENCHMARKS.md")
	fs.StringVar(&o.plot, "plot", "", "draw wasted probes and ops/s per policy to FILE.svg or FILE.png")
	fs.IntVar(&o.memTable, "memtable-size", defaultMemTable, "memtable size in bytes")
	fs.IntVar(&o.peerMemTable, "peer-memtable-size", 0, "memtable size in bytes of the Pebble peers (0: -memtable-size; their level sizes and bulk load stay those of\n-memtable-size): an adaptkv store holds one more memtable while L0 is deep (kv.Options.MergeFlushL0Depth);\nthe memtbl MiB column shows each store's peak")
	fs.Int64Var(&o.cacheSize, "cache-size", defaultCache, "block cache size in bytes of every store (the Pebble peers' too); with -direct the only cache of table\nblocks, so a data set larger than it makes a wasted probe a device read")
	fs.IntVar(&o.valueSize, "value-size", 0, "bytes of every record's value, loaded and written (0: each workload's fieldcount x fieldlength)")
	fs.IntVar(&o.targetFile, "target-file-size", defaultTargetFile, "target table size in bytes")
	fs.StringVar(&o.tableFormat, "table-format", "columnar", "block layout of the adaptkv stores' tables: columnar or row (kv.Options.TableFormat;\ntheir flushes write row blocks either way; the Pebble peers write Pebble's default, row)")
	fs.IntVar(&o.calibrate, "calibrate", 20000, "fresh keys per calibration pass (eps and checks per Get for the FP bound)")
	fs.IntVar(&o.repeat, "repeat", 1, "run everything N times, run i with seed -seed+i and the stores in an order rotated by i*stores/N;\nthe table shows each figure's median over the runs (ops/s and FP/1k gets with their min-max), -json and -csv every run's rows")
	fs.Uint64Var(&o.interleave, "interleave", defaultInterleave, "run each workload on all stores at once, taking turns of N operations (a store's figures count its\nturns only), so that every store meets the machine's slow and fast moments alike; loads stay one store at a time\n(0: each store runs its workloads alone, one store after another, as -target and -write always do)")
	fs.BoolVar(&o.direct, "direct", false, "cold storage: every store reads its tables around the OS page cache (O_DIRECT; kv.Options.DirectReads,\nthe Pebble peers through the same reads), so the block cache is the only cache; Linux")
	fs.StringVar(&o.fixRule, "fix", "default", "which false positives the adaptkv stores' adaptive filters fix (kv.Options.FixRule): default (cached),\nevery, repeated (keys the known-negative record holds), auto (every one while absent keys repeat, else those of\nkeys asked before), or cached (a key's first false positive cached per table, fixed when it comes back; with -direct\nwhen it comes back after the cache let it go)")
	fs.BoolVar(&o.fixInline, "fix-inline", false, "the adaptkv stores' Gets make their fixes themselves (kv.Options.FixInline) instead of queueing them\nto the store's background goroutine")
	fs.Int64Var(&o.remoteCache, "remote-cache", 0, "bytes of the adaptkv stores' block cache that keep remote chunks for fixes (kv.Options.RemoteCacheSize;\n0: the store's default, 1/16 of the block cache; -1: none)")
	fs.BoolVar(&o.writeMode, "write", false, "run write streams instead of the read workloads: every combination of -write-values, -write-writers,\n-write-sync and -write-keys, a fresh store per run, against the stores of -policies (default: the adaptkv\nstore's default policy and pebble); per write p50/p99/p99.9/max, stall time, waits for the WAL (adaptkv: a switch's fsync, the next WAL's populating), flushes, compactions,\nwrite amplification")
	fs.StringVar(&o.write.values, "write-values", "100,1024,4096", "-write: value sizes in bytes (keys are 16 bytes; values incompressible)")
	fs.StringVar(&o.write.writers, "write-writers", "1,2", "-write: writer goroutines")
	fs.StringVar(&o.write.sync, "write-sync", "nosync", "-write: nosync, sync, or both (nosync,sync)")
	fs.StringVar(&o.write.keys, "write-keys", "random", "-write: random, sequential, or both")
	fs.Int64Var(&o.write.ops, "write-ops", 300_000, "-write: writes a run (a tenth for sync)")
	fs.Int64Var(&o.write.bytes, "write-bytes", 256<<20, "-write: at most this many key and value bytes a run (fewer writes for large values)")
	fs.StringVar(&o.read, "read", "get", "how the adaptkv stores read points: get (DB.Get) or seekprefix (Iterator.SeekPrefixGE on an iterator reused\nwhile nothing is written, as pebble-l6 reads Pebble)")
	fs.StringVar(&o.wal, "wal", "mapped", "how the adaptkv stores' WAL takes NoSync writes: mapped (the default: a shared mapping of the file on Linux's\nOS file system, else write), write (a write(2) per commit group; kv.Options.DisableWALMapping) or buffered\n(a buffer written back behind the writers, Pebble's NoSync; kv.Options.WALBufferNoSync)")
	fs.BoolVar(&o.quiet, "q", false, "no progress bars")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to FILE (go tool pprof); a mixed workload's samples carry the labels\nstore=POLICY and workload=NAME, so -tagfocus 'store=^POLICY$' splits stores that take turns (a regexp: anchor it)")
	fs.StringVar(&o.tracePath, "trace", "", "write an execution trace of the whole run to FILE (go tool trace): where slow writes wait")
	return fs
}

// noteSet records which of the flags whose defaults give way were given.
func (o *options) noteSet(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "records":
			o.recordsSet = true
		case "interleave":
			o.interleaveSet = true
		}
	})
}

// check validates the flags that need no workload and returns the table
// format -table-format names.
func (o *options) check() (sstable.Format, error) {
	var none sstable.Format
	if o.threads < 1 || o.bits < 1 || o.memTable < 1<<10 || o.targetFile < 1<<10 || o.calibrate < 1 || o.repeat < 1 ||
		(o.peerMemTable != 0 && o.peerMemTable < 1<<10) {
		return none, errors.New("-threads, -bits, -calibrate, -repeat must be positive; -memtable-size, -target-file-size at least 1 KiB, -peer-memtable-size 0 or at least 1 KiB")
	}
	if o.cacheSize < 1<<20 {
		return none, fmt.Errorf("-cache-size %d: want at least 1 MiB", o.cacheSize)
	}
	if o.valueSize < 0 || o.valueSize > maxValueSize {
		return none, fmt.Errorf("-value-size %d: want 0 (the workloads' own) to %d", o.valueSize, maxValueSize)
	}
	tableFormat, err := sstable.ParseFormat(o.tableFormat)
	if err != nil {
		return none, fmt.Errorf("-table-format: %w", err)
	}
	if o.read != "get" && o.read != "seekprefix" {
		return none, fmt.Errorf("-read %q: want get or seekprefix", o.read)
	}
	if _, ok := recordRules[o.record]; !ok {
		return none, fmt.Errorf("-record %q: want auto, always, never or rewriting", o.record)
	}
	if _, ok := walModes[o.wal]; !ok {
		return none, fmt.Errorf("-wal %q: want mapped, write or buffered", o.wal)
	}
	if _, ok := fixRules[o.fixRule]; !ok {
		return none, fmt.Errorf("-fix %q: want default, every, repeated, auto or cached", o.fixRule)
	}
	if o.markdown != "" && o.writeMode {
		return none, errors.New("-markdown writes the read workloads' tables: not with -write")
	}
	if o.markdown == "-" && o.jsonPath == "-" {
		return none, errors.New("-json - and -markdown -: only one may go to stdout")
	}
	if o.dir != "" && o.repeat > 1 && !o.writeMode {
		// A kept store is reused as the last run left it (written to,
		// adapted), so the runs after the first would not start from the
		// same store as the first, nor as runs without -dir do.
		return none, errors.New("-dir with -repeat: a kept store is reused as the previous run left it (grown, adapted), so the runs would not start alike; repeat without -dir")
	}
	if o.interleave > 0 && (o.target > 0 || o.writeMode) {
		if o.interleaveSet {
			return none, errors.New("-interleave: not with -target (a paced store would hold its turn) or -write")
		}
		o.interleave = 0 // the default gives way
	}
	if !(o.target == 0 || (o.target >= 1 && o.target <= 1e9)) {
		return none, fmt.Errorf("-target %v: want 0 (unthrottled) or operations per second in [1, 1e9]", o.target)
	}
	return tableFormat, nil
}

// selection loads the workloads, fills the record count and value size
// they imply, and returns them with the stores to run.
func (o *options) selection() ([]*ycsb.Workload, []string, error) {
	workloads, err := loadWorkloads(o.workloads)
	if err != nil {
		return nil, nil, err
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
		return nil, nil, errors.New("-records must be positive")
	}
	if o.writeMode && o.policies == "" {
		o.policies = kv.DefaultFilterPolicy + "," + pebblePeerName
	}
	policies, err := selectPolicies(o.policies)
	if err != nil {
		return nil, nil, err
	}
	if o.writeMode {
		if _, err := o.write.specs(); err != nil {
			return nil, nil, err
		}
	}
	return workloads, policies, nil
}

// startProfiles starts -cpuprofile and -trace; stop ends them (and closes
// their files).
func (o *options) startProfiles() (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return stop, err
		}
		stops = append(stops, func() { f.Close() })
		if err := pprof.StartCPUProfile(f); err != nil {
			stop()
			return func() {}, err
		}
		stops = append(stops, pprof.StopCPUProfile)
	}
	if o.tracePath != "" {
		f, err := os.Create(o.tracePath)
		if err != nil {
			stop()
			return func() {}, err
		}
		stops = append(stops, func() { f.Close() })
		if err := trace.Start(f); err != nil {
			stop()
			return func() {}, err
		}
		stops = append(stops, trace.Stop)
	}
	return stop, nil
}

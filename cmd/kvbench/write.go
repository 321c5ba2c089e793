package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/adaptkv/adaptkv/filter"
)

// writeSpec is one write stream of -write: its value size, writer
// goroutines, durability and key order.
type writeSpec struct {
	ValueSize  int  `json:"value_size"`
	Writers    int  `json:"writers"`
	Sync       bool `json:"sync"`
	Sequential bool `json:"sequential"`
}

func (s writeSpec) String() string {
	sync, keys := "NoSync", "random keys"
	if s.Sync {
		sync = "Sync"
	}
	if s.Sequential {
		keys = "sequential keys"
	}
	return fmt.Sprintf("%s values, %d writer%s, %s, %s", sizeText(s.ValueSize), s.Writers, plural(s.Writers), sync, keys)
}

func sizeText(n int) string {
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// writeKeySize is the size of every key of the write streams.
const writeKeySize = 16

// writeResult is one store's run of one write stream.
type writeResult struct {
	Store string `json:"store"`
	writeSpec
	Repeat    int     `json:"repeat"`
	Seed      uint64  `json:"seed"`
	Writes    uint64  `json:"writes"`
	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"ops_per_sec"`
	MBPerSec  float64 `json:"mb_per_sec"` // keys and values, MiB
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	P999us    float64 `json:"p999_us"`
	MaxUs     float64 `json:"max_us"`
	StallMs   float64 `json:"stall_ms"`
	Stalls    uint64  `json:"stalls"` // how many times writers stalled
	// WALWaitMs and WALWaits: writers' waits for WAL switches still
	// finishing (Counters.WALWait), null where the store does not count
	// them.
	WALWaitMs *float64 `json:"wal_wait_ms"`
	WALWaits  *uint64  `json:"wal_waits"`
	// Flushes and Compactions ran during the writes: memtables flushed
	// (several may go in one flush) and compactions that rewrote tables
	// (moves are not counted).
	Flushes     uint64 `json:"flushes"`
	Compactions uint64 `json:"compactions"`
	// WriteAmp is the table bytes flushes and compactions wrote over the
	// key and value bytes written (the WAL not counted), while the run
	// lasted: what background work the writes had caused by the time the
	// last one returned.
	WriteAmp float64 `json:"write_amp"`
}

// writeFlags are -write's options.
type writeFlags struct {
	values, writers, sync, keys string
	ops, bytes                  int64
}

// writeSpecs parses the -write-* lists into every combination, in the
// order value size, writers, durability, key order.
func (f writeFlags) specs() ([]writeSpec, error) {
	values, err := intList("-write-values", f.values, 1, 1<<20)
	if err != nil {
		return nil, err
	}
	writers, err := intList("-write-writers", f.writers, 1, 1024)
	if err != nil {
		return nil, err
	}
	syncs, err := choiceList("-write-sync", f.sync, "nosync", "sync")
	if err != nil {
		return nil, err
	}
	orders, err := choiceList("-write-keys", f.keys, "random", "sequential")
	if err != nil {
		return nil, err
	}
	if f.ops < 1 || f.bytes < 1 {
		return nil, errors.New("-write-ops and -write-bytes must be positive")
	}
	var out []writeSpec
	for _, v := range values {
		for _, w := range writers {
			for _, s := range syncs {
				for _, k := range orders {
					out = append(out, writeSpec{ValueSize: v, Writers: w, Sync: s == "sync", Sequential: k == "sequential"})
				}
			}
		}
	}
	return out, nil
}

// ops is the number of writes of one run of spec: -write-ops, fewer when
// they would write more than -write-bytes, and a tenth for Sync streams
// (each write waits for an fsync), but at least 1000.
func (f writeFlags) opsOf(s writeSpec) uint64 {
	n := min(f.ops, f.bytes/int64(s.ValueSize+writeKeySize))
	if s.Sync {
		n /= 10
	}
	return uint64(max(n, 1000))
}

func intList(flag, list string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%s %q: want comma-separated integers in [%d, %d]", flag, list, lo, hi)
		}
		out = append(out, n)
	}
	return out, nil
}

func choiceList(flag, list string, choices ...string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(choices, f) {
			return nil, fmt.Errorf("%s %q: want a comma-separated list of %s", flag, list, strings.Join(choices, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

// runWrites is -write: every stream against every store, each run on a
// fresh store, the stores in rotated order in each of -repeat rounds;
// prints a table per stream (medians over the rounds) and writes every
// run to -json.
func runWrites(o options, cfg StoreConfig, stores []string, base string, table, stdout io.Writer,
	prog func(string, int64) *progress) error {
	specs, err := o.write.specs()
	if err != nil {
		return err
	}
	var results []writeResult
	start := time.Now()
	for i, spec := range specs {
		var runs []writeResult
		for rep := 0; rep < o.repeat; rep++ {
			for _, name := range rotated(stores, rep, o.repeat) {
				runtime.GC()
				c := cfg
				c.SyncWrites = spec.Sync
				c.Dir = filepath.Join(base, fmt.Sprintf("write-%d-%d", i, rep), name)
				seed := o.seed + uint64(rep)
				r, err := writeRun(name, c, spec, o.write.opsOf(spec), seed, prog)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", name, spec, err)
				}
				r.Repeat = rep
				runs = append(runs, r)
				if err := os.RemoveAll(filepath.Dir(c.Dir)); err != nil {
					return err
				}
			}
		}
		printWriteTable(table, spec, stores, runs, o.repeat)
		results = append(results, runs...)
	}
	fmt.Fprintf(table, "total time %.1fs\n", time.Since(start).Seconds())
	if o.jsonPath == "" {
		return nil
	}
	w, closeJSON, err := outputTo(o.jsonPath, stdout)
	if err != nil {
		return err
	}
	defer closeJSON()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

// writeRun opens a fresh store and writes ops records of spec into it from
// spec.Writers goroutines, timing each write. Keys are 16 bytes: in random
// order the mix of the write's number then the number, in sequential
// order the number then zeros. Values are incompressible: windows at
// random offsets of 1 MiB of random bytes, so no two writes are likely to
// carry the same value.
func writeRun(name string, cfg StoreConfig, spec writeSpec, ops, seed uint64, prog func(string, int64) *progress) (writeResult, error) {
	res := writeResult{Store: name, writeSpec: spec, Seed: seed, Writes: ops}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return res, err
	}
	st, err := openStore(name, cfg)
	if err != nil {
		return res, err
	}
	closed := false
	defer func() {
		if !closed {
			_ = st.Close()
		}
	}()
	pool := valuePool(seed, spec.ValueSize)
	before, err := st.Metrics()
	if err != nil {
		return res, err
	}
	bar := prog(fmt.Sprintf("%s/%s", name, spec), int64(ops))
	ws := make([]writeWorker, spec.Writers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range ws {
		wg.Add(1)
		go func(w *writeWorker, first uint64) {
			defer wg.Done()
			w.write(st, spec, first, ops, seed, pool, bar)
		}(&ws[w], uint64(w))
	}
	wg.Wait()
	elapsed := time.Since(t0)
	bar.finish()
	var all histogram
	var longest time.Duration
	for i := range ws {
		if ws[i].err != nil {
			return res, ws[i].err
		}
		all.merge(&ws[i].hist)
		longest = max(longest, ws[i].max)
	}
	after, err := st.Metrics()
	if err != nil {
		return res, err
	}
	d := after.Sub(before)
	bytes := float64(ops) * float64(writeKeySize+spec.ValueSize)
	res.Seconds = elapsed.Seconds()
	res.OpsPerSec = float64(ops) / res.Seconds
	res.MBPerSec = bytes / (1 << 20) / res.Seconds
	res.P50us, res.P99us, res.P999us = all.quantile(0.50), all.quantile(0.99), all.quantile(0.999)
	res.MaxUs = float64(longest) / 1e3
	res.StallMs, res.Stalls = float64(d.WriteStall)/1e6, d.WriteStalls
	if d.Known.WALWaits {
		ms, n := float64(d.WALWait)/1e6, d.WALWaits
		res.WALWaitMs, res.WALWaits = &ms, &n
	}
	res.Flushes, res.Compactions = d.Flushes, d.Compactions
	res.WriteAmp = float64(d.BytesFlushed+d.BytesCompacted) / bytes
	closed = true
	return res, st.Close()
}

// valuePool returns 1 MiB of random bytes and valueSize more, the windows
// writeRun takes its values from.
func valuePool(seed uint64, valueSize int) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x77726974))
	pool := make([]byte, 1<<20+valueSize)
	for i := 0; i+8 <= len(pool); i += 8 {
		binary.LittleEndian.PutUint64(pool[i:], rng.Uint64())
	}
	return pool
}

// writeWorker is one writer goroutine's latencies and error.
type writeWorker struct {
	hist histogram
	max  time.Duration
	err  error
}

// write makes writes first, first+spec.Writers, ... below ops to st,
// timing each; the first error ends it (w.err).
func (w *writeWorker) write(st Store, spec writeSpec, first, ops, seed uint64, pool []byte, bar *progress) {
	r := rand.New(rand.NewPCG(seed, first))
	key := make([]byte, writeKeySize)
	done := int64(0)
	for i := first; i < ops; i += uint64(spec.Writers) {
		if spec.Sequential {
			binary.BigEndian.PutUint64(key, i)
		} else {
			binary.BigEndian.PutUint64(key, filter.Mix64(i^seed))
			binary.BigEndian.PutUint64(key[8:], i)
		}
		off := r.IntN(len(pool) - spec.ValueSize + 1)
		start := time.Now()
		if err := st.Set(key, pool[off:off+spec.ValueSize]); err != nil {
			w.err = err
			return
		}
		d := time.Since(start)
		w.hist.record(d)
		w.max = max(w.max, d)
		if done++; done == 256 {
			bar.add(done)
			done = 0
		}
	}
}

// printWriteTable prints one stream's table: per store the medians of its
// runs (throughput with its range), then each store's figures over the
// last store's (the Pebble peer in the default run).
func printWriteTable(w io.Writer, spec writeSpec, stores []string, runs []writeResult, repeat int) {
	fmt.Fprintf(w, "\n%s: %d writes a run, %d run%s a store (medians)\n", spec, runs[0].Writes, repeat, plural(repeat))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\twrites/s (runs)\tMiB/s\tp50 µs\tp99 µs\tp99.9 µs\tmax µs\tstall ms (stalls)\tWAL wait ms (waits)\tmemtables flushed\tcompactions\tWA\t")
	med := map[string]writeResult{}
	for _, name := range stores {
		var mine []writeResult
		for _, r := range runs {
			if r.Store == name {
				mine = append(mine, r)
			}
		}
		m := medianWrite(mine)
		med[name] = m
		lo, hi := m.OpsPerSec, m.OpsPerSec
		for _, r := range mine {
			lo, hi = min(lo, r.OpsPerSec), max(hi, r.OpsPerSec)
		}
		rng := ""
		if len(mine) > 1 {
			rng = fmt.Sprintf(" (%s–%s)", kOps(lo), kOps(hi))
		}
		walWait := "n/a"
		if m.WALWaitMs != nil {
			walWait = fmt.Sprintf("%.0f (%d)", *m.WALWaitMs, *m.WALWaits)
		}
		fmt.Fprintf(tw, "%s\t%s%s\t%.1f\t%s\t%s\t%s\t%s\t%.0f (%d)\t%s\t%d\t%d\t%.2f\t\n", name, kOps(m.OpsPerSec), rng,
			m.MBPerSec, usText(m.P50us), usText(m.P99us), usText(m.P999us), usText(m.MaxUs), m.StallMs, m.Stalls, walWait, m.Flushes, m.Compactions, m.WriteAmp)
	}
	_ = tw.Flush()
	if len(stores) < 2 {
		return
	}
	ref := stores[len(stores)-1]
	r := med[ref]
	for _, name := range stores[:len(stores)-1] {
		m := med[name]
		fmt.Fprintf(w, "%s / %s: throughput %.2fx, p99 %.2fx, p99.9 %.2fx\n", name, ref,
			m.OpsPerSec/r.OpsPerSec, m.P99us/r.P99us, m.P999us/r.P999us)
	}
}

// usText prints a latency in µs with three significant digits or more.
func usText(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func kOps(v float64) string { return fmt.Sprintf("%.0fk", v/1e3) }

// medianWrite returns the runs' figure-by-figure medians.
func medianWrite(rs []writeResult) writeResult {
	m := rs[0]
	f := func(get func(writeResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		return median(v)
	}
	m.OpsPerSec = f(func(r writeResult) float64 { return r.OpsPerSec })
	m.MBPerSec = f(func(r writeResult) float64 { return r.MBPerSec })
	m.P50us = f(func(r writeResult) float64 { return r.P50us })
	m.P99us = f(func(r writeResult) float64 { return r.P99us })
	m.P999us = f(func(r writeResult) float64 { return r.P999us })
	m.MaxUs = f(func(r writeResult) float64 { return r.MaxUs })
	m.StallMs = f(func(r writeResult) float64 { return r.StallMs })
	m.Stalls = uint64(f(func(r writeResult) float64 { return float64(r.Stalls) }))
	if rs[0].WALWaitMs != nil {
		ms := f(func(r writeResult) float64 { return *r.WALWaitMs })
		n := uint64(f(func(r writeResult) float64 { return float64(*r.WALWaits) }))
		m.WALWaitMs, m.WALWaits = &ms, &n
	}
	m.Flushes = uint64(f(func(r writeResult) float64 { return float64(r.Flushes) }))
	m.Compactions = uint64(f(func(r writeResult) float64 { return float64(r.Compactions) }))
	m.WriteAmp = f(func(r writeResult) float64 { return r.WriteAmp })
	return m
}

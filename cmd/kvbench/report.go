package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
)

func fmtOpt(p *float64, prec int) string {
	if p == nil {
		return "n/a"
	}
	return strconv.FormatFloat(*p, 'f', prec, 64)
}

func fmtOptU(p *uint64) string {
	if p == nil {
		return "n/a"
	}
	return strconv.FormatUint(*p, 10)
}

// printTable writes the comparison table: one block per workload, one line
// per policy.
func printTable(w io.Writer, results []*Result) {
	order, byWorkload := groupByWorkload(results)
	for _, name := range order {
		rs := byWorkload[name]
		r0 := rs[0]
		fmt.Fprintf(w, "\n== %s (%s)\n", name, workloadDesc(r0))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		hdr := "policy\tops/s\t"
		if r0.Runs > 1 {
			hdr += "ops/s min-max\t"
		}
		hdr += "p50 us\tp99 us\tp99.9 us\tchecks/get\tprobes/get\tFP/1k gets\t"
		if r0.Runs > 1 {
			hdr += "FP/1k min-max\t"
		}
		hdr += "FP/1k checks\tblocks/get\treads/1k gets\tKiB/get\tbits/key\tfilter MiB\tadapt\trebuild\tFP probes\tFP bound\tFP/bound\tWA\tmemtbl MiB\tRSS MiB\t"
		if r0.Adversary != nil {
			hdr += "final-round FP rate\tQ per round\t"
		}
		fmt.Fprintln(tw, hdr)
		for _, r := range rs {
			ratio := boundRatio(r)
			bound := "n/a"
			if r.FPLowerBound != nil {
				bound = fmt.Sprintf("%.0f", *r.FPLowerBound)
			}
			line := fmt.Sprintf("%s\t%.0f\t", r.Policy, r.OpsPerSec)
			if r0.Runs > 1 {
				line += fmtRange(r.OpsPerSecRange, 0) + "\t"
			}
			line += fmt.Sprintf("%.1f\t%.1f\t%.1f\t%.2f\t%.3f\t%s\t",
				r.P50us, r.P99us, r.P999us, checksPerGet(r), r.ProbesPerGet, fmtOpt(r.FPProbesPer1kGets, 2))
			if r0.Runs > 1 {
				line += fmtRange(r.FPPer1kGetsRange, 2) + "\t"
			}
			line += fmt.Sprintf("%s\t%s\t%s\t%s\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t",
				fmtOpt(r.FPProbesPer1kChecks, 2), fmtOpt(r.DataBlockReadsPer, 3),
				fmtOpt(r.TableReadsPer1kGets, 1), fmtOpt(r.TableKiBPerGet, 2),
				r.FilterBitsPerKey, float64(r.FilterMemoryBytes)/(1<<20),
				fmtOptU(r.Adaptations), fmtOptU(r.Rebuilds), fmtOptU(r.FalsePositiveProbes), bound, ratio,
				fmtOpt(r.WriteAmp, 2), float64(r.MemTablePeakBytes)/(1<<20), fmtMiB(r.RSSPeakBytes))
			if a := r.Adversary; a != nil {
				qs := make([]string, len(a.Rounds))
				for i, rd := range a.Rounds {
					qs[i] = strconv.Itoa(rd.Queries)
				}
				line += fmt.Sprintf("%.5f\t%s\t", a.FinalFPRate, strings.Join(qs, ","))
			}
			fmt.Fprintln(tw, line)
		}
		tw.Flush()
		for _, r := range rs {
			if r.StoredNotFound > 0 {
				fmt.Fprintf(w, "WARNING: %s/%s: %d reads of stored keys found nothing\n", r.Policy, r.Workload, r.StoredNotFound)
			}
		}
	}
}

// groupByWorkload groups rows by workload: the workloads in the order of
// their first row, and each one's rows in order.
func groupByWorkload(rows []*Result) (order []string, byWorkload map[string][]*Result) {
	byWorkload = map[string][]*Result{}
	for _, r := range rows {
		if _, ok := byWorkload[r.Workload]; !ok {
			order = append(order, r.Workload)
		}
		byWorkload[r.Workload] = append(byWorkload[r.Workload], r)
	}
	return order, byWorkload
}

// fmtRange formats a figure's min-max over runs.
func fmtRange(r *[2]float64, prec int) string {
	if r == nil {
		return "n/a"
	}
	return strconv.FormatFloat(r[0], 'f', prec, 64) + "-" + strconv.FormatFloat(r[1], 'f', prec, 64)
}

// fmtMiB formats an optional byte count in MiB.
func fmtMiB(p *uint64) string {
	if p == nil {
		return "n/a"
	}
	return strconv.FormatFloat(float64(*p)/(1<<20), 'f', 0, 64)
}

func checksPerGet(r *Result) float64 {
	if r.Gets == 0 {
		return 0
	}
	return float64(r.FilterChecks) / float64(r.Gets)
}

// tableNotes explains the columns once, below the table.
const tableNotes = `
ops/s: operations per second of the store's own time (its calls, each
timed between two clock reads; kvbench's work between them, drawing and
formatting the next operation and counting the last, is not counted;
with -target, the wall time); p50/p99/p99.9: the calls' latency.
checks/get: filter checks per Get (tables whose key range holds the key);
probes/get: table probes per Get (the filters' "maybe" answers, plus
pebble's unfiltered L6 probes) = read amplification.
FP: false-positive probes (a probe that found nothing); FP/1k checks is the
rate per table considered (filter checks and unfiltered probes), comparable
across tree shapes; blocks/get: data blocks read
from table files (block-cache misses) per Get; reads/1k gets and KiB/get:
reads of table files and the KiB they read (device reads with -direct;
compaction inputs included, as Pebble reads them through the same files)
per 1k Gets and per Get; bits/key: filter bits in
memory per table entry; adapt: false positives fixed by adaptive filters;
rebuild: filter block rebuilds; WA: table bytes flushes and compactions
wrote during the workload per byte flushed (n/a: nothing flushed);
memtbl MiB: the most memory the store's memtables held (sampled every
10 ms); RSS MiB: the process's peak resident set during the workload
(n/a with -interleave, where the stores share it).
FP bound = eps x (unique absent keys x tables considered per absent Get
+ unique stored keys x non-holding tables checked per stored Get), eps and
the counts measured per store on fresh keys after load: the false
positives an ideal adaptive filter with the same first-time rate would pay.
pebble: a real pebble.DB with its bloom filter on every level, read with
DB.Get, which skips the filters of L6: a Get that finds nothing also
probes the L6 table whose range holds the key, counted as a probe and a
false positive (a Get that finds its key in L6 is not: Pebble does not say
which level answered); pebble-l6: the same, read with SeekPrefixGE on a
reused iterator with UseL6Filters (reopened after writes), which positions
every level, so a present key also checks the filters of the levels below
the one holding it. Pebble does not split probes into true/false
positives: FP is known only when every read is of an absent key;
data-block reads and adaptation counters are n/a.
adversary: kvbench reads the store's false-positive counter, a few atomic
loads, around every Get to see false positives; final-round FP rate is FP probes
per Get in the last round (above 1 when one key fools several tables).
With -repeat, each figure is its median over the runs.
`

// writeJSON writes the results as a JSON array, one object per (policy, workload).
func writeJSON(w io.Writer, results []*Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

// writeCSV writes one row per result with the JSON field names as header;
// unavailable values are empty cells.
func writeCSV(w io.Writer, results []*Result) error {
	cw := csv.NewWriter(w)
	t := reflect.TypeOf(Result{})
	var header []string
	var idx []int
	for i := 0; i < t.NumField(); i++ {
		name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
		if name == "" || name == "-" || name == "adversary" {
			continue
		}
		header = append(header, name)
		idx = append(idx, i)
	}
	header = append(header, "adversary_final_fp_rate")
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, r := range results {
		v := reflect.ValueOf(*r)
		row := make([]string, 0, len(header))
		for _, i := range idx {
			row = append(row, csvCell(v.Field(i)))
		}
		if r.Adversary != nil {
			row = append(row, strconv.FormatFloat(r.Adversary.FinalFPRate, 'g', -1, 64))
		} else {
			row = append(row, "")
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func csvCell(f reflect.Value) string {
	switch f.Kind() {
	case reflect.Pointer:
		if f.IsNil() {
			return ""
		}
		return csvCell(f.Elem())
	case reflect.String:
		return f.String()
	case reflect.Uint64, reflect.Uint:
		return strconv.FormatUint(f.Uint(), 10)
	case reflect.Int:
		return strconv.FormatInt(f.Int(), 10)
	case reflect.Float64:
		x := f.Float()
		if math.IsNaN(x) {
			return ""
		}
		return strconv.FormatFloat(x, 'g', 6, 64)
	case reflect.Array:
		parts := make([]string, f.Len())
		for i := range parts {
			parts[i] = csvCell(f.Index(i))
		}
		return strings.Join(parts, " ")
	}
	return fmt.Sprint(f.Interface())
}

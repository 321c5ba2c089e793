package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// writeMarkdown writes the rows the table shows (one per workload and
// store: with -repeat, the medians) as Markdown tables, one per workload,
// in the layout of docs/BENCHMARKS.md: what a measured table there is
// pasted from, so that no figure is copied by hand. A range is the
// minimum and maximum over the runs (with -repeat); a column no row of the
// workload measured (WA without flushes) is left out.
func writeMarkdown(w io.Writer, rows []*Result) error {
	order, byWorkload := groupByWorkload(rows)
	var b strings.Builder
	for i, name := range order {
		rs := byWorkload[name]
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "`%s` (%s):\n\n", name, workloadDesc(rs[0]))
		wa := false
		for _, r := range rs {
			wa = wa || r.WriteAmp != nil
		}
		cols := []string{"policy", "ops/s", "p99 µs", "p99.9 µs", "checks/Get", "probes/Get",
			"wasted probes per 1k Gets", "wasted / bound", "table reads per 1k Gets", "bits/key"}
		if rs[0].Runs > 1 {
			cols[1], cols[6] = "ops/s (min–max)", "wasted probes per 1k Gets (min–max)"
		}
		if wa {
			cols = append(cols, "WA")
		}
		cols = append(cols, "peak memtable MiB")
		mdRow(&b, cols)
		seps := make([]string, len(cols))
		for j := range seps {
			seps[j] = "---"
		}
		mdRow(&b, seps)
		for _, r := range rs {
			ops := fmtOps(r.OpsPerSec)
			if rg := r.OpsPerSecRange; rg != nil {
				ops += fmt.Sprintf(" (%s–%s)", strings.TrimSuffix(fmtOps(rg[0]), "k"), fmtOps(rg[1]))
			}
			wasted := fmtOpt(r.FPProbesPer1kGets, 2)
			if rg := r.FPPer1kGetsRange; rg != nil && r.FPProbesPer1kGets != nil {
				wasted += fmt.Sprintf(" (%.2f–%.2f)", rg[0], rg[1])
			}
			cells := []string{"`" + r.Policy + "`", ops,
				strconv.FormatFloat(r.P99us, 'f', 1, 64), strconv.FormatFloat(r.P999us, 'f', 1, 64),
				fmt.Sprintf("%.2f", checksPerGet(r)), fmt.Sprintf("%.3f", r.ProbesPerGet),
				wasted, boundRatio(r), fmtOpt(r.TableReadsPer1kGets, 1), fmt.Sprintf("%.2f", r.FilterBitsPerKey)}
			if wa {
				cells = append(cells, fmtOpt(r.WriteAmp, 2))
			}
			cells = append(cells, fmt.Sprintf("%.1f", float64(r.MemTablePeakBytes)/(1<<20)))
			mdRow(&b, cells)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdRow writes one Markdown table row.
func mdRow(b *strings.Builder, cells []string) {
	b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

// fmtOps formats an ops/s figure in thousands: no decimals from 100k up,
// one below.
func fmtOps(x float64) string {
	if x >= 100_000 {
		return fmt.Sprintf("%.0fk", x/1000)
	}
	return fmt.Sprintf("%.1fk", x/1000)
}

// boundRatio is the wasted probes over the ideal bound ("n/a" where either
// is unknown).
func boundRatio(r *Result) string {
	if r.FPLowerBound == nil || r.FalsePositiveProbes == nil || *r.FPLowerBound <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1fx", float64(*r.FalsePositiveProbes) / *r.FPLowerBound)
}

// workloadDesc says what a workload's rows measured: operations, threads
// and records (the adversary: its keys and rounds), and over how many runs.
func workloadDesc(r0 *Result) string {
	desc := fmt.Sprintf("%d ops, %d thread(s), %d records", r0.Ops, r0.Threads, r0.Records)
	if r0.Adversary != nil {
		desc = fmt.Sprintf("%d fresh absent keys, %d rounds max, single-threaded", r0.UniqueAbsentKeys, len(r0.Adversary.Rounds))
	}
	if r0.Runs > 1 {
		desc += fmt.Sprintf("; medians of %d runs", r0.Runs)
	}
	return desc
}

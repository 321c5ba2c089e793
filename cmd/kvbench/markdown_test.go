package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// mdTables splits -markdown's output into its tables by workload: the rows
// of each (header first), each row's cells.
func mdTables(t *testing.T, md string) (order []string, tables map[string][][]string) {
	t.Helper()
	tables = map[string][][]string{}
	var cur string
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "`"):
			cur = strings.SplitN(line[1:], "`", 2)[0]
			order = append(order, cur)
		case strings.HasPrefix(line, "| "):
			require.True(t, strings.HasSuffix(line, " |"), line)
			cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "| "), " |"), " | ")
			tables[cur] = append(tables[cur], cells)
		case line != "":
			t.Fatalf("unexpected line %q", line)
		}
	}
	return order, tables
}

// TestMarkdown: -markdown writes one table per workload, a row per store
// in the order run, whose figures are the summary rows' (the medians and
// ranges over -repeat's runs), and leaves out WA where nothing flushed.
func TestMarkdown(t *testing.T) {
	for _, repeat := range []int{1, 3} {
		t.Run(fmt.Sprintf("repeat=%d", repeat), func(t *testing.T) {
			mdPath := filepath.Join(t.TempDir(), "out.md")
			_, results, _ := runJSON(t, "-policies", "fake,fakeadaptive", "-workloads", "negzipf,d,adversary",
				"-records", "3000", "-ops", "1500", "-calibrate", "500", "-memtable-size", "65536",
				"-repeat", fmt.Sprint(repeat), "-markdown", mdPath)
			raw, err := os.ReadFile(mdPath)
			require.NoError(t, err)
			order, tables := mdTables(t, string(raw))
			require.Equal(t, []string{"negzipf", "workloadd", "adversary"}, order)
			shown := results
			if repeat > 1 {
				shown = summarize(results)
			}
			for _, w := range order {
				rows := tables[w]
				require.Len(t, rows, 2+2, "%s: header, separator, two stores", w)
				hdr := rows[0]
				for _, row := range rows[1:] {
					require.Len(t, row, len(hdr), "%s: every row has the header's cells", w)
				}
				require.Equal(t, repeat > 1, strings.Contains(strings.Join(hdr, "|"), "(min–max)"), w)
				col := func(name string) int {
					for i, h := range hdr {
						if strings.HasPrefix(h, name) {
							return i
						}
					}
					return -1
				}
				for i, pol := range []string{"fake", "fakeadaptive"} {
					row := rows[2+i]
					require.Equal(t, "`"+pol+"`", row[0])
					var r *Result
					for _, s := range shown {
						if s.Workload == w && s.Policy == pol {
							r = s
						}
					}
					require.NotNil(t, r, pol+"/"+w)
					require.True(t, strings.HasPrefix(row[col("ops/s")], fmtOps(r.OpsPerSec)), "%s/%s: %s", pol, w, row[col("ops/s")])
					require.Equal(t, fmt.Sprintf("%.1f", r.P99us), row[col("p99 µs")])
					require.Equal(t, boundRatio(r), row[col("wasted / bound")])
					if w == "negzipf" {
						require.NotEqual(t, "n/a", row[col("wasted / bound")], "absent reads: a bound")
					}
				}
			}
			// The fakes never flush: no WA column.
			require.NotContains(t, strings.Join(tables["workloadd"][0], "|"), "WA")
		})
	}
}

// TestMarkdownWA: a store that flushed during a workload gets the WA
// column, and -markdown - puts the tables on stdout and the text table on
// stderr.
func TestMarkdownWA(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.NoError(t, run([]string{"-policies", "bloom", "-workloads", "churn", "-records", "3000", "-ops", "6000",
		"-calibrate", "200", "-memtable-size", "65536", "-target-file-size", "65536", "-markdown", "-", "-q"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "== churn")
	_, tables := mdTables(t, stdout.String())
	require.Contains(t, tables["churn"][0], "WA")
}

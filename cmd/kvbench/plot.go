package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// writePlot draws two grouped bar charts, one bar per workload in each
// policy's group: wasted (false-positive) probes per 1k Gets, and ops/s.
// The format follows the file extension (.svg or .png).
func writePlot(path string, results []*Result) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("-plot %s: want a .svg or .png file", path)
	}
	d := newPlotData(results)
	fp, err := d.panel("Wasted table probes (false positives; no bar: not measurable)", "FP probes per 1k Gets", func(r *Result) float64 {
		if r.FPProbesPer1kGets == nil {
			return 0 // unavailable (pebble on workloads with stored-key reads)
		}
		return *r.FPProbesPer1kGets
	})
	if err != nil {
		return err
	}
	tp, err := d.panel("Throughput", "ops/s", func(r *Result) float64 { return r.OpsPerSec })
	if err != nil {
		return err
	}
	wid := vg.Length(max(16, 2.2*float64(len(d.policies)))) * vg.Centimeter
	hgt := 20 * vg.Centimeter
	var canvas vg.CanvasWriterTo
	if ext == ".svg" {
		canvas = vgsvg.New(wid, hgt)
	} else {
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(wid, hgt)}
	}
	dc := draw.New(canvas)
	plots := [][]*plot.Plot{{fp}, {tp}}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2, PadY: vg.Millimeter * 6}
	cs := plot.Align(plots, tiles, dc)
	fp.Draw(cs[0][0])
	tp.Draw(cs[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plotData is the results a plot draws, with the policies and workloads in
// the order they first appear.
type plotData struct {
	results             []*Result
	policies, workloads []string
}

func newPlotData(results []*Result) *plotData {
	d := &plotData{results: results}
	seenP, seenW := map[string]bool{}, map[string]bool{}
	for _, r := range results {
		if !seenP[r.Policy] {
			seenP[r.Policy] = true
			d.policies = append(d.policies, r.Policy)
		}
		if !seenW[r.Workload] {
			seenW[r.Workload] = true
			d.workloads = append(d.workloads, r.Workload)
		}
	}
	return d
}

// find returns the result of policy p on workload w, nil if there is none.
func (d *plotData) find(p, w string) *Result {
	for _, r := range d.results {
		if r.Policy == p && r.Workload == w {
			return r
		}
	}
	return nil
}

// panel is a bar chart of value: a group of bars per policy, a bar per
// workload.
func (d *plotData) panel(title, ylabel string, value func(*Result) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.NominalX(d.policies...)
	width := vg.Points(float64(60) / float64(len(d.workloads)+1))
	for i, w := range d.workloads {
		vals := make(plotter.Values, len(d.policies))
		for j, pol := range d.policies {
			if r := d.find(pol, w); r != nil {
				vals[j] = value(r)
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = width * vg.Length(float64(i)-float64(len(d.workloads)-1)/2)
		p.Add(bars)
		p.Legend.Add(w, bars)
	}
	p.Legend.Top = true
	return p, nil
}

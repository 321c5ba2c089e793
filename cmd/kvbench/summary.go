package main

import (
	"cmp"
	"reflect"
	"slices"
)

// summarize turns the rows of several runs into one row per (workload,
// store), in the order of their first appearance: every counter, rate and
// gauge is the median over the runs (of those that measured it; the mean
// of the middle two for an even count), and the figures that move most
// from run to run carry their minimum and maximum (the *Range fields).
// The adversary's rounds are those of the run with the median final
// false-positive rate.
func summarize(results []*Result) []*Result {
	type id struct{ workload, policy string }
	var order []id
	groups := map[id][]*Result{}
	for _, r := range results {
		k := id{r.Workload, r.Policy}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]*Result, 0, len(order))
	for _, k := range order {
		out = append(out, medianResult(groups[k]))
	}
	return out
}

// medianResult is the summary row of one (workload, store)'s runs.
func medianResult(rs []*Result) *Result {
	m := *rs[0]
	mv := reflect.ValueOf(&m).Elem()
	t := mv.Type()
	for i := 0; i < t.NumField(); i++ {
		f := mv.Field(i)
		switch f.Kind() {
		case reflect.Uint64:
			f.SetUint(uint64(median(fieldValues(rs, i, func(v reflect.Value) (float64, bool) { return float64(v.Uint()), true })) + 0.5))
		case reflect.Int:
			f.SetInt(int64(median(fieldValues(rs, i, func(v reflect.Value) (float64, bool) { return float64(v.Int()), true }))))
		case reflect.Float64:
			f.SetFloat(median(fieldValues(rs, i, func(v reflect.Value) (float64, bool) { return v.Float(), true })))
		case reflect.Pointer:
			switch t.Field(i).Type.Elem().Kind() {
			case reflect.Uint64:
				vs := fieldValues(rs, i, func(v reflect.Value) (float64, bool) {
					if v.IsNil() {
						return 0, false
					}
					return float64(v.Elem().Uint()), true
				})
				if len(vs) > 0 {
					f.Set(reflect.ValueOf(u64p(uint64(median(vs) + 0.5))))
				}
			case reflect.Float64:
				vs := fieldValues(rs, i, func(v reflect.Value) (float64, bool) {
					if v.IsNil() {
						return 0, false
					}
					return v.Elem().Float(), true
				})
				if len(vs) > 0 {
					f.Set(reflect.ValueOf(f64p(median(vs))))
				}
			}
		case reflect.Array:
			for j := 0; j < f.Len(); j++ {
				vs := make([]float64, len(rs))
				for n, r := range rs {
					vs[n] = float64(reflect.ValueOf(r).Elem().Field(i).Index(j).Int())
				}
				f.Index(j).SetInt(int64(median(vs)))
			}
		}
	}
	m.Repeat, m.Seed, m.Runs = 0, rs[0].Seed, len(rs)
	m.OpsPerSecRange = spread(rs, func(r *Result) *float64 { return &r.OpsPerSec })
	m.P999Range = spread(rs, func(r *Result) *float64 { return &r.P999us })
	m.ProbesPerGetRange = spread(rs, func(r *Result) *float64 { return &r.ProbesPerGet })
	m.FPPer1kGetsRange = spread(rs, func(r *Result) *float64 { return r.FPProbesPer1kGets })
	if m.Adversary != nil {
		byRate := slices.Clone(rs)
		slices.SortStableFunc(byRate, func(a, b *Result) int {
			return cmp.Compare(a.Adversary.FinalFPRate, b.Adversary.FinalFPRate)
		})
		m.Adversary = byRate[(len(byRate)-1)/2].Adversary
	}
	return &m
}

// fieldValues collects field i of every run's row, where get says it
// was measured.
func fieldValues(rs []*Result, i int, get func(reflect.Value) (float64, bool)) []float64 {
	var vs []float64
	for _, r := range rs {
		if v, ok := get(reflect.ValueOf(r).Elem().Field(i)); ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// spread is the minimum and maximum of a figure over the runs, nil if a
// run did not measure it.
func spread(rs []*Result, get func(*Result) *float64) *[2]float64 {
	lo, hi := 0.0, 0.0
	for i, r := range rs {
		v := get(r)
		if v == nil {
			return nil
		}
		if i == 0 || *v < lo {
			lo = *v
		}
		if i == 0 || *v > hi {
			hi = *v
		}
	}
	return &[2]float64{lo, hi}
}

// median of vs (0 for none; the mean of the middle two for an even count).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

package main

import (
	"math"
	"math/bits"
	"time"
)

// histogram is a log-linear latency histogram (32 sub-buckets per power of
// two: about 3% relative precision), one per worker, merged at the end.
type histogram struct {
	counts [64 + 59*32]uint64
	n      uint64
}

func bucketOf(v uint64) int {
	if v < 64 {
		return int(v)
	}
	e := bits.Len64(v) - 6 // v>>e in [32, 64)
	return 64 + (e-1)*32 + int(v>>e) - 32
}

// bucketMid returns the middle of bucket i's value range.
func bucketMid(i int) float64 {
	if i < 64 {
		return float64(i)
	}
	e := (i-64)/32 + 1
	m := uint64((i-64)%32 + 32)
	lo := m << e
	return float64(lo) + float64(uint64(1)<<e)/2
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the q-quantile in microseconds (0 when empty).
func (h *histogram) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank == 0 {
		rank = 1
	}
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			return bucketMid(i) / 1e3
		}
	}
	return bucketMid(len(h.counts)-1) / 1e3
}

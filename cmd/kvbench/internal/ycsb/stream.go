package ycsb

import (
	"math/rand/v2"
)

// OpKind is one kind of operation of the mix.
type OpKind uint8

// Operation kinds.
const (
	OpRead            OpKind = iota // Get of a stored record
	OpReadAbsent                    // Get of an absent key (kvbench extension)
	OpUpdate                        // Set of a stored record
	OpInsert                        // Set of a new record
	OpScan                          // range scan of ScanLen records
	OpReadModifyWrite               // Get then Set of a stored record
)

// String names the kind.
func (k OpKind) String() string {
	return [...]string{"read", "read-absent", "update", "insert", "scan", "read-modify-write"}[k]
}

// Op is one generated operation. Key is a record number for stored records
// and an absent-key number for OpReadAbsent.
type Op struct {
	Kind    OpKind
	Key     uint64
	ScanLen int
}

// Stream generates a workload's operations for one worker thread, as YCSB's
// CoreWorkload.doTransaction does. Not safe for concurrent use; threads share
// only the insert Counter.
type Stream struct {
	w       *Workload
	rng     *rand.Rand
	counter *Counter
	keys    IntGenerator
	neg     IntGenerator
	cum     [5]float64 // cumulative read, update, insert, scan, rmw

	universe uint64 // absent-key universe (one of them, with a shift)
	ops      uint64 // operations generated
	shiftAt  uint64 // with NegativeShift: absent keys shift after this many ops
}

// NewStream returns the operation stream of workload w for one thread.
// records is the number of loaded records (record numbers 0..records-1),
// ops the workload's total operation count (it sizes the zipfian key space
// for inserts, as YCSB does), counter the shared insert counter.
func NewStream(w *Workload, records, ops uint64, counter *Counter, seed uint64) *Stream {
	rng := rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
	s := &Stream{w: w, rng: rng, counter: counter}
	switch w.RequestDistribution {
	case DistZipfian:
		expectedNew := uint64(float64(ops) * w.InsertProportion * 2)
		s.keys = NewScrambledZipfian(rng, 0, records+expectedNew, w.ZipfianConstant)
	case DistLatest:
		s.keys = NewSkewedLatest(rng, counter, w.ZipfianConstant)
	default:
		s.keys = NewUniform(rng, 0, records)
	}
	universe := w.NegativeUniverseSize(records)
	s.universe, s.shiftAt = universe, ^uint64(0)
	if w.NegativeDistribution == DistUniform {
		s.neg = NewUniform(rng, 0, universe)
	} else {
		s.neg = NewScrambledZipfian(rng, 0, universe, w.ZipfianConstant)
	}
	acc := 0.0
	for i, x := range w.Mix() {
		acc += x
		s.cum[i] = acc
	}
	s.cum[4] = 1
	return s
}

// NegativeUniverseSize returns the size of the absent-key universe of w for a
// data set of records records.
func (w *Workload) NegativeUniverseSize(records uint64) uint64 {
	if w.NegativeUniverse != 0 {
		return w.NegativeUniverse
	}
	return records
}

// NegativeKeySpace is the number of absent-key numbers the streams of w
// may return: the universe, twice over with a shift.
func (w *Workload) NegativeKeySpace(records uint64) uint64 {
	u := w.NegativeUniverseSize(records)
	if w.NegativeShift > 0 {
		return 2 * u
	}
	return u
}

// ShiftNegativesAfter makes absent reads draw from the second universe
// (numbers universe..2*universe-1, same distribution) once the stream has
// generated ops operations. The runner calls it with the workload's
// NegativeShift share of the thread's operations.
func (s *Stream) ShiftNegativesAfter(ops uint64) { s.shiftAt = ops }

// nextKey draws a stored record number that is known to exist (YCSB's
// nextKeynum loop).
func (s *Stream) nextKey() uint64 {
	for i := 0; ; i++ {
		k := s.keys.Next()
		if n := s.counter.Count(); k < n {
			return k
		} else if i > 100 && n > 0 {
			return k % n
		}
	}
}

// Next returns the next operation.
func (s *Stream) Next() Op {
	u := s.rng.Float64()
	s.ops++
	switch {
	case u < s.cum[0]:
		if s.w.NegativeProportion > 0 && s.rng.Float64() < s.w.NegativeProportion {
			k := s.neg.Next()
			if s.ops > s.shiftAt {
				k += s.universe
			}
			return Op{Kind: OpReadAbsent, Key: k}
		}
		return Op{Kind: OpRead, Key: s.nextKey()}
	case u < s.cum[1]:
		return Op{Kind: OpUpdate, Key: s.nextKey()}
	case u < s.cum[2]:
		return Op{Kind: OpInsert, Key: s.counter.Next()}
	case u < s.cum[3]:
		return Op{Kind: OpScan, Key: s.nextKey(), ScanLen: 1 + s.rng.IntN(s.w.MaxScanLength)}
	default:
		return Op{Kind: OpReadModifyWrite, Key: s.nextKey()}
	}
}

// FillValue fills v with printable random bytes (YCSB values are random
// ASCII), so that values compress no better than YCSB's.
func (s *Stream) FillValue(v []byte) { FillValue(s.rng, v) }

// FillValue fills v with printable random bytes drawn from rng.
func FillValue(rng *rand.Rand, v []byte) {
	for i := 0; i < len(v); i += 8 {
		x := rng.Uint64()
		for j := i; j < len(v) && j < i+8; j++ {
			v[j] = ' ' + byte(x%95)
			x >>= 8
		}
	}
}

package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/adaptkv/adaptkv/cmd/kvbench/internal/ycsb"
)

// bitset is a set of small integers (unique keys touched), filled after a
// run from its workers' key logs.
type bitset []uint64

func newBitset(n uint64) bitset { return make(bitset, (n+63)/64) }

func (b bitset) add(i uint64) {
	if w := i / 64; w < uint64(len(b)) {
		b[w] |= 1 << (i % 64)
	}
}

func (b bitset) count() uint64 {
	var n uint64
	for _, w := range b {
		n += uint64(bits.OnesCount64(w))
	}
	return n
}

// calibration holds what the calibration pass measured on one store.
type calibration struct {
	eps                   float64  // false-positive probes per filter check, fresh absent keys
	checksPerAbsentGet    float64  // filter checks per Get of an absent key
	fpChecksPerPresentGet *float64 // filter checks that could be false positives per Get of a stored key
}

// runner drives one store through load, calibration and workloads.
type runner struct {
	store     Store
	policy    string
	threads   int
	target    float64 // operations per second over all threads (0: unthrottled)
	seed      uint64
	valueSize int
	records   uint64 // records in the store (grows with inserts)
	progress  func(desc string, total int64) *progress
	phases    loadPhases // how long each step of the load took
	topStep   uint64     // records per flush of the load on top (0: one flush)
	turn      *storeTurn // the workload's turns among the stores (-interleave); nil: it runs alone
}

// getObserver is a store that accounts for a Get once kvbench has timed
// it (the Pebble DB.Get peer's unfiltered L6 probe).
type getObserver interface {
	AfterGet(key []byte, found bool) error
}

// afterGet hands a timed Get's key and outcome to the store, if it asks.
func (r *runner) afterGet(key []byte, found bool) error {
	if o, ok := r.store.(getObserver); ok {
		return o.AfterGet(key, found)
	}
	return nil
}

// get is an untimed Get with the store's accounting after it.
func (r *runner) get(key []byte) (bool, error) {
	found, err := r.store.Get(key)
	if err == nil {
		err = r.afterGet(key, found)
	}
	return found, err
}

func workloadSeed(seed uint64, name string, thread int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return seed*0x9E3779B97F4A7C15 ^ h.Sum64() ^ uint64(thread+1)*0xBF58476D1CE4E5B9
}

// absentSalt names the absent-key universe of a workload: its name and the
// seed, so that a rerun on a kept data set (-dir) with another -seed asks
// absent keys the stores' filters have not adapted to yet.
func (r *runner) absentSalt(workload string) string {
	return fmt.Sprintf("%s%d", workload, r.seed)
}

// candidates is the number of candidate tables a set of Gets considered:
// the filter checks and unfiltered probes (Counters.Candidates), or for a
// policy without filters ("none", which counts no checks) the probes.
func candidates(checks, probes uint64) uint64 { return max(checks, probes) }

// calibrate measures eps and tables checked per Get on fresh keys: k absent
// keys of their own universe, then k stored keys drawn uniformly.
func (r *runner) calibrate(k int) (calibration, error) {
	var c calibration
	m0, err := r.store.Metrics()
	if err != nil {
		return c, err
	}
	key := make([]byte, 0, 48)
	for i := 0; i < k; i++ {
		key = ycsb.AppendAbsentKey(key[:0], uint64(i), r.absentSalt("calibrate"))
		if _, err := r.get(key); err != nil {
			return c, err
		}
	}
	m1, err := r.store.Metrics()
	if err != nil {
		return c, err
	}
	d := m1.Sub(m0)
	// Every probe of an absent key is a false positive, so "maybes" are
	// exact here even for a store without a probe split.
	maybes := d.Maybes()
	if d.Known.ProbeSplit {
		maybes = d.FalsePositiveProbes + d.TruePositiveProbes
	}
	if cand := candidates(d.Candidates(), maybes); cand > 0 {
		c.eps = float64(maybes) / float64(cand)
		c.checksPerAbsentGet = float64(cand) / float64(k)
	}

	rng := rand.New(rand.NewPCG(workloadSeed(r.seed, "calibrate", 0), 2))
	for i := 0; i < k; i++ {
		key = ycsb.AppendKey(key[:0], rng.Uint64N(r.records))
		found, err := r.get(key)
		if err != nil {
			return c, err
		}
		if !found {
			return c, fmt.Errorf("calibration: stored key %q not found", key)
		}
	}
	m2, err := r.store.Metrics()
	if err != nil {
		return c, err
	}
	if m2.Known.ProbeSplit {
		d := m2.Sub(m1)
		// Checks of tables that do not hold the key: all but the true positives.
		cand := candidates(d.Candidates(), d.FalsePositiveProbes+d.TruePositiveProbes)
		c.fpChecksPerPresentGet = f64p(float64(cand-d.TruePositiveProbes) / float64(k))
	}
	return c, nil
}

type workerStats struct {
	hist                          histogram
	untimed                       time.Duration // between the store's calls (unpaced): kvbench's own
	ops, reads, absent, notFound  uint64
	updates, inserts, scans, rmws uint64
	// The keys read, absent and stored: logged after each call (an
	// append), counted into the run's sets of unique keys after the run
	// (a set's word is a cache miss per read).
	absentKeys, presentKeys []uint64
	err                     error
}

// keyLogCap is the capacity a worker's key log starts with (it grows
// beyond it): share of its n operations log a key, plus room for the
// draw's spread (a few standard deviations), at most n and 4M keys.
func keyLogCap(n uint64, share float64) int {
	want := share*float64(n) + 4*math.Sqrt(float64(n)) + 1024
	return int(min(n, 1<<22, uint64(want)))
}

// keyLogShares are the shares of w's operations that log an absent and a
// stored key: plain reads split by negativeproportion, and
// read-modify-writes (which read stored keys).
func keyLogShares(w *ycsb.Workload) (absent, present float64) {
	mix := w.Mix()
	reads, rmws := mix[0], mix[4]
	return reads * w.NegativeProportion, reads*(1-w.NegativeProportion) + rmws
}

// mixedRun is what the workers of one run of a mixed workload share.
type mixedRun struct {
	*runner
	w       *ycsb.Workload
	ops     uint64
	counter *ycsb.Counter
	salt    string
	obs     getObserver // nil unless the store asks
	bar     *progress
	start   time.Time
}

// run executes a mixed workload with r.threads workers.
func (r *runner) run(w *ycsb.Workload, ops uint64, cal calibration) (*Result, error) {
	m := &mixedRun{runner: r, w: w, ops: ops, counter: ycsb.NewCounter(r.records), salt: r.absentSalt(w.Name)}
	m.bar = r.progress(fmt.Sprintf("%s/%s", r.policy, w.Name), int64(ops))
	before, err := r.store.Metrics()
	if err != nil {
		return nil, err
	}
	stats := make([]workerStats, r.threads)
	var wg sync.WaitGroup
	m.obs, _ = r.store.(getObserver)
	mem := startMemMonitor(r.store, r.turn == nil)
	defer mem.close()
	absentShare, presentShare := keyLogShares(w)
	share := make([]uint64, r.threads) // each worker's operations
	for t := range share {
		share[t] = ops / uint64(r.threads)
		if uint64(t) < ops%uint64(r.threads) {
			share[t]++
		}
		stats[t].absentKeys = make([]uint64, 0, keyLogCap(share[t], absentShare))
		stats[t].presentKeys = make([]uint64, 0, keyLogCap(share[t], presentShare))
	}
	m.start = time.Now()
	for t, n := range share {
		wg.Add(1)
		go func(t int, n uint64) {
			defer wg.Done()
			// Labeled, so that a -cpuprofile of stores taking turns splits
			// by store (go tool pprof -tagfocus 'store=^POLICY$').
			pprof.Do(context.Background(), pprof.Labels("store", r.policy, "workload", w.Name), func(context.Context) {
				m.worker(&stats[t], t, n)
			})
		}(t, n)
	}
	wg.Wait()
	elapsed := r.turn.elapsed(time.Since(m.start))
	// kvbench's work between the store's calls (drawing and formatting
	// the next operation, counting the last, the store's accounting after
	// a Get) comes off the elapsed time: exactly with one worker, the
	// workers' mean with several.
	var untimed time.Duration
	for i := range stats {
		untimed += stats[i].untimed
	}
	elapsed -= untimed / time.Duration(r.threads)
	memPeak, rssPeak := mem.finish(r.store)
	m.bar.finish()
	absentSeen, presentSeen := newBitset(w.NegativeKeySpace(r.records)), newBitset(r.records+ops)
	for i := range stats {
		for _, k := range stats[i].absentKeys {
			absentSeen.add(k)
		}
		for _, k := range stats[i].presentKeys {
			presentSeen.add(k)
		}
		stats[i].absentKeys, stats[i].presentKeys = nil, nil
	}
	var all workerStats
	for i := range stats {
		if stats[i].err != nil {
			return nil, stats[i].err
		}
		all.add(&stats[i])
	}
	after, err := r.store.Metrics()
	if err != nil {
		return nil, err
	}
	if err := r.store.Footprint(&after); err != nil {
		return nil, err
	}
	res := &Result{
		Policy: r.policy, Workload: w.Name, Records: r.records, Threads: r.threads,
		Ops: all.ops, Reads: all.reads, AbsentReads: all.absent,
		UniqueAbsentKeys: absentSeen.count(), UniquePresent: presentSeen.count(),
		StoredNotFound: all.notFound, Updates: all.updates, Inserts: all.inserts,
		Scans: all.scans, ReadModifyWrites: all.rmws,
		Seconds: elapsed.Seconds(), OpsPerSec: float64(all.ops) / elapsed.Seconds(),
		P50us: all.hist.quantile(0.50), P99us: all.hist.quantile(0.99), P999us: all.hist.quantile(0.999),
		MemTablePeakBytes: memPeak, RSSPeakBytes: rssPeak,
	}
	r.records = m.counter.Count()
	fillCounters(res, after.Sub(before), cal)
	return res, nil
}

// clockBase is the origin of monotonic.
var clockBase = time.Now()

// monotonic returns the time since clockBase: one read of the monotonic
// clock, where time.Now reads the wall clock too. Operations are timed
// with two of them (56 ns on a 2-core VM, against 80 for time.Now and
// time.Since: a tenth of an absent Get in memory, the same for every
// store, so that ratios between stores read less of the clock).
func monotonic() time.Duration { return time.Since(clockBase) }

// worker runs n operations of worker t's stream, paced, counting them
// into st; the first error ends it (st.err).
//
// An operation is timed around the store's call alone: its key is
// formatted and its value filled before the first clock read, and what
// follows the second (counting, the key log, the store's AfterGet) is
// kvbench's. The time between one call's end and the next one's start
// goes to st.untimed, which run takes off the elapsed time, so that ops/s
// is operations per second of the store's calls; a wait for the store's
// turn is not in it (the clock is read again after one), and a paced run
// (-target) counts nothing there: its wall time is its rate. Two clock
// reads an operation are what remains of kvbench.
func (m *mixedRun) worker(st *workerStats, t int, n uint64) {
	s := ycsb.NewStream(m.w, m.records, m.ops, m.counter, workloadSeed(m.seed, m.w.Name, t))
	if m.w.NegativeShift > 0 {
		s.ShiftNegativesAfter(uint64(float64(n) * m.w.NegativeShift))
	}
	key := make([]byte, 0, 64)
	val := make([]byte, m.w.ValueSize())
	pace := newPacer(m.target/float64(m.threads), m.start)
	turn := m.turn.worker()
	defer turn.finish()
	var left time.Duration // when the worker last left a store call, or its turn began
	for i := uint64(0); i < n; i++ {
		if turn.step(i) || i == 0 {
			left = monotonic()
		}
		pace.wait(i)
		op := s.Next()
		key = m.prepare(s, op, key, val)
		t0 := monotonic()
		found, err := m.call(op, key, val)
		t1 := monotonic()
		st.hist.record(t1 - t0)
		if pace.interval == 0 {
			st.untimed += t0 - left
		}
		left = t1
		read := m.count(st, op, found, err)
		if err == nil && op.Kind == ycsb.OpReadAbsent && found {
			err = fmt.Errorf("absent key %q found", key)
		}
		if m.obs != nil && read && err == nil {
			err = m.obs.AfterGet(key, found)
		}
		st.ops++
		if err != nil {
			st.err = fmt.Errorf("%s %s: %w", m.w.Name, op.Kind, err)
			return
		}
		m.bar.add(1)
	}
}

// prepare formats op's key into key (a buffer it returns, refilled) and,
// for an operation that writes, fills val from s.
func (m *mixedRun) prepare(s *ycsb.Stream, op ycsb.Op, key, val []byte) []byte {
	switch op.Kind {
	case ycsb.OpReadAbsent:
		return ycsb.AppendAbsentKey(key[:0], op.Key, m.salt)
	case ycsb.OpUpdate, ycsb.OpInsert, ycsb.OpReadModifyWrite:
		s.FillValue(val)
	}
	return ycsb.AppendKey(key[:0], op.Key)
}

// call runs op on the store with its key and value; found is what a Get
// (of a read or a read-modify-write) found.
func (m *mixedRun) call(op ycsb.Op, key, val []byte) (found bool, err error) {
	switch op.Kind {
	case ycsb.OpRead, ycsb.OpReadAbsent:
		return m.store.Get(key)
	case ycsb.OpUpdate:
		return false, m.store.Set(key, val)
	case ycsb.OpInsert:
		err = m.store.Set(key, val)
		m.counter.Ack(op.Key)
		return false, err
	case ycsb.OpScan:
		_, err = m.store.Scan(key, op.ScanLen)
		return false, err
	case ycsb.OpReadModifyWrite:
		if found, err = m.store.Get(key); err == nil {
			err = m.store.Set(key, val)
		}
		return found, err
	}
	return false, fmt.Errorf("unknown operation %v", op.Kind)
}

// count counts op, whose Get found what it found, into st, logging the
// key it read; read says whether a Get ran.
func (m *mixedRun) count(st *workerStats, op ycsb.Op, found bool, err error) (read bool) {
	switch op.Kind {
	case ycsb.OpRead, ycsb.OpReadModifyWrite:
		st.reads++
		st.presentKeys = append(st.presentKeys, op.Key)
		if err == nil && !found {
			st.notFound++
		}
		if op.Kind == ycsb.OpReadModifyWrite {
			st.rmws++
		}
		return true
	case ycsb.OpReadAbsent:
		st.reads++
		st.absent++
		st.absentKeys = append(st.absentKeys, op.Key)
		return true
	case ycsb.OpUpdate:
		st.updates++
	case ycsb.OpInsert:
		st.inserts++
	case ycsb.OpScan:
		st.scans++
	}
	return false
}

// add counts the operations of s into st.
func (st *workerStats) add(s *workerStats) {
	st.hist.merge(&s.hist)
	st.ops += s.ops
	st.reads += s.reads
	st.absent += s.absent
	st.notFound += s.notFound
	st.updates += s.updates
	st.inserts += s.inserts
	st.scans += s.scans
	st.rmws += s.rmws
}

// adversary runs the adversarial stream of the TAF paper, section 6.1:
// round 1 queries |Q| fresh absent keys; a round queries every key of Q
// subrounds times; keys that were never a false positive in the round leave
// Q. A Get is a false positive when the store's false_positive_probes counter
// moved across it (single-threaded, so the delta is this Get's).
func (r *runner) adversary(w *ycsb.Workload, cal calibration) (*Result, error) {
	turn := r.turn.worker()
	defer turn.finish()
	q0 := w.AdversaryQueries
	if q0 == 0 {
		q0 = w.OperationCount / uint64(w.AdversarySubrounds)
	}
	if q0 == 0 {
		return nil, fmt.Errorf("%s: adversaryqueries (or operationcount) must be positive", w.Name)
	}
	queue := make([]uint64, q0)
	for i := range queue {
		queue[i] = uint64(i)
	}
	salt := r.absentSalt(w.Name)
	bar := r.progress(fmt.Sprintf("%s/%s", r.policy, w.Name), int64(q0)*int64(w.AdversarySubrounds))
	defer bar.finish()
	before, err := r.store.Metrics()
	if err != nil {
		return nil, err
	}
	var hist histogram
	var spent time.Duration
	adv := &AdversaryResult{}
	mem := startMemMonitor(r.store, r.turn == nil)
	defer mem.close()
	key := make([]byte, 0, 64)
	var gets uint64
	for round := 0; round < w.AdversaryMaxRounds && len(queue) > 0; round++ {
		fp := make([]bool, len(queue))
		rd := AdversaryRound{Queries: len(queue)}
		for sub := 0; sub < w.AdversarySubrounds; sub++ {
			for i, k := range queue {
				key = ycsb.AppendAbsentKey(key[:0], k, salt)
				turn.step(gets)
				d, n, err := r.absentGet(key)
				if err != nil {
					return nil, err
				}
				spent += d
				hist.record(d)
				gets++
				rd.Gets++
				if n > 0 {
					rd.FPProbes += n
					fp[i] = true
				}
				if round == 0 {
					bar.add(1)
				}
			}
		}
		next := queue[:0]
		for i, k := range queue {
			if fp[i] {
				next = append(next, k)
			}
		}
		queue = next
		rd.FPKeys = len(queue)
		adv.Rounds = append(adv.Rounds, rd)
	}
	memPeak, rssPeak := mem.finish(r.store)
	last := adv.Rounds[len(adv.Rounds)-1]
	adv.FinalFPRate = float64(last.FPProbes) / float64(last.Gets)
	after, err := r.store.Metrics()
	if err != nil {
		return nil, err
	}
	if err := r.store.Footprint(&after); err != nil {
		return nil, err
	}
	res := &Result{
		Policy: r.policy, Workload: w.Name, Records: r.records, Threads: 1,
		Ops: gets, Reads: gets, AbsentReads: gets, UniqueAbsentKeys: q0,
		Seconds:   spent.Seconds(),
		OpsPerSec: float64(gets) / spent.Seconds(),
		P50us:     hist.quantile(0.50), P99us: hist.quantile(0.99), P999us: hist.quantile(0.999),
		Adversary: adv, MemTablePeakBytes: memPeak, RSSPeakBytes: rssPeak,
	}
	fillCounters(res, after.Sub(before), cal)
	return res, nil
}

// absentGet times a Get of the absent key and returns its time and its
// false-positive probes: the move of the store's counter across it (a
// store without a probe split reports "maybes" there: exact, since the key
// is absent), read from the store's cheap counters (Store.FalsePositiveProbes).
func (r *runner) absentGet(key []byte) (time.Duration, uint64, error) {
	fp0, err := r.store.FalsePositiveProbes()
	if err != nil {
		return 0, 0, err
	}
	t0 := monotonic()
	found, err := r.store.Get(key)
	d := monotonic() - t0
	if err == nil {
		err = r.afterGet(key, found)
	}
	if err != nil {
		return 0, 0, err
	}
	if found {
		return 0, 0, fmt.Errorf("absent key %q found", key)
	}
	fp1, err := r.store.FalsePositiveProbes()
	if err != nil {
		return 0, 0, err
	}
	return d, fp1 - fp0, nil
}

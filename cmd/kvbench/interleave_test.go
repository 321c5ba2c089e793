package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTakeTurns: stores' workers run in turns, one store at a time, each
// turn at most the slice's operations, round-robin while several stores
// have work; a store that finishes leaves the rotation, and one whose run
// returns before it starts a worker does not hold the others up.
func TestTakeTurns(t *testing.T) {
	var mu sync.Mutex
	var log []string
	type store struct {
		workers int
		ops     uint64 // per worker
		quits   bool   // the run returns without starting its workers
	}
	stores := []store{{workers: 2, ops: 25}, {workers: 1, ops: 7}, {workers: 3, ops: 0}, {workers: 1, quits: true}}
	turns := make([]*storeTurn, len(stores))
	var wg sync.WaitGroup
	for si, s := range stores {
		turns[si] = newStoreTurn(10, s.workers)
		if s.quits {
			close(turns[si].quit)
			continue
		}
		for w := 0; w < s.workers; w++ {
			wg.Add(1)
			go func(turn *workerTurn, name string) {
				defer wg.Done()
				defer turn.finish()
				for i := uint64(0); i < s.ops; i++ {
					turn.step(i)
					mu.Lock()
					log = append(log, name)
					mu.Unlock()
				}
			}(turns[si].worker(), fmt.Sprint(si))
		}
	}
	takeTurns(turns)
	wg.Wait()

	// Store 0's two workers run 5 operations each a turn: 10, then store
	// 1's 7 (its whole stream, under its slice of 10), then store 0 alone.
	var runs []string
	var lens []int
	for _, s := range log {
		if len(runs) > 0 && runs[len(runs)-1] == s {
			lens[len(lens)-1]++
			continue
		}
		runs, lens = append(runs, s), append(lens, 1)
	}
	require.Equal(t, []string{"0", "1", "0"}, runs, "turns: %v", lens)
	require.Equal(t, []int{10, 7, 40}, lens)
	for si := range stores {
		select {
		case <-turns[si].finished:
		default:
			t.Fatalf("store %d's turns not finished", si)
		}
	}
	require.Positive(t, turns[0].elapsed(0))
	require.Equal(t, turns[0].spent, turns[0].elapsed(123), "a store that took turns reports its turns' time")

	var alone *storeTurn
	require.Equal(t, int64(123), int64(alone.elapsed(123)), "a store that runs alone reports its wall time")
	alone.worker().step(0) // returns at once
	alone.worker().finish()
}

// TestInterleave: with -interleave every store runs the same operations
// and sees the same counters as when it runs alone (single-threaded, the
// fakes are deterministic), with a workload that writes between two that
// read; only the resident-set peak, shared by the stores, is not reported.
func TestInterleave(t *testing.T) {
	args := []string{"-policies", "fake,fakeadaptive,bloom", "-workloads", "negzipf,churn,adversary", "-records", "3000",
		"-ops", "2000", "-calibrate", "200", "-seed", "3"}
	_, alone, _ := runJSON(t, append(args, "-interleave", "0")...)
	_, together, _ := runJSON(t, append(args, "-interleave", "128")...)
	require.Len(t, together, len(alone))
	key := func(r *Result) string { return r.Policy + "/" + r.Workload }
	byKey := map[string]*Result{}
	for _, r := range alone {
		byKey[key(r)] = r
	}
	for _, r := range together {
		checkConsistent(t, r)
		a := byKey[key(r)]
		require.NotNil(t, a, key(r))
		require.Nil(t, r.RSSPeakBytes, key(r))
		if r.Policy == "bloom" && r.Adversary != nil {
			continue // after churn's flushes the tree may differ, and with it the adversary's rounds
		}
		require.Equal(t, a.Ops, r.Ops, key(r))
		require.Equal(t, a.Reads, r.Reads, key(r))
		require.Equal(t, a.Inserts, r.Inserts, key(r))
		require.Equal(t, a.UniqueAbsentKeys, r.UniqueAbsentKeys, key(r))
		if r.Policy == "bloom" {
			continue // flushes and compactions run when they run: the counts may differ
		}
		require.Equal(t, a.FilterChecks, r.FilterChecks, key(r))
		require.Equal(t, *a.FalsePositiveProbes, *r.FalsePositiveProbes, key(r))
		if a.Adversary != nil {
			require.Equal(t, a.Adversary.Rounds, r.Adversary.Rounds, key(r))
		}
	}

	_, threads, _ := runJSON(t, append(args, "-interleave", "100", "-threads", "3", "-policies", "fake,fakeadaptive")...)
	for _, r := range threads {
		checkConsistent(t, r)
		require.Equal(t, byKey[key(r)].Ops, r.Ops, key(r))
	}

	var out strings.Builder
	require.ErrorContains(t, run([]string{"-interleave", "10", "-target", "100", "-q"}, &out, &out), "-interleave")
	require.ErrorContains(t, run([]string{"-interleave", "10", "-write", "-q"}, &out, &out), "-interleave")
}

// TestInterleaveDefault: the stores take turns unless told otherwise, and
// the default gives way to -target and -write (which run stores alone)
// where an -interleave given is an error.
func TestInterleaveDefault(t *testing.T) {
	parse := func(args ...string) (options, error) {
		var o options
		fs := o.flagSet(io.Discard)
		require.NoError(t, fs.Parse(args))
		o.noteSet(fs)
		_, err := o.check()
		return o, err
	}
	o, err := parse()
	require.NoError(t, err)
	require.Equal(t, uint64(defaultInterleave), o.interleave)
	for _, args := range [][]string{{"-target", "1000"}, {"-write"}, {"-interleave", "0"}} {
		o, err := parse(args...)
		require.NoError(t, err, "%v", args)
		require.Zero(t, o.interleave, "%v", args)
	}
	_, err = parse("-interleave", "10000", "-target", "1000")
	require.ErrorContains(t, err, "-interleave")

	_, results, _ := runJSON(t, "-policies", "fake,fakeadaptive", "-workloads", "negzipf", "-records", "2000",
		"-ops", "1000", "-calibrate", "100")
	for _, r := range results {
		require.Nil(t, r.RSSPeakBytes, "%s: the stores took turns, sharing the process", r.Policy)
	}
}

package main

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/adaptkv/adaptkv/cmd/kvbench/internal/ycsb"
)

// runInterleaved is one run of -interleave: it loads and calibrates every
// store in the order given, one after another, then runs each workload on
// all of them at once, the stores taking turns of o.interleave operations
// (takeTurns), and closes them. The rows come workload by workload.
func runInterleaved(policies []string, cfg StoreConfig, base string, o options, workloads []*ycsb.Workload,
	valueSize int, prog func(string, int64) *progress, log io.Writer) (_ []*Result, err error) {
	var stores []*preparedStore
	defer func() {
		for _, p := range stores {
			if cerr := p.close(); cerr != nil && err == nil {
				err = fmt.Errorf("%s: %w", p.r.policy, cerr)
			}
		}
	}()
	for _, pol := range policies {
		p, err := prepareStore(pol, cfg, base, o, valueSize, prog, log)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pol, err)
		}
		// Bars of stores that take turns would overwrite each other.
		p.r.progress = func(string, int64) *progress { return nil }
		stores = append(stores, p)
	}
	var results []*Result
	for wi, w := range workloads {
		// As runWorkloads: a workload after one that wrote starts once
		// the store has settled, every store before any runs.
		for i, p := range stores {
			if wi > 0 && wrote(results[len(results)-len(stores)+i]) {
				if err := p.r.store.Settle(settleQuiet); err != nil {
					return nil, fmt.Errorf("%s: %w", p.r.policy, err)
				}
			}
		}
		rs, err := takingTurns(stores, w, o.ops, o.interleave)
		if err != nil {
			return nil, err
		}
		results = append(results, rs...)
	}
	return results, nil
}

// takingTurns runs workload w on every store at once, the stores taking
// turns of slice operations, and returns their rows in the stores' order.
func takingTurns(stores []*preparedStore, w *ycsb.Workload, ops, slice uint64) ([]*Result, error) {
	turns := make([]*storeTurn, len(stores))
	rs := make([]*Result, len(stores))
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, p := range stores {
		turns[i] = newStoreTurn(slice, p.r.workers(w))
		p.r.turn = turns[i]
		wg.Add(1)
		go func(i int, p *preparedStore) {
			defer wg.Done()
			defer close(turns[i].quit)
			rs[i], errs[i] = p.r.runWorkload(w, ops, p.cal)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", p.r.policy, errs[i])
			}
		}(i, p)
	}
	takeTurns(turns)
	wg.Wait()
	for _, p := range stores {
		p.r.turn = nil
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rs, nil
}

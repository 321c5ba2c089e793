package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/adaptkv/adaptkv/cmd/kvbench/internal/ycsb"
)

// loadPhases are the wall times of the load's steps: the bottom's writes,
// its flush and its compaction to the last level (CompactAll), then the
// top's writes and its flushes with the compactions they set off (Settle).
type loadPhases struct {
	bottomWrite, bottomFlush, bottomCompact, topWrite, topSettle time.Duration
}

// String is the "records ready" line's breakdown of the load.
func (p loadPhases) String() string {
	return fmt.Sprintf("bottom: writes %.1fs, flush %.1fs, compaction %.1fs; top: writes %.1fs, flush and compactions %.1fs",
		p.bottomWrite.Seconds(), p.bottomFlush.Seconds(), p.bottomCompact.Seconds(), p.topWrite.Seconds(), p.topSettle.Seconds())
}

// bottomShare is the share of a loaded data set that is compacted into the
// last level before the rest is written on top of it: most data in the
// last level (as in a steady-state LSM), the newest records in L0 and the
// level(s) above it.
const bottomShare = 0.8

// load fills an open store with records lo..n-1 in steps of r.topStep
// records (all at once when 0), each flushed on its own and followed by
// the compactions it sets off (Settle). A step fills half a memtable at
// most, so no memtable fills on its own: the tables each flush writes and
// the compactions they set off do not depend on the timing of background
// work (a flush held back and merged with the next, a compaction that
// starts before or after a flush), and every store of one engine ends
// with the same levels, L0's tables among them (how many tables a level
// has still depends on the filter's size in the files).
func (r *runner) load(lo, n uint64) error {
	bar := r.progress("load "+r.policy, int64(n-lo))
	defer bar.finish()
	step := n - lo
	if r.topStep > 0 {
		step = r.topStep
	}
	for from := lo; from < n; from += step {
		to := min(n, from+step)
		t := time.Now()
		if err := r.insertRange(from, to, bar); err != nil {
			return err
		}
		r.phases.topWrite += time.Since(t)
		t = time.Now()
		if err := r.store.Flush(); err != nil {
			return fmt.Errorf("flush after load: %w", err)
		}
		quiet := stepQuiet
		if to == n {
			quiet = settleQuiet
		}
		if err := r.store.Settle(quiet); err != nil {
			return err
		}
		r.phases.topSettle += time.Since(t)
	}
	r.records = n
	return nil
}

// topStep is load's step for the stores of cfg and records of valueSize
// bytes: half the smaller memtable of the two engines, counting the key and
// the memtable's per-entry overhead generously (64 bytes a record), at
// least one record.
func topStep(cfg StoreConfig, valueSize int) uint64 {
	memTable := cfg.MemTableSize
	if cfg.PeerMemTableSize > 0 {
		memTable = min(memTable, cfg.PeerMemTableSize)
	}
	return max(1, uint64(memTable/2)/uint64(valueSize+64))
}

// loadBottom writes records 0..n-1 and compacts them all into the last
// level (the caller opens the store with a large memtable, so that the
// writes cost no background compactions).
func (r *runner) loadBottom(n uint64) error {
	bar := r.progress("load "+r.policy+" (bottom level)", int64(n))
	defer bar.finish()
	t := time.Now()
	if err := r.insertRange(0, n, bar); err != nil {
		return err
	}
	r.phases.bottomWrite, t = time.Since(t), time.Now()
	r.records = n
	if err := r.store.Flush(); err != nil {
		return fmt.Errorf("flush after load: %w", err)
	}
	r.phases.bottomFlush, t = time.Since(t), time.Now()
	if err := r.store.CompactAll(); err != nil {
		return fmt.Errorf("compact after load: %w", err)
	}
	r.phases.bottomCompact = time.Since(t)
	return nil
}

// loadBatch is the number of records per load batch.
const loadBatch = 256

// insertRange inserts records [lo, hi) with r.threads writers.
func (r *runner) insertRange(lo, hi uint64, bar *progress) error {
	var wg sync.WaitGroup
	errs := make([]error, r.threads)
	for t := 0; t < r.threads; t++ {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(workloadSeed(r.seed, "load", t), lo))
			bw, batched := r.store.(batchWriter)
			var keys, vals [][]byte
			flush := func() error {
				if len(keys) == 0 {
					return nil
				}
				err := bw.SetBatch(keys, vals)
				bar.add(int64(len(keys)))
				keys, vals = keys[:0], vals[:0]
				return err
			}
			for i := lo + uint64(t); i < hi; i += uint64(r.threads) {
				key := ycsb.AppendKey(make([]byte, 0, 24), i)
				val := make([]byte, r.valueSize)
				ycsb.FillValue(rng, val)
				if !batched {
					if err := r.store.Set(key, val); err != nil {
						errs[t] = fmt.Errorf("load record %d: %w", i, err)
						return
					}
					bar.add(1)
					continue
				}
				keys, vals = append(keys, key), append(vals, val)
				if len(keys) == loadBatch {
					if err := flush(); err != nil {
						errs[t] = fmt.Errorf("load records before %d: %w", i, err)
						return
					}
				}
			}
			if batched {
				if err := flush(); err != nil {
					errs[t] = fmt.Errorf("load: %w", err)
				}
			}
		}(t)
	}
	wg.Wait()
	return errors.Join(errs...)
}

package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"sync"
	"time"
)

// memSampleEvery is how often a workload samples its store's memtable
// memory: a peak shorter than this may be missed, by every store alike.
const memSampleEvery = 10 * time.Millisecond

// memMonitor follows a store's memory while a workload runs: the most
// memory its memtables held (Counters.MemTableBytes, sampled) and the
// process's peak resident set (Linux's VmHWM, reset when the workload
// starts).
type memMonitor struct {
	stop chan struct{}
	once sync.Once
	done sync.WaitGroup
	peak uint64
	rss  bool // the peak resident set was reset, so VmHWM is this workload's
}

// startMemMonitor starts sampling s's memtable memory and, with rss,
// resets the process's peak resident set (without, or where it cannot,
// finish reports none: a store that takes turns with others shares the
// process with them).
func startMemMonitor(s Store, rss bool) *memMonitor {
	m := &memMonitor{stop: make(chan struct{}), rss: rss && resetPeakRSS()}
	m.sample(s)
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		t := time.NewTicker(memSampleEvery)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.sample(s)
			}
		}
	}()
	return m
}

func (m *memMonitor) sample(s Store) {
	if c, err := s.Metrics(); err == nil {
		m.peak = max(m.peak, c.MemTableBytes)
	}
}

// finish stops sampling and returns the peak memtable memory and, where
// the system reports it, the peak resident set since the start.
func (m *memMonitor) finish(s Store) (memTable uint64, rss *uint64) {
	m.close()
	m.sample(s)
	if m.rss {
		if v, ok := peakRSS(); ok {
			rss = &v
		}
	}
	return m.peak, rss
}

// close stops the sampling (once; a workload that fails defers it).
func (m *memMonitor) close() {
	m.once.Do(func() {
		close(m.stop)
		m.done.Wait()
	})
}

// resetPeakRSS resets the process's peak resident set size (Linux:
// writing 5 to /proc/self/clear_refs) and reports whether it could.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS reads the process's peak resident set size in bytes (Linux's
// VmHWM in /proc/self/status).
func peakRSS() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			f := bytes.Fields(rest)
			if len(f) != 2 || string(f[1]) != "kB" {
				return 0, false
			}
			kb, err := strconv.ParseUint(string(f[0]), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

package main

import (
	"bytes"
	"hash/fnv"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adaptkv/adaptkv/cmd/kvbench/internal/ycsb"
	"github.com/stretchr/testify/require"
)

// fakeStore is an in-memory store with simulated tables and filters: every
// key lives in a map; each Get checks fakeTables simulated tables whose
// filter says "maybe" for an absent key when fnv(key, table) % 1000 < 20
// (eps = 2%). The adaptive variant remembers each false positive and never
// repeats it. It lets the runner's accounting be checked against known
// behaviour.
type fakeStore struct {
	mu                                       sync.RWMutex
	data                                     map[string][]byte
	adaptive                                 bool
	fixed                                    sync.Map // key+table -> struct{}
	gets, checks, negatives, fps, tps, adapt atomic.Uint64
	absentAsks                               sync.Map // absent key -> *atomic.Uint64: Gets of it
	settles                                  atomic.Int64
}

const fakeTables = 3

// fakeDirs keeps each fake's data by directory, so that reopening a fake
// (kvbench reopens a store after the bulk load) finds its records.
var fakeDirs sync.Map // dir -> *fakeStore

func openFake(cfg StoreConfig, adaptive bool) (Store, error) {
	s, _ := fakeDirs.LoadOrStore(cfg.Dir, &fakeStore{data: map[string][]byte{}, adaptive: adaptive})
	return s.(*fakeStore), nil
}

func init() {
	extraStores["fake"] = func(cfg StoreConfig) (Store, error) { return openFake(cfg, false) }
	extraStores["fakeadaptive"] = func(cfg StoreConfig) (Store, error) { return openFake(cfg, true) }
}

func fakeFP(key []byte, table int) bool {
	h := fnv.New64a()
	h.Write(key)
	h.Write([]byte{byte(table)})
	return h.Sum64()%1000 < 20
}

func (s *fakeStore) Get(key []byte) (bool, error) {
	s.gets.Add(1)
	s.mu.RLock()
	_, found := s.data[string(key)]
	s.mu.RUnlock()
	if !found {
		n, _ := s.absentAsks.LoadOrStore(string(key), new(atomic.Uint64))
		n.(*atomic.Uint64).Add(1)
	}
	for t := 0; t < fakeTables; t++ {
		s.checks.Add(1)
		if found && t == fakeTables-1 {
			s.tps.Add(1)
			return true, nil
		}
		id := string(key) + string(rune('0'+t))
		_, wasFixed := s.fixed.Load(id)
		if fakeFP(key, t) && !(s.adaptive && wasFixed) {
			s.fps.Add(1)
			if s.adaptive {
				s.fixed.Store(id, struct{}{})
				s.adapt.Add(1)
			}
			continue
		}
		s.negatives.Add(1)
	}
	return found, nil
}

func (s *fakeStore) Set(key, value []byte) error {
	s.mu.Lock()
	s.data[string(key)] = append([]byte(nil), value...)
	s.mu.Unlock()
	return nil
}

func (s *fakeStore) Delete(key []byte) error {
	s.mu.Lock()
	delete(s.data, string(key))
	s.mu.Unlock()
	return nil
}

func (s *fakeStore) Scan(start []byte, n int) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var keys []string
	for k := range s.data {
		if bytes.Compare([]byte(k), start) >= 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return min(n, len(keys)), nil
}

func (s *fakeStore) Flush() error               { return nil }
func (s *fakeStore) Settle(time.Duration) error { s.settles.Add(1); return nil }
func (s *fakeStore) CompactAll() error          { return nil }
func (s *fakeStore) Close() error               { return nil }

func (s *fakeStore) Metrics() (Counters, error) {
	return Counters{
		Gets: s.gets.Load(), FilterChecks: s.checks.Load(), FilterNegatives: s.negatives.Load(),
		FalsePositiveProbes: s.fps.Load(), TruePositiveProbes: s.tps.Load(), Adaptations: s.adapt.Load(),
		Known: Known{Gets: true, ProbeSplit: true, Adaptive: true},
	}, nil
}

func (s *fakeStore) FalsePositiveProbes() (uint64, error) { return s.fps.Load(), nil }

func (s *fakeStore) Footprint(c *Counters) error {
	c.Files = [7]int{0, 1, 1, 1}
	c.FilterMemoryBytes = 1000
	c.FilterBitsPerKey = 10
	return nil
}

func timeMicros(us int) time.Duration { return time.Duration(us) * time.Microsecond }

// smallConfig is a store shape of 64 KiB memtables and tables for tests.
func smallConfig(t *testing.T) StoreConfig {
	return StoreConfig{Dir: t.TempDir(), BitsPerKey: 10, MemTableSize: 64 << 10, TargetFileSize: 64 << 10,
		BaseLevelBytes: 256 << 10, L0Trigger: 4, BlockCacheSize: 1 << 20}
}

// testRunner drives s alone, single-threaded, without progress bars.
func testRunner(s Store, policy string, seed uint64) *runner {
	return &runner{store: s, policy: policy, threads: 1, seed: seed, valueSize: 100,
		progress: func(string, int64) *progress { return nil }}
}

// TestSettleAfterWrites: a workload that follows one that wrote starts on
// a settled store; one that follows a read-only workload, or the last,
// does not wait.
func TestSettleAfterWrites(t *testing.T) {
	s, err := openFake(StoreConfig{Dir: t.TempDir()}, false)
	require.NoError(t, err)
	f := s.(*fakeStore)
	r := testRunner(s, "fake", 1)
	require.NoError(t, r.load(0, 2000))
	var ws []*ycsb.Workload
	for _, name := range []string{"d", "c", "negzipf", "d"} {
		w, err := loadWorkload(name)
		require.NoError(t, err)
		ws = append(ws, w)
	}
	before := f.settles.Load()
	results, err := r.runWorkloads(ws, 500, calibration{eps: 0.01, checksPerAbsentGet: 1})
	require.NoError(t, err)
	require.True(t, wrote(results[0]) && !wrote(results[1]) && !wrote(results[2]) && wrote(results[3]))
	require.Equal(t, int64(1), f.settles.Load()-before, "once: after the first workloadd")
}

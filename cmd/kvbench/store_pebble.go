package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adaptkv/adaptkv/internal/directio"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The Pebble peers: one pebble.DB, read the two ways a Pebble user would.
const (
	// pebblePeerName reads with DB.Get, Pebble's default point read, which
	// skips the filters of the bottom level (L6): a key that reaches L6
	// costs a table probe whatever the filter would say.
	pebblePeerName = "pebble"
	// pebbleL6PeerName reads with SeekPrefixGE on a reused iterator opened
	// with UseL6Filters: every level's filter is consulted, Pebble's best
	// filtered point read.
	pebbleL6PeerName = "pebble-l6"
)

// pebblePeers lists the Pebble peers' names.
var pebblePeers = []string{pebblePeerName, pebbleL6PeerName}

// countingFilter is Pebble's own bloom filter policy with counters around
// MayContain. It keeps bloom's name, so the tables are byte for byte those
// Pebble writes with bloom.FilterPolicy(bits); the counters equal
// db.Metrics().Filter (tested) but are cheap enough to read around every Get.
type countingFilter struct {
	pebble.FilterPolicy
	checks, negatives atomic.Uint64
}

func (f *countingFilter) MayContain(ftype pebble.FilterType, filter, key []byte) bool {
	ok := f.FilterPolicy.MayContain(ftype, filter, key)
	f.checks.Add(1)
	if !ok {
		f.negatives.Add(1)
	}
	return ok
}

// pebbleStore is a peer: a real pebble.DB with Pebble's bloom filter at the
// same bits/key on every level. Point reads use DB.Get (pebble) or, with
// l6, an iterator with UseL6Filters and SeekPrefixGE (pebble-l6), so that
// every level's filter is consulted, as in adaptkv. A prefix seek
// positions every level, so a present key also consults the filters of
// the levels below the one holding it.
// pebble-l6's iterators are reused while nothing is written (iterPool).
type pebbleStore struct {
	db     *pebble.DB
	filter *countingFilter
	gets   atomic.Uint64
	l6     bool
	iters  *iterPool[*pebble.Iterator]
	// L6's table key ranges (DB.Get reader only, see AfterGet): reloaded
	// after the flush or compaction that made them stale.
	l6Stale    atomic.Bool
	l6Mu       sync.Mutex
	l6Ranges   atomic.Pointer[[]keyRange]
	unfiltered atomic.Uint64 // DB.Get's L6 probes
	reads      *directio.Stats
	sync       *pebble.WriteOptions // Set's
	// memtablesFlushed counts the memtables flushes wrote (a Pebble flush
	// takes every queued memtable; its Metrics count the flushes).
	memtablesFlushed atomic.Uint64
	// stall sums the writers' waits (WriteStallBegin to WriteStallEnd).
	stallMu    sync.Mutex
	stallStart time.Time
	stalled    time.Duration
	stalls     uint64
}

// keyRange is a table's smallest and largest user key.
type keyRange struct{ smallest, largest []byte }

type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf(format, args...))
}

// pebbleOptions are a Pebble peer's options for cfg, with filter f on
// every level and cache as its block cache. The options that mean the
// same in both engines are the adaptkv store's (StoreConfig; a zero field
// leaves Pebble's default); the rest are Pebble's defaults
// (EnsureDefaults), which the run header lists where they differ.
func pebbleOptions(cfg StoreConfig, f pebble.FilterPolicy, cache *pebble.Cache) *pebble.Options {
	opts := &pebble.Options{
		Cache:                 cache,
		MemTableSize:          uint64(cmp.Or(cfg.PeerMemTableSize, cfg.MemTableSize)),
		L0CompactionThreshold: cfg.L0Trigger,
		L0StopWritesThreshold: cfg.L0StopWrites,
		MaxOpenFiles:          cfg.MaxOpenFiles,
		LBaseMaxBytes:         int64(cfg.BaseLevelBytes),
		Logger:                quietLogger{},
	}
	if cfg.MaxImmutableMemTables > 0 { // zero fields: Pebble's defaults
		opts.MemTableStopWritesThreshold = cfg.MaxImmutableMemTables + 1
	}
	if n := cfg.Compactions; n > 0 {
		opts.CompactionConcurrencyRange = func() (int, int) { return n, n }
	}
	for i := range opts.TargetFileSizes {
		opts.TargetFileSizes[i] = int64(cfg.TargetFileSize)
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = f
		opts.Levels[i].BlockSize = 4096
	}
	opts.EnsureDefaults()
	return opts
}

func openPebble(cfg StoreConfig, l6 bool) (*pebbleStore, error) {
	f := &countingFilter{FilterPolicy: bloom.FilterPolicy(cfg.BitsPerKey)}
	cache := pebble.NewCache(cfg.BlockCacheSize)
	defer cache.Unref()
	s := &pebbleStore{filter: f, l6: l6, iters: newIterPool[*pebble.Iterator]()}
	s.l6Ranges.Store(&[]keyRange{}) // read while the first load runs
	s.l6Stale.Store(true)
	opts := pebbleOptions(cfg, f, cache)
	fs, err := directio.New(vfs.Default, cfg.DirectReads, nil)
	if err != nil {
		return nil, fmt.Errorf("pebble peer: %w", err)
	}
	opts.FS, s.reads = fs, fs.Stats()
	stale := func() { s.l6Stale.Store(true) }
	s.sync = pebble.NoSync
	if cfg.SyncWrites {
		s.sync = pebble.Sync
	}
	opts.EventListener = &pebble.EventListener{
		FlushEnd: func(info pebble.FlushInfo) {
			if !info.Ingest && info.Err == nil {
				s.memtablesFlushed.Add(uint64(info.Input))
			}
			stale()
		},
		CompactionEnd: func(pebble.CompactionInfo) { stale() },
		TableIngested: func(pebble.TableIngestInfo) { stale() },
		WriteStallBegin: func(pebble.WriteStallBeginInfo) {
			s.stallMu.Lock()
			s.stallStart = time.Now()
			s.stalls++
			s.stallMu.Unlock()
		},
		WriteStallEnd: func() {
			s.stallMu.Lock()
			if !s.stallStart.IsZero() {
				s.stalled += time.Since(s.stallStart)
				s.stallStart = time.Time{}
			}
			s.stallMu.Unlock()
		},
	}
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("pebble peer: %w", err)
	}
	s.db = db
	return s, nil
}

// AfterGet counts the table probe DB.Get makes in L6 without asking a
// filter (Pebble skips L6's filters unless an iterator sets UseL6Filters).
// A Get that found nothing passed every level down to L6 (kvbench
// deletes no key, so no tombstone stops it earlier) and probed the L6
// table whose key range holds the key, if one does: Pebble's level
// iterator skips a table whose smallest key is above it. The ranges are
// L6's as of the last flush or compaction, which may be one compaction
// newer than the version a concurrent Get read. A Get that found its key
// is not counted: Pebble does not say which level answered, so on stored
// keys this row's probes are the filters' "maybe" answers only. kvbench
// calls AfterGet after it has timed the Get and takes its time off the
// workload's, so the accounting costs Pebble's reads nothing.
func (s *pebbleStore) AfterGet(key []byte, found bool) error {
	if s.l6 || found {
		return nil
	}
	ranges, err := s.l6KeyRanges()
	if err != nil {
		return err
	}
	i := sort.Search(len(ranges), func(i int) bool { return bytes.Compare(ranges[i].largest, key) >= 0 })
	if i < len(ranges) && bytes.Compare(ranges[i].smallest, key) <= 0 {
		s.unfiltered.Add(1)
	}
	return nil
}

// l6KeyRanges returns L6's table key ranges in key order, reloaded if a
// flush or compaction ended since they were read.
func (s *pebbleStore) l6KeyRanges() ([]keyRange, error) {
	if !s.l6Stale.Load() {
		return *s.l6Ranges.Load(), nil
	}
	s.l6Mu.Lock()
	defer s.l6Mu.Unlock()
	if s.l6Stale.Swap(false) {
		levels, err := s.db.SSTables()
		if err != nil {
			s.l6Stale.Store(true)
			return nil, err
		}
		var ranges []keyRange
		if len(levels) > 6 {
			for _, t := range levels[6] {
				ranges = append(ranges, keyRange{slices.Clone(t.Smallest.UserKey), slices.Clone(t.Largest.UserKey)})
			}
		}
		slices.SortFunc(ranges, func(a, b keyRange) int { return bytes.Compare(a.smallest, b.smallest) })
		s.l6Ranges.Store(&ranges)
	}
	return *s.l6Ranges.Load(), nil
}

func (s *pebbleStore) Get(key []byte) (bool, error) {
	s.gets.Add(1)
	if !s.l6 {
		v, closer, err := s.db.Get(key)
		if errors.Is(err, pebble.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		_ = append([]byte(nil), v...) // adaptkv's Get returns a copy: same cost
		return true, closer.Close()
	}
	pi, err := s.iters.get(func() (*pebble.Iterator, error) {
		return s.db.NewIter(&pebble.IterOptions{UseL6Filters: true})
	})
	if err != nil {
		return false, err
	}
	found := pi.it.SeekPrefixGE(key) && bytes.Equal(pi.it.Key(), key)
	if found {
		v, err := pi.it.ValueAndErr()
		if err != nil {
			pi.it.Close()
			return false, err
		}
		_ = append([]byte(nil), v...)
	}
	if err := pi.it.Error(); err != nil {
		pi.it.Close()
		return false, err
	}
	return found, s.iters.put(pi)
}

// wrote counts a completed write (pooled iterators opened before are stale).
func (s *pebbleStore) wrote(err error) error { return s.iters.wrote(err) }

func (s *pebbleStore) Set(key, value []byte) error {
	return s.wrote(s.db.Set(key, value, s.sync))
}

func (s *pebbleStore) SetBatch(keys, values [][]byte) error {
	b := s.db.NewBatch()
	for i := range keys {
		if err := b.Set(keys[i], values[i], nil); err != nil {
			b.Close()
			return err
		}
	}
	return s.wrote(b.Commit(pebble.NoSync))
}

func (s *pebbleStore) Delete(key []byte) error { return s.wrote(s.db.Delete(key, pebble.NoSync)) }

func (s *pebbleStore) Scan(start []byte, n int) (int, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: start}) // as the adaptkv stores' scans
	if err != nil {
		return 0, err
	}
	got := 0
	for ok := it.SeekGE(start); ok && got < n; ok = it.Next() {
		if _, err := it.ValueAndErr(); err != nil {
			it.Close()
			return got, err
		}
		got++
	}
	return got, it.Close()
}

func (s *pebbleStore) Flush() error { return s.db.Flush() }

// CompactAll compacts the whole key space ("user" keys) to the last level.
// Not parallelized: a parallel manual compaction leaves part of the range in
// the level above (checked: 16 L5 + 9 L6 tables instead of 25 L6 tables).
func (s *pebbleStore) CompactAll() error {
	return s.db.Compact(context.Background(), []byte("user"), []byte("user\xff"), false)
}

// Settle waits until no compaction runs and none has started for quiet.
func (s *pebbleStore) Settle(quiet time.Duration) error {
	return settleBy(quiet, func() (uint64, bool) {
		m := s.db.Metrics()
		return uint64(m.Compact.Count), m.Compact.NumInProgress == 0
	})
}

func (s *pebbleStore) Metrics() (Counters, error) {
	checks := s.filter.checks.Load()
	neg := s.filter.negatives.Load()
	unfiltered := s.unfiltered.Load()
	c := Counters{
		Gets:                s.gets.Load(),
		FilterChecks:        checks,
		FilterNegatives:     neg,
		FalsePositiveProbes: checks - neg + unfiltered, // probes; see Known.ProbeSplit
		UnfilteredProbes:    unfiltered,
		Known:               Known{Gets: true, TableReads: true},
	}
	m := s.db.Metrics()
	c.MemTableBytes = m.MemTable.Size
	c.TableReads, c.TableReadBytes = s.reads.Reads.Load(), s.reads.Bytes.Load()
	for l := range m.Levels {
		c.BytesFlushed += m.Levels[l].TableBytesFlushed
		c.BytesCompacted += m.Levels[l].TableBytesCompacted
	}
	c.Flushes, c.Compactions = s.memtablesFlushed.Load(), uint64(m.Compact.Count-m.Compact.MoveCount) // moves rewrite nothing
	s.stallMu.Lock()
	c.WriteStall, c.WriteStalls = s.stalled, s.stalls
	s.stallMu.Unlock()
	return c, nil
}

// FalsePositiveProbes is Metrics' figure from the filter's and the
// unfiltered probes' counters alone.
func (s *pebbleStore) FalsePositiveProbes() (uint64, error) {
	return s.filter.checks.Load() - s.filter.negatives.Load() + s.unfiltered.Load(), nil
}

// Footprint sums the filter blocks and entries of the live tables
// (sstable properties) and counts tables per level.
func (s *pebbleStore) Footprint(c *Counters) error {
	levels, err := s.db.SSTables(pebble.WithProperties())
	if err != nil {
		return err
	}
	var bytes, entries uint64
	for l, tables := range levels {
		if l < len(c.Files) {
			c.Files[l] = len(tables)
		}
		for _, t := range tables {
			if t.Properties != nil {
				bytes += t.Properties.FilterSize
				entries += t.Properties.NumEntries
			}
		}
	}
	c.FilterMemoryBytes = bytes
	if entries > 0 {
		c.FilterBitsPerKey = float64(bytes*8) / float64(entries)
	}
	return nil
}

// Close closes the pooled iterators, then the DB.
func (s *pebbleStore) Close() error {
	return errors.Join(s.iters.close(), s.db.Close())
}

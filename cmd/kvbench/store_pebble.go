package main

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// pebblePeerName is the policy name of the Pebble peer.
const pebblePeerName = "pebble"

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

// pebbleStore is the peer: a real pebble.DB with Pebble's bloom filter at the
// same bits/key on every level. Point reads use an iterator with
// UseL6Filters and SeekPrefixGE, because pebble.DB.Get skips the filters of
// the bottom level (L6); this way every level's filter is consulted, as in
// adaptkv. Note that a prefix seek positions every level, so a present key
// also consults the filters of the levels below the one holding it.
type pebbleStore struct {
	db     *pebble.DB
	filter *countingFilter
	gets   atomic.Uint64
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf(format, args...))
}

func openPebble(cfg StoreConfig) (*pebbleStore, error) {
	f := &countingFilter{FilterPolicy: bloom.FilterPolicy(cfg.BitsPerKey)}
	cache := pebble.NewCache(cfg.BlockCacheSize)
	defer cache.Unref()
	opts := &pebble.Options{
		Cache:                 cache,
		MemTableSize:          uint64(cfg.MemTableSize),
		L0CompactionThreshold: cfg.L0Trigger,
		LBaseMaxBytes:         int64(cfg.BaseLevelBytes),
		Logger:                quietLogger{},
	}
	for i := range opts.TargetFileSizes {
		opts.TargetFileSizes[i] = int64(cfg.TargetFileSize)
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = f
		opts.Levels[i].BlockSize = 4096
	}
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("pebble peer: %w", err)
	}
	return &pebbleStore{db: db, filter: f}, nil
}

func (s *pebbleStore) Get(key []byte) (bool, error) {
	s.gets.Add(1)
	it, err := s.db.NewIter(&pebble.IterOptions{UseL6Filters: true})
	if err != nil {
		return false, err
	}
	found := it.SeekPrefixGE(key) && bytes.Equal(it.Key(), key)
	if found {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return false, err
		}
		_ = append([]byte(nil), v...) // adaptkv's Get returns a copy: same cost
	}
	return found, it.Close()
}

func (s *pebbleStore) Set(key, value []byte) error { return s.db.Set(key, value, pebble.NoSync) }
func (s *pebbleStore) SetBatch(keys, values [][]byte) error {
	b := s.db.NewBatch()
	for i := range keys {
		if err := b.Set(keys[i], values[i], nil); err != nil {
			b.Close()
			return err
		}
	}
	return b.Commit(pebble.NoSync)
}

func (s *pebbleStore) Delete(key []byte) error { return s.db.Delete(key, pebble.NoSync) }

func (s *pebbleStore) Scan(start []byte, n int) (int, error) {
	it, err := s.db.NewIter(nil)
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

// Settle waits until no compaction runs and none has started for a second.
func (s *pebbleStore) Settle() error {
	return settleBy(func() (uint64, bool) {
		m := s.db.Metrics()
		return uint64(m.Compact.Count), m.Compact.NumInProgress == 0
	})
}

func (s *pebbleStore) Metrics() (Counters, error) {
	checks := s.filter.checks.Load()
	neg := s.filter.negatives.Load()
	c := Counters{
		Gets:                s.gets.Load(),
		FilterChecks:        checks,
		FilterNegatives:     neg,
		FalsePositiveProbes: checks - neg, // "maybe" answers; see Known.ProbeSplit
	}
	return c, nil
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

func (s *pebbleStore) Close() error { return s.db.Close() }

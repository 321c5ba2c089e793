package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/kv"
)

// kvPolicies lists the adaptkv filter policies of this build.
func kvPolicies() []string { return filterpolicy.Names() }

// kvStore is adaptkv's kv.DB under one filter policy. Point reads use
// DB.Get or, with seekPrefix (-read seekprefix), Iterator.SeekPrefixGE on
// an iterator reused while nothing is written (iterPool), as pebble-l6
// reads Pebble.
type kvStore struct {
	db         *kv.DB
	sync       *kv.WriteOptions // Set's
	seekPrefix bool
	iters      *iterPool[*kv.Iterator]
}

// variantSep separates a store's filter policy from the options its
// variant sets: -policies aprefix:record_absent=always:fix_rule=every is an
// aprefix store with those two kv.Options (their names in
// kv.Options.String's text) on top of the run's, a store of its own beside
// plain aprefix, so that an option is compared as policies are.
const variantSep = ":"

// splitVariant returns a store name's filter policy and the options text
// (name=value lines, kv.ParseOptions's) its variant sets ("" for none).
func splitVariant(name string) (policy, options string) {
	policy, rest, _ := strings.Cut(name, variantSep)
	return policy, strings.ReplaceAll(rest, variantSep, "\n")
}

// checkVariant reports whether name is an adaptkv policy whose variant's
// options parse and, set on the run's (kvOptions), validate, or a store
// name without a variant: a bad variant stops the run before any store
// is loaded.
func checkVariant(name string, cfg StoreConfig) error {
	policy, text := splitVariant(name)
	if text == "" {
		return nil
	}
	if !slices.Contains(kvPolicies(), policy) {
		return fmt.Errorf("%w %q: options set only adaptkv stores (%s)", ErrUnknownStore, name, strings.Join(kvPolicies(), ","))
	}
	o, err := kvOptions(name, cfg)
	if err != nil {
		return err
	}
	if o.FilterPolicy != policy {
		return fmt.Errorf("store %q: the policy is named before the first %q, not by filter_policy", name, variantSep)
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("store %q: %w", name, err)
	}
	return nil
}

// kvOptions are an adaptkv store's options for cfg under store name (a
// policy and its variant's options), with every default filled in
// (kv.Options.EnsureDefaults), so the run header can compare them with the
// Pebble peers'.
func kvOptions(name string, cfg StoreConfig) (*kv.Options, error) {
	policy, variant := splitVariant(name)
	opts := &kv.Options{
		FilterPolicy:             policy,
		BlockCacheSize:           cfg.BlockCacheSize,
		MemTableSize:             cfg.MemTableSize,
		MaxImmutableMemTables:    cfg.MaxImmutableMemTables,
		L0CompactionThreshold:    cfg.L0Trigger,
		L0StopWritesThreshold:    cfg.L0StopWrites,
		MaxConcurrentCompactions: cfg.Compactions,
		MaxOpenFiles:             cfg.MaxOpenFiles,
		TargetFileSize:           cfg.TargetFileSize,
		KnownNegatives:           cfg.KnownNegatives,
		TableFormat:              cfg.TableFormat,
		DirectReads:              cfg.DirectReads,
		FixRule:                  cfg.FixRule,
		RecordAbsent:             cfg.RecordAbsent,
		FixInline:                cfg.FixInline,
		RemoteCacheSize:          cfg.RemoteCacheSize,
		DisableWALMapping:        cfg.DisableWALMapping,
		WALBufferNoSync:          cfg.WALBufferNoSync,
	}
	if policy == "bloom" {
		opts.Filter = filterpolicy.NewBloom(cfg.BitsPerKey)
	}
	if err := kv.ParseOptions(variant, opts); err != nil {
		return nil, fmt.Errorf("store %q: %w", name, err)
	}
	opts.EnsureDefaults()
	return opts, nil
}

func openKV(name string, cfg StoreConfig) (Store, error) {
	if policy, _ := splitVariant(name); !slices.Contains(filterpolicy.Names(), policy) {
		return nil, fmt.Errorf("%w %q", ErrUnknownStore, name)
	}
	opts, err := kvOptions(name, cfg)
	if err != nil {
		return nil, err
	}
	db, err := kv.Open(cfg.Dir, opts)
	if err != nil {
		return nil, err
	}
	s := &kvStore{db: db, sync: kv.NoSync, seekPrefix: cfg.SeekPrefixReads, iters: newIterPool[*kv.Iterator]()}
	if cfg.SyncWrites {
		s.sync = kv.Sync
	}
	return s, nil
}

func (s *kvStore) Get(key []byte) (bool, error) {
	if s.seekPrefix {
		return s.seekPrefixGet(key)
	}
	_, err := s.db.Get(key)
	if errors.Is(err, kv.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// seekPrefixGet reads key with SeekPrefixGE (its value is copied into the
// iterator, as Get copies it).
func (s *kvStore) seekPrefixGet(key []byte) (bool, error) {
	pi, err := s.iters.get(func() (*kv.Iterator, error) { return s.db.NewIter(nil) })
	if err != nil {
		return false, err
	}
	found := pi.it.SeekPrefixGE(key)
	if err := pi.it.Error(); err != nil {
		pi.it.Close()
		return false, err
	}
	return found, s.iters.put(pi)
}

func (s *kvStore) Set(key, value []byte) error { return s.iters.wrote(s.db.Set(key, value, s.sync)) }
func (s *kvStore) SetBatch(keys, values [][]byte) error {
	b := s.db.NewBatch()
	for i := range keys {
		if err := b.Set(keys[i], values[i]); err != nil {
			return err
		}
	}
	return s.iters.wrote(s.db.Apply(b, kv.NoSync))
}

func (s *kvStore) Delete(key []byte) error { return s.iters.wrote(s.db.Delete(key, kv.NoSync)) }

func (s *kvStore) Scan(start []byte, n int) (int, error) {
	it, err := s.db.NewIter(&kv.IterOptions{LowerBound: start})
	if err != nil {
		return 0, err
	}
	got := 0
	for ok := it.SeekGE(start); ok && got < n; ok = it.Next() {
		_ = it.Value()
		got++
	}
	return got, errors.Join(it.Error(), it.Close())
}

func (s *kvStore) Flush() error      { return s.db.Flush() }
func (s *kvStore) CompactAll() error { return s.db.Compact(nil, nil) }

// Settle: kv compacts in the background after flushes; wait until no
// compaction runs and the compaction count has stopped moving.
func (s *kvStore) Settle(quiet time.Duration) error {
	return settleBy(quiet, func() (uint64, bool) {
		m := s.db.Metrics()
		return m.Compactions + m.TableMoves, m.CompactionsRunning == 0
	})
}

func (s *kvStore) Metrics() (Counters, error) {
	m := s.db.Metrics()
	c := Counters{
		Gets:                 m.Gets,
		FilterChecks:         m.FilterChecks,
		FilterNegatives:      m.FilterNegatives,
		FalsePositiveProbes:  m.FalsePositiveProbes,
		TruePositiveProbes:   m.TruePositiveProbes,
		DataBlockReads:       m.DataBlockReads,
		Adaptations:          m.Adaptations,
		FixesDeferred:        m.FixesDeferred,
		FixesDropped:         m.FixesDropped,
		FalsePositivesCached: m.FalsePositivesCached,
		Rebuilds:             m.Rebuilds,
		RemoteReads:          m.RemoteReads,
		RemoteCacheHits:      m.RemoteCacheHits,
		FilterBitsPerKey:     m.FilterBitsPerKey,
		FilterMemoryBytes:    m.FilterMemoryBytes,
		BytesFlushed:         m.BytesFlushed,
		BytesCompacted:       m.BytesCompacted,
		Flushes:              m.Flushes,
		Compactions:          m.Compactions,
		WriteStall:           m.WriteStallTime,
		WriteStalls:          m.WriteStalls,
		WALWait:              m.WALSwitchWaitTime + m.WALPrepareWaitTime,
		WALWaits:             m.WALSwitchWaits + m.WALPrepareWaits,
		MemTableBytes:        m.MemTableBytes,
		TableReads:           m.TableReads + m.CompactionReads,
		TableReadBytes:       m.TableReadBytes + m.CompactionReadBytes,
		Known:                Known{Gets: true, ProbeSplit: true, DataBlockReads: true, Adaptive: true, TableReads: true, WALWaits: true},
	}
	for i := range c.Files {
		c.Files[i] = m.Levels[i].NumFiles
	}
	return c, nil
}

func (s *kvStore) FalsePositiveProbes() (uint64, error) {
	return s.db.ReadCounts().FalsePositiveProbes, nil
}

// Footprint: kv's Metrics already carries the gauges.
func (s *kvStore) Footprint(c *Counters) error {
	m, err := s.Metrics()
	if err != nil {
		return err
	}
	c.FilterBitsPerKey, c.FilterMemoryBytes, c.Files = m.FilterBitsPerKey, m.FilterMemoryBytes, m.Files
	return nil
}

// Close closes the pooled iterators, then the DB.
func (s *kvStore) Close() error { return errors.Join(s.iters.close(), s.db.Close()) }

package main

import (
	"errors"
	"slices"
	"time"

	"github.com/adaptkv/adaptkv/kv"
	"github.com/adaptkv/adaptkv/sstable"
)

// Store is what kvbench drives: the adaptkv store under one filter policy, or
// the Pebble peer. Implementations must be safe for concurrent use.
type Store interface {
	// Get reads key; found reports whether it exists.
	Get(key []byte) (found bool, err error)
	Set(key, value []byte) error
	Delete(key []byte) error
	// Scan reads up to n records from start on and returns how many it read.
	Scan(start []byte, n int) (int, error)
	// Flush writes the memtable out to tables.
	Flush() error
	// Settle waits until no compaction has run or started for quiet
	// (best effort: at most two minutes).
	Settle(quiet time.Duration) error
	// CompactAll compacts every table down to the last level.
	CompactAll() error
	// Metrics returns the store's cumulative counters.
	Metrics() (Counters, error)
	// FalsePositiveProbes returns Metrics' FalsePositiveProbes from
	// counters that cost a few atomic loads: the adversarial workload reads
	// it around every Get, where Metrics (which visits every table) would
	// leave each timed Get to run on the caches it evicted.
	FalsePositiveProbes() (uint64, error)
	// Footprint fills the gauges: filter memory, bits per key, tables per level.
	Footprint(c *Counters) error
	Close() error
}

// batchWriter is implemented by stores that can apply many sets at once;
// the load phase uses it (YCSB's load is a setup step, not measured).
type batchWriter interface {
	// SetBatch writes every (keys[i], values[i]) in one atomic batch.
	SetBatch(keys, values [][]byte) error
}

// Counters are a store's cumulative counters, named as in docs/ARCHITECTURE.md, "Metrics".
type Counters struct {
	Gets                uint64 // Get calls the store counted
	FilterChecks        uint64 // filter consultations
	FilterNegatives     uint64 // filter said "absent": probes saved
	FalsePositiveProbes uint64 // "maybe" followed by a table lookup that found nothing
	// UnfilteredProbes are table lookups made without asking a filter
	// (Pebble's DB.Get in L6), counted with the "maybe" answers as probes.
	UnfilteredProbes   uint64
	TruePositiveProbes uint64
	DataBlockReads     uint64
	Adaptations        uint64
	FixesDeferred      uint64 // false positives left unfixed (kv.Options.FixRule)
	FixesDropped       uint64 // fixes the background queue did not take (kv.Options.FixInline)
	// FalsePositivesCached are false positives the tables' caches took
	// instead of a fix (kv.FixCached).
	FalsePositivesCached uint64
	Rebuilds             uint64
	RemoteReads          uint64
	RemoteCacheHits      uint64  // remote chunks the remote cache served (kv.Options.RemoteCacheSize)
	FilterBitsPerKey     float64 // in-memory filter bits per table entry
	FilterMemoryBytes    uint64
	Files                [7]int // tables per level
	// MemTableBytes is the memory the store's memtables hold now (a gauge).
	MemTableBytes uint64
	// TableReads and TableReadBytes count the reads of table files (Gets,
	// filter fixes and compaction inputs alike: Pebble reads compaction
	// inputs through the same files) and the bytes they read: device
	// reads with DirectReads.
	TableReads, TableReadBytes uint64
	// BytesFlushed and BytesCompacted are the table bytes flushes and
	// compactions wrote (write amplification is their sum over the first).
	BytesFlushed, BytesCompacted uint64
	// Flushes and Compactions count the memtables flushed (several may go
	// in one flush, in both engines) and the compactions that rewrote
	// tables; WriteStall is how long writers
	// waited for them (kv.Metrics.WriteStallTime, Pebble's
	// WriteStallBegin to WriteStallEnd).
	Flushes, Compactions uint64
	WriteStall           time.Duration
	// WriteStalls counts the stalls (kv.Metrics.WriteStalls, Pebble's
	// WriteStallBegin events).
	WriteStalls uint64
	// WALWait is how long writers waited for the WAL, WALWaits how many
	// times: for WAL switches still finishing (the old WAL's fsync;
	// kv.Metrics.WALSwitchWaitTime and WALSwitchWaits) and for the next
	// WAL's populating (kv.Metrics.WALPrepareWaitTime and
	// WALPrepareWaits); Known.WALWaits.
	WALWait  time.Duration
	WALWaits uint64

	// Known says which counters the store measures.
	Known Known
}

// Known flags the counters a store really measures; the others are reported
// as unavailable (JSON null, "n/a" in the table).
type Known struct {
	// Gets: the store counts Gets itself (else kvbench reports the reads it issued).
	Gets bool
	// ProbeSplit: false and true positive probes are counted separately.
	// Without it only "maybe" answers are known (FalsePositiveProbes holds
	// them), which are all false positives when every read is of an absent key.
	ProbeSplit bool
	// DataBlockReads, Adaptive (adaptations, rebuilds, remote reads).
	DataBlockReads bool
	Adaptive       bool
	// TableReads: reads of table files are counted (TableReads,
	// TableReadBytes).
	TableReads bool
	// WALWaits: writers' waits for a WAL switch are counted apart (Pebble's
	// writers wait for its switch inside the commit, counted nowhere).
	WALWaits bool
}

// Maybes returns the table probes the filters allowed ("maybe" answers)
// plus those made without a filter.
func (c Counters) Maybes() uint64 { return c.FilterChecks - c.FilterNegatives + c.UnfilteredProbes }

// Candidates returns the tables considered: those whose filter was asked
// plus those probed without one.
func (c Counters) Candidates() uint64 { return c.FilterChecks + c.UnfilteredProbes }

// Sub returns the counter deltas c - before (gauges are taken from c).
func (c Counters) Sub(before Counters) Counters {
	d := c
	d.Gets -= before.Gets
	d.FilterChecks -= before.FilterChecks
	d.FilterNegatives -= before.FilterNegatives
	d.FalsePositiveProbes -= before.FalsePositiveProbes
	d.UnfilteredProbes -= before.UnfilteredProbes
	d.TruePositiveProbes -= before.TruePositiveProbes
	d.DataBlockReads -= before.DataBlockReads
	d.Adaptations -= before.Adaptations
	d.FixesDeferred -= before.FixesDeferred
	d.FixesDropped -= before.FixesDropped
	d.FalsePositivesCached -= before.FalsePositivesCached
	d.Rebuilds -= before.Rebuilds
	d.RemoteReads -= before.RemoteReads
	d.RemoteCacheHits -= before.RemoteCacheHits
	d.BytesFlushed -= before.BytesFlushed
	d.BytesCompacted -= before.BytesCompacted
	d.Flushes -= before.Flushes
	d.Compactions -= before.Compactions
	d.WriteStall -= before.WriteStall
	d.WriteStalls -= before.WriteStalls
	d.WALWait -= before.WALWait
	d.WALWaits -= before.WALWaits
	d.TableReads -= before.TableReads
	d.TableReadBytes -= before.TableReadBytes
	return d
}

// StoreConfig is the shape of the data set's LSM, shared by every store of a
// run so that they hold the same tables. Options with the same meaning in
// both engines are set to the same value in each (Pebble's to what the
// adaptkv store runs with); options tied to one engine's own mechanisms
// keep that engine's rule, and the run header lists them (configLines).
type StoreConfig struct {
	Dir            string
	BitsPerKey     int
	MemTableSize   int
	TargetFileSize uint64
	BaseLevelBytes uint64
	L0Trigger      int
	BlockCacheSize int64
	// MaxImmutableMemTables is kv.Options.MaxImmutableMemTables: writers
	// stall once that many full memtables wait and the mutable one is
	// full, so MaxImmutableMemTables+1 memtables in all, which is Pebble's
	// MemTableStopWritesThreshold (its queue counts the mutable memtable).
	MaxImmutableMemTables int
	// L0StopWrites is the L0 read amplification at which writes stall
	// (both engines' L0StopWritesThreshold).
	L0StopWrites int
	// Compactions is the most compactions that run at once
	// (kv.Options.MaxConcurrentCompactions; Pebble's
	// CompactionConcurrencyRange, both ends).
	Compactions int
	// MaxOpenFiles bounds the tables each engine keeps open.
	MaxOpenFiles int
	// KnownNegatives is kv.Options.KnownNegatives (adaptkv stores; 0: the
	// default, negative: off).
	KnownNegatives int
	// TableFormat is kv.Options.TableFormat (adaptkv stores).
	TableFormat sstable.Format
	// PeerMemTableSize is the Pebble peers' memtable size (0:
	// MemTableSize); their level sizes follow BaseLevelBytes either way.
	PeerMemTableSize int
	// DirectReads reads every store's tables around the page cache
	// (kv.Options.DirectReads; the Pebble peers through a directio.FS).
	DirectReads bool
	// FixRule is kv.Options.FixRule (adaptkv stores).
	FixRule kv.FixRule
	// RecordAbsent is kv.Options.RecordAbsent (adaptkv stores).
	RecordAbsent kv.RecordRule
	// FixInline is kv.Options.FixInline (adaptkv stores).
	FixInline bool
	// RemoteCacheSize is kv.Options.RemoteCacheSize (adaptkv stores).
	RemoteCacheSize int64
	// DisableWALMapping and WALBufferNoSync are kv.Options'
	// (adaptkv stores): how their WAL takes NoSync writes.
	DisableWALMapping, WALBufferNoSync bool
	// SeekPrefixReads makes the adaptkv stores read points with
	// Iterator.SeekPrefixGE on a reused iterator instead of DB.Get.
	SeekPrefixReads bool
	// SyncWrites makes Set fsync the WAL before it returns (kv.Sync,
	// pebble.Sync); without it writes are NoSync.
	SyncWrites bool
}

// ErrUnknownStore is returned for a policy name no store implements.
var ErrUnknownStore = errors.New("kvbench: unknown policy")

// extraStores are stores registered by tests (an in-memory fake).
var extraStores = map[string]func(StoreConfig) (Store, error){}

// defaultKVPolicies are the adaptkv policies of the default run: the static
// baselines (Pebble's bloom at -bits, the prefix filter), the stacked
// filter, and the adaptive taf, exaf and aprefix. The others (none, fuse, rsqf,
// utaf) run with -policies: none probes every table on every Get, and the
// rest say little the default set does not.
var defaultKVPolicies = []string{"bloom", "prefix", "stacked", "taf", "exaf", "aprefix"}

// defaultPolicies are the default adaptkv policies plus the Pebble peers.
func defaultPolicies() []string {
	return append(slices.Clone(defaultKVPolicies), pebblePeers...)
}

// allPolicies lists every store name this build can open.
func allPolicies() []string {
	out := append(kvPolicies(), pebblePeers...)
	for name := range extraStores {
		out = append(out, name)
	}
	return out
}

func openStore(name string, cfg StoreConfig) (Store, error) {
	switch name {
	case pebblePeerName:
		return openPebble(cfg, false)
	case pebbleL6PeerName:
		return openPebble(cfg, true)
	}
	if f, ok := extraStores[name]; ok {
		return f(cfg)
	}
	return openKV(name, cfg)
}

// Settle's quiet periods: before a workload (settleQuiet), and after each
// flush of the load (stepQuiet: a flush's compactions start as it
// installs, long before that).
const (
	settleQuiet = time.Second
	stepQuiet   = 50 * time.Millisecond
)

// settleBy waits until a store's compaction count has not moved for quiet
// (polled 20 times) while it reports itself idle, or 120 seconds passed.
func settleBy(quiet time.Duration, poll func() (compactions uint64, idle bool)) error {
	last, _ := poll()
	still := 0
	for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline) && still < 20; {
		time.Sleep(quiet / 20)
		c, idle := poll()
		if c != last || !idle {
			last, still = c, 0
		} else {
			still++
		}
	}
	return nil
}

package kv

import (
	"fmt"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// DefaultFilterPolicy is the filter policy used when Options.FilterPolicy is
// empty and Options.Filter is nil: the adaptive prefix filter, the policy
// with the most Gets per second of the adaptive ones in memory and on cold
// storage (README, "Filter policies").
const DefaultFilterPolicy = "aprefix"

// Options configure a DB. The zero value (or nil) gives the defaults below.
type Options struct {
	// FilterPolicy names the per-table filter in the filterpolicy registry
	// (filterpolicy.Names()). "" means DefaultFilterPolicy ("aprefix"). An
	// unknown name makes Open fail with an error wrapping ErrUnknownPolicy.
	FilterPolicy string
	// Filter, when non-nil, overrides FilterPolicy (e.g.
	// filterpolicy.NewBloom(12)). A type of its own works if its
	// Kind is the registered kind its Name says (a wrapper of a
	// filterpolicy policy, say); otherwise Open rejects it with an error
	// wrapping ErrInvalidOptions.
	Filter filterpolicy.Policy
	// TableFormat is the block layout new tables are written in:
	// sstable.FormatColumnar (the default: a lookup of a present key costs
	// less) or sstable.FormatRow (Pebble's default layout: flushes and
	// compactions cost less, writes stall less under sustained load, and
	// a short scan's seek costs less).
	// Tables of either layout are read; a store may hold both (figures in
	// docs/BENCHMARKS.md, "Table layout"). Flushes write row blocks
	// whatever it says, unless FlushInTableFormat.
	TableFormat sstable.Format
	// FlushInTableFormat makes flushes (and recovery) write their L0
	// tables in TableFormat too. By default they write row blocks: an L0
	// table lives until the next L0 compaction rewrites it in TableFormat,
	// and row blocks cost a flush less CPU and, where values repeat, fewer
	// bytes (snappy finds repeats across row entries better than in a
	// columnar block), so flushes keep up under sustained writes; what it
	// costs is a slower lookup of a present key in L0 tables.
	FlushInTableFormat bool
	// BlockCacheSize is the size in bytes of the block cache shared by all
	// tables. Default 8 MiB.
	BlockCacheSize int64
	// RemoteCacheSize is the part of BlockCacheSize that keeps the chunks
	// of the tables' remote representations that adaptive filters' fixes
	// read (filterpolicy.RemoteCache), so a fix whose chunk an earlier fix
	// read costs no file read (the aprefix bin index, which every fix reads
	// first, stays in it). It is taken from the block cache, not added,
	// as the cache fills (256 KiB at a time, Metrics.RemoteCacheBytes):
	// the store's memory stays BlockCacheSize, and a store whose fixes are
	// few keeps nearly all of it for blocks. Used only when the filter
	// policy adapts. Default BlockCacheSize/16; negative: no such cache.
	RemoteCacheSize int64
	// MemTableSize is the size in bytes at which the mutable memtable is
	// switched and queued for flushing (its entries' keys and values and
	// about 37 bytes an entry). Default 4 MiB, at most MaxMemTableSize.
	MemTableSize int
	// L0CompactionThreshold is the L0 read amplification (the most L0
	// tables one key is in) that scores L0 at 2, as Pebble's option of the
	// same name: an L0 compaction starts once a key is in half as many L0
	// tables (2 with the default). Default 4.
	L0CompactionThreshold int
	// L0CompactionFileThreshold is the number of L0 tables that starts an
	// L0 compaction whatever their overlap, so that tables of sequential
	// keys (each read checks one) do not pile up. Default
	// 4*L0CompactionThreshold (Pebble's 500 suits its incremental L0
	// sublevel index; here each version rebuilds L0's sublevels, at a cost
	// quadratic in its tables).
	L0CompactionFileThreshold int
	// L0StopWritesThreshold is the L0 read amplification at which flushes
	// wait for compactions (so writers stall once MaxImmutableMemTables
	// fill up), bounding the L0 tables a read may check; flushes also wait
	// at 2*L0CompactionFileThreshold tables. Default max(12,
	// 3*L0CompactionThreshold).
	L0StopWritesThreshold int
	// LevelSizeRatio is the size ratio between adjacent levels. Default 10.
	LevelSizeRatio float64
	// TargetFileSize is the size at which compaction outputs are split:
	// between half and twice it where the level below the output has
	// tables whose starts the cut can align with (compaction.RunOptions).
	// Default 2 MiB.
	TargetFileSize uint64
	// MaxOpenFiles bounds the number of tables kept open by the table cache
	// (tables in use by a read may exceed it briefly). Default 500.
	MaxOpenFiles int
	// ReadOnly opens the DB without writing: no WAL, flush or compaction;
	// writes, Flush and Compact return ErrReadOnly. The WAL is replayed into
	// memory. Adaptive filter state files are loaded (adaptations of earlier
	// read-write sessions hold) but never written: filters adapt further in
	// memory only (those adaptations last while the table stays open in
	// the table cache, see MaxOpenFiles), and the files stay byte-for-byte
	// unchanged.
	ReadOnly bool
	// EventListener, if set, is called on flushes, compactions, write
	// stalls, background errors and table files created and deleted
	// (see EventListener).
	EventListener *EventListener
	// Logger, if set and EventListener is not, receives those events
	// (MakeLoggingEventListener). nil: the store logs nothing.
	Logger Logger
	// FS is the file system; nil means vfs.Default. Tests use vfs.NewMem,
	// vfs.NewCrashableMem or errorfs.
	FS vfs.FS
	// WALBufferNoSync makes NoSync writes return once their WAL record is in
	// the store's WAL buffer, as Pebble's NoSync writes do, instead of once
	// it has reached the OS (the default). A background goroutine writes the
	// buffer to the OS right behind the writers, so NoSync writes make no
	// system call of their own; the price is that NoSync writes acknowledged
	// in the moment before the process dies may be lost (a machine crash
	// loses unsynced writes either way). Sync writes, Flush and Close write
	// and fsync everything buffered before them, as always.
	WALBufferNoSync bool
	// DisableWALMapping writes the WAL with one write(2) per commit group
	// even where it could be mapped. By default, on Linux and the OS file
	// system (FS nil or vfs.Default) and without WALBufferNoSync, the WAL
	// file is preallocated and written through a shared memory mapping: a
	// NoSync write copies its record into the file's page cache, which is
	// reaching the OS without a system call, and a Sync write's fdatasync
	// writes the mapped pages back. Disable it on file systems where
	// shared writable mappings are slow or unsupported (some network file
	// systems); the store falls back by itself where the preallocation or
	// the mapping fails.
	DisableWALMapping bool
	// MaxImmutableMemTables is the number of full memtables that may wait for
	// a flush before writers stall. Default 4. The memtables' memory, up to
	// MaxImmutableMemTables+1 memtables, is kept for the next memtables
	// once flushed (as a block cache keeps its blocks), so that writes do
	// not pay for fresh memory; a writable store also holds a memtable's
	// worth ahead from Open on (at most 64 MiB), faulted in off the
	// writers' path.
	MaxImmutableMemTables int
	// MergeFlushL0Depth is the L0 read amplification (the most L0 tables
	// one key is in) at which a full memtable that would be flushed alone
	// waits for the next one, and the two are flushed together into one
	// layer of L0 tables (RocksDB's min_write_buffer_number_to_merge of 2,
	// here only while L0 is that deep): half the flushes, so L0 deepens
	// half as fast while its compactions are due, and less compaction
	// work; the price is one more memtable in memory, searched by reads,
	// while L0 is deep (a held memtable is flushed alone once L0 is
	// shallower again and writes pause for 100 ms). It needs MaxImmutableMemTables >= 2, so
	// that writers never stall on the memtable held back; a Flush call is
	// never held. Memtables queued behind a flush are flushed together
	// too, whatever the depth (as Pebble's are). Default
	// L0CompactionThreshold/2 (at least 1), the depth at which L0
	// compactions start; negative: every memtable is flushed on its own.
	// See docs/ARCHITECTURE.md, "Merged flushes".
	MergeFlushL0Depth int
	// FlushSplitBytes, when positive, makes a flush cut its output into
	// several L0 tables at the boundaries of the base level's tables, each
	// at least this big, so that L0 compacts into the base level one key
	// range at a time, alongside compactions of other ranges (Pebble's
	// option of the same name; its splits follow its L0 sublevels). By
	// default (zero, or negative) a flush writes one table: small slices
	// make every L0 compaction rewrite whole base-level tables for a
	// fraction of their bytes, more write amplification for fewer filter
	// checks per read (figures in docs/BENCHMARKS.md, "Flushes: one
	// table, or split at the base level").
	FlushSplitBytes int64
	// MaxConcurrentCompactions bounds the background compactions that run
	// at once. A second one starts only when the tree owes work that a
	// running one does not cover (compaction.Pick finds a level over its
	// target whose tables are not busy), e.g. L0 into the base level while
	// the base level compacts into the next. Default 2.
	MaxConcurrentCompactions int
	// FixRule says which false positives an adaptive filter fixes (a fix
	// reads the table's remote section: on cold storage a device read).
	// FixDefault (zero) is FixCached. FixEvery: every one, the adaptive
	// filters' guarantee that a repeated key is a false positive once per
	// table. FixRepeated: only a key the known-negative record holds (see
	// KnownNegatives; a false positive of a key it does not hold takes a
	// slot in it), so a key asked once costs its probe and no remote read,
	// and a repeated key is fixed at its second sight (a later one if the
	// record dropped it in between). FixAuto chooses between the two by what
	// the absent Gets do: while most absent keys repeat (fewer than half of
	// the last 4096 or so recorded were new to the record) it fixes every
	// false positive; while most are new, only those of keys asked before.
	// It fixes no more than FixEvery and wastes at most about twice
	// FixEvery's probes on a key (fixed at its second sight), the ski-rental
	// bound. On cold storage with absent keys that do not repeat it spares
	// the fixes' device reads; where they repeat, its wasted probes cost
	// more than the fixes it spares (figures in docs/BENCHMARKS.md).
	// FixCached fixes the false positives of keys the record holds and puts
	// the others in a cache of false positives kept per table (about one key
	// per 512 table keys, the oldest of a set of 8 leaving first; its memory
	// counts as filter memory), so a key that comes back costs no probe
	// while the cache holds it. Without DirectReads the key's return (the
	// cache answering for it) fixes the filter and frees the entry. Either
	// way a false positive takes its key a slot in the record (as
	// FixRepeated does; while nearly all absent keys are new, a bit of the
	// record's doorkeeper, and the slot at its second sight), so a key
	// that comes back after the cache let it go is fixed too: a key is
	// fixed at its second sight in a table, and a key asked once costs an
	// entry, no fix. With DirectReads, where each fix is a device read
	// (two for aprefix: a chunk and its bin index's), the cache keeps
	// answering for the key until it lets it go, its return to the cache
	// takes it its slot in the record, and the key is fixed when it comes
	// back after that; a false positive is fixed only if the record holds
	// its key in a slot (a doorkeeper bit, which another key may have set,
	// takes the slot, not the fix), so a key asked once costs no device
	// read beyond its probe (figures in docs/BENCHMARKS.md, "The fix rule
	// with DirectReads", "With DirectReads, fixes only for keys the record
	// holds" and "The fix rule in memory"). With the record off every rule
	// is FixEvery.
	FixRule FixRule
	// FixInline makes the Get that meets a false positive fix it before
	// it returns (the remote read and the adaptation on the Get's time).
	// By default a Get hands the fix to a background goroutine through a
	// bounded queue and returns at once: no Get waits for a fix's read (a
	// device read on cold storage); the fix lands microseconds later, or
	// one device read later, and a key asked again before that costs its
	// probe again. A fix that finds the queue full is dropped
	// (Metrics.FixesDropped) and made when the key comes back.
	FixInline bool
	// DirectReads reads tables around the operating system's page cache
	// (O_DIRECT, RocksDB's use_direct_reads): Gets, iterators, filter
	// fixes and compaction inputs read the device, and the block cache is
	// the only cache, as on storage colder than memory. Writes are not
	// affected. It needs Linux and the operating system's file system (FS
	// nil or vfs.Default) on a file system with O_DIRECT; elsewhere Open
	// fails with an error wrapping ErrInvalidOptions. Metrics.TableReads
	// counts the reads either way.
	DirectReads bool
	// KnownNegatives bounds the absent keys the store remembers (the keys
	// Get most often found absent after consulting a table, kept by a
	// heavy-hitter sketch with aging, about 44 bytes each with 16-byte
	// keys). Every table a flush or compaction writes is pre-adapted
	// against those in its key range, so adaptive filters do not forget
	// them; the record is saved on Close and loaded by Open (a missing or
	// damaged file means an empty record, see DB.KnownNegativesError).
	// Only a policy that adapts or builds around known negatives (stacked)
	// uses the record; with any other the store keeps none.
	// Default DefaultKnownNegatives (65536, about 2.8 MiB); negative: off.
	KnownNegatives int
	// RecordAbsent says whether absent Gets are counted in the
	// known-negative record (see RecordRule). Recording adds a sketch
	// update to an absent Get and saves the wasted probes of keys asked
	// again after the tables that fixed them were rewritten (figures in
	// docs/BENCHMARKS.md, "Which absent Gets feed the known-negative
	// record" and "Recording while tables are rewritten"). RecordAuto (the
	// default) records every absent Get with FixRepeated or FixAuto (rules
	// that take their sights from the record) and for a policy that builds
	// around known negatives (stacked); otherwise it records as
	// RecordWhileRewriting, only while flushes and compactions write
	// tables, the only time the record carries anything into new filters
	// (the keys of false positives enter it as they happen: FixRule).
	RecordAbsent RecordRule

	// intraL0Ratio is compaction.Options.IntraL0Ratio: 0 takes
	// defaultIntraL0Ratio, negative turns intra-L0 compactions off (for
	// tests).
	intraL0Ratio float64
	// flushPartBytes is the memtable bytes of a key range a large flush
	// writes at once (see flushRanges); 0 takes defaultFlushPartBytes.
	// Tests lower it.
	flushPartBytes int64
	// knownNegSeed, if not 0, makes the known-negative record
	// deterministic (knownneg.Sketch.SetSeed), for tests.
	knownNegSeed uint64
}

// FixRule is Options.FixRule.
type FixRule uint8

const (
	// FixDefault is FixCached (the default; Open writes the rule in the
	// OPTIONS file).
	FixDefault FixRule = iota
	// FixEvery fixes every false positive.
	FixEvery
	// FixRepeated fixes the false positives of keys the known-negative
	// record holds.
	FixRepeated
	// FixAuto fixes every false positive while absent keys repeat, and
	// only those of keys asked before while they do not.
	FixAuto
	// FixCached caches the keys of false positives in their tables and
	// fixes the false positives of keys the known-negative record holds,
	// and without DirectReads those of keys that come back to the cache.
	FixCached
)

// RecordRule is Options.RecordAbsent.
type RecordRule uint8

const (
	// RecordAuto records every absent Get where the fix rule or the
	// policy reads the record's counts, and otherwise as
	// RecordWhileRewriting (see Options.RecordAbsent); the default.
	RecordAuto RecordRule = iota
	// RecordAlways counts every absent Get that consulted a table
	// (sampled: knownneg.DefaultSampling).
	RecordAlways
	// RecordNever counts none: the record holds what Open loaded and the
	// false positives FixRepeated, FixAuto and FixCached put in it.
	RecordNever
	// RecordWhileRewriting counts absent Gets (sampled, as RecordAlways)
	// only while tables are rewritten: from the start of each flush or
	// compaction, and from when the memtable passes half its size (its
	// flush is near), until the record has counted about as many absent
	// Gets as it holds keys (Options.KnownNegatives). A store that is only
	// read records nothing; one that is written records about as much as
	// with RecordAlways, so the tables flushes and compactions write are
	// built with the absent keys asked meanwhile. Its worst case is that
	// many sketch updates per flush, compaction and memtable.
	RecordWhileRewriting
)

// defaultIntraL0Ratio: L0 tables holding less than a quarter of the bytes
// of the base-level tables under them are merged within L0 instead of into
// the base level, once L0 compactions have fallen behind
// (docs/ARCHITECTURE.md, "Compactions").
const defaultIntraL0Ratio = 4

// WriteOptions control one write.
type WriteOptions struct {
	// Sync makes the write durable (the WAL is fsynced) before it returns.
	Sync bool
}

var (
	// Sync is the WriteOptions of a durable write (the default for nil).
	Sync = &WriteOptions{Sync: true}
	// NoSync is the WriteOptions of a write that returns once it reached the
	// operating system (it survives a process crash, not a machine crash),
	// or, with Options.WALBufferNoSync, once it is in the WAL buffer.
	NoSync = &WriteOptions{Sync: false}
)

func (o *WriteOptions) sync() bool { return o == nil || o.Sync }

// IterOptions bound an iterator: it sees user keys in [LowerBound,
// UpperBound). Nil bounds are open. NewIter copies them; the iterator
// opens no table of a level that lies outside them.
type IterOptions struct {
	// LowerBound is the smallest key the iterator sees (nil: none).
	LowerBound []byte
	// UpperBound is the key past the last one it sees (nil: none).
	UpperBound []byte
}

// Validate reports the first invalid option, as an error wrapping
// ErrInvalidOptions: a negative size, count or threshold, a TableFormat
// or Filter the store cannot write, or an L0StopWritesThreshold below
// L0CompactionThreshold (each with its default where it is zero). Zero
// values are valid: they mean the defaults. Open validates its options.
func (o *Options) Validate() error {
	var r Options
	if o != nil {
		r = *o
	}
	switch {
	case r.BlockCacheSize < 0:
		return fmt.Errorf("%w: BlockCacheSize %d < 0", ErrInvalidOptions, r.BlockCacheSize)
	case r.MemTableSize < 0:
		return fmt.Errorf("%w: MemTableSize %d < 0", ErrInvalidOptions, r.MemTableSize)
	case r.MemTableSize > MaxMemTableSize:
		return fmt.Errorf("%w: MemTableSize %d > MaxMemTableSize %d", ErrInvalidOptions, r.MemTableSize, MaxMemTableSize)
	case r.L0CompactionThreshold < 0:
		return fmt.Errorf("%w: L0CompactionThreshold %d < 0", ErrInvalidOptions, r.L0CompactionThreshold)
	case r.LevelSizeRatio < 0 || (r.LevelSizeRatio > 0 && r.LevelSizeRatio < 2):
		return fmt.Errorf("%w: LevelSizeRatio %g must be >= 2", ErrInvalidOptions, r.LevelSizeRatio)
	case r.L0CompactionFileThreshold < 0:
		return fmt.Errorf("%w: L0CompactionFileThreshold %d < 0", ErrInvalidOptions, r.L0CompactionFileThreshold)
	case r.MaxConcurrentCompactions < 0:
		return fmt.Errorf("%w: MaxConcurrentCompactions %d < 0", ErrInvalidOptions, r.MaxConcurrentCompactions)
	case r.L0StopWritesThreshold < 0:
		return fmt.Errorf("%w: L0StopWritesThreshold %d < 0", ErrInvalidOptions, r.L0StopWritesThreshold)
	case r.MaxOpenFiles < 0:
		return fmt.Errorf("%w: MaxOpenFiles %d < 0", ErrInvalidOptions, r.MaxOpenFiles)
	case r.MaxImmutableMemTables < 0:
		return fmt.Errorf("%w: MaxImmutableMemTables %d < 0", ErrInvalidOptions, r.MaxImmutableMemTables)
	case r.KnownNegatives > MaxKnownNegatives:
		return fmt.Errorf("%w: KnownNegatives %d > %d", ErrInvalidOptions, r.KnownNegatives, MaxKnownNegatives)
	case !r.TableFormat.Valid():
		return fmt.Errorf("%w: TableFormat %v", ErrInvalidOptions, r.TableFormat)
	case r.FixRule > FixCached:
		return fmt.Errorf("%w: FixRule %d", ErrInvalidOptions, r.FixRule)
	case r.RecordAbsent > RecordWhileRewriting:
		return fmt.Errorf("%w: RecordAbsent %d", ErrInvalidOptions, r.RecordAbsent)
	case r.DirectReads && r.FS != nil && r.FS != vfs.Default:
		return fmt.Errorf("%w: DirectReads needs the operating system's file system (FS nil or vfs.Default)", ErrInvalidOptions)
	}
	// The check sstable.Create makes when it writes a table with the
	// policy: made here, a policy that cannot write tables fails Open
	// instead of the first flush (with a sticky error).
	if r.Filter != nil && r.Filter.Name() != "none" {
		if _, err := filterpolicy.ForTable(r.Filter, 1, nil); err != nil {
			return base.InvalidOptions("Filter", err)
		}
	}
	r.EnsureDefaults()
	if r.RemoteCacheSize > r.BlockCacheSize/2 {
		return fmt.Errorf("%w: RemoteCacheSize %d > BlockCacheSize/2 (%d)", ErrInvalidOptions, r.RemoteCacheSize, r.BlockCacheSize/2)
	}
	if r.L0StopWritesThreshold < r.L0CompactionThreshold {
		return fmt.Errorf("%w: L0StopWritesThreshold %d < L0CompactionThreshold %d", ErrInvalidOptions, r.L0StopWritesThreshold, r.L0CompactionThreshold)
	}
	return nil
}

// EnsureDefaults sets every option left at zero to its default (the
// defaults each option's doc states; some follow other options, e.g.
// L0CompactionFileThreshold is 4*L0CompactionThreshold), so a caller can
// see what Open will run with. It does not validate: see Validate.
func (o *Options) EnsureDefaults() {
	if o.FilterPolicy == "" {
		o.FilterPolicy = DefaultFilterPolicy
	}
	if o.BlockCacheSize == 0 {
		o.BlockCacheSize = 8 << 20
	}
	if o.RemoteCacheSize == 0 {
		o.RemoteCacheSize = o.BlockCacheSize / 16
	}
	if o.FixRule == FixDefault {
		o.FixRule = FixCached
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = 4 << 20
	}
	if o.L0CompactionThreshold == 0 {
		o.L0CompactionThreshold = 4
	}
	if o.L0CompactionFileThreshold == 0 {
		o.L0CompactionFileThreshold = 4 * o.L0CompactionThreshold
	}
	if o.L0StopWritesThreshold == 0 {
		o.L0StopWritesThreshold = max(12, 3*o.L0CompactionThreshold)
	}
	if o.LevelSizeRatio == 0 {
		o.LevelSizeRatio = 10
	}
	if o.TargetFileSize == 0 {
		o.TargetFileSize = 2 << 20
	}
	if o.MaxOpenFiles == 0 {
		o.MaxOpenFiles = 500
	}
	if o.FlushSplitBytes == 0 {
		o.FlushSplitBytes = -1
	}
	if o.MaxConcurrentCompactions == 0 {
		o.MaxConcurrentCompactions = 2
	}
	if o.intraL0Ratio == 0 {
		o.intraL0Ratio = defaultIntraL0Ratio
	}
	if o.MaxImmutableMemTables == 0 {
		o.MaxImmutableMemTables = 4
	}
	if o.MergeFlushL0Depth == 0 {
		o.MergeFlushL0Depth = max(1, o.L0CompactionThreshold/2)
	}
	if o.KnownNegatives == 0 {
		o.KnownNegatives = DefaultKnownNegatives
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
}

// withDefaults returns a copy of o with defaults filled in, and an error
// wrapping ErrInvalidOptions for invalid ones (Validate).
func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if err := r.Validate(); err != nil {
		return r, err
	}
	r.EnsureDefaults()
	return r, nil
}

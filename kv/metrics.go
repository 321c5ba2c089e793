package kv

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/internal/manifest"
)

// LevelMetrics describe one level of the tree.
type LevelMetrics struct {
	// NumFiles is the number of tables in the level.
	NumFiles int
	// Size is the bytes of those tables' files.
	Size uint64
	// Sublevels is the level's read amplification: for L0 the most L0
	// tables whose key ranges hold one key (manifest.L0Depth, the depth
	// Pebble's L0 score counts; Pebble's own Sublevels counts its L0
	// sublevels, which can be more), for L1..L6 1 when the level holds
	// tables and 0 when it is empty.
	Sublevels int
}

// Metrics are the store's counters (names as in docs/ARCHITECTURE.md, "Metrics"). The table
// counters are totals over every table the store has opened since Open,
// including tables closed by the table cache or deleted by compactions.
type Metrics struct {
	// Gets counts DB.Get and Snapshot.Get calls.
	Gets uint64
	// FilterChecks counts filter queries (one per table consulted).
	FilterChecks uint64
	// FilterNegatives counts filter "absent" answers (table probes saved).
	FilterNegatives uint64
	// FalsePositiveProbes counts table lookups after a "maybe" that found
	// no version of the key (wasted probes).
	FalsePositiveProbes uint64
	// TruePositiveProbes counts table lookups that found a version.
	TruePositiveProbes uint64
	// DataBlockReads counts blocks read from table files (block cache
	// misses) by Gets and iterators; compactions read through private
	// readers and are not counted.
	DataBlockReads uint64
	// BlockCacheSize is the bytes the block cache holds now;
	// BlockCacheHits and BlockCacheMisses count its lookups since Open (the
	// blocks of Gets and iterators: compactions read around it).
	BlockCacheSize                   int64
	BlockCacheHits, BlockCacheMisses int64
	// Adaptations counts false positives fixed by adaptive filters.
	Adaptations uint64
	// Rebuilds counts adaptive filter block rebuilds.
	Rebuilds uint64
	// RemoteReads counts file reads of the tables' remote representations
	// (fixes' reads the remote cache served are not counted).
	RemoteReads uint64
	// RemoteCacheHits and RemoteCacheMisses count the remote chunks fixes
	// looked up in the remote cache (Options.RemoteCacheSize).
	RemoteCacheHits, RemoteCacheMisses uint64
	// RemoteCacheBytes is the block cache memory the remote cache holds:
	// it takes it as it fills, in steps of 256 KiB, up to
	// Options.RemoteCacheSize.
	RemoteCacheBytes int64
	// PreAdaptations counts false positives fixed among the known
	// negatives as a flush or compaction built a new table's filter, from
	// the hash words in memory (no read of the table; not counted in
	// Adaptations).
	PreAdaptations uint64
	// PreAdaptChecks counts the known negatives queried in new tables.
	PreAdaptChecks uint64
	// FixesDeferred counts false positives left unfixed by FixRule (the
	// key was not known to come back).
	FixesDeferred uint64
	// FixesDropped counts false positives whose fix found the background
	// queue full (see Options.FixInline) and was dropped.
	FixesDropped uint64
	// FalsePositivesCached counts false positives a table's cache of false
	// positives took instead of a fix (FixCached), and CachedNegatives
	// the Gets' table lookups that cache answered absent without a probe
	// (also counted in FilterNegatives).
	FalsePositivesCached, CachedNegatives uint64
	// KnownNegatives is the number of absent keys the store remembers
	// (see Options.KnownNegatives); KnownNegativeBytes estimates their
	// memory.
	KnownNegatives     int
	KnownNegativeBytes int64
	// FilterBitsPerKey is the in-memory filter size per key over the live
	// tables whose filter has been loaded since Open: new tables when they
	// are written, existing ones by a background pass after Open (up to
	// MaxOpenFiles) or on first use.
	FilterBitsPerKey float64
	// FilterMemoryBytes is the in-memory filter size of the live tables.
	FilterMemoryBytes uint64
	// MemTables is the number of memtables held for writes and flushes:
	// the mutable one and the full ones queued or being flushed.
	// MemTableBytes is the memory their arenas hold (Pebble's
	// Metrics.MemTable Count and Size); a flushed memtable that an open
	// iterator still reads is not counted.
	MemTables     int
	MemTableBytes uint64
	// MemTableKeptBytes is the memory of flushed memtables kept for the
	// next ones, up to MaxImmutableMemTables+1 memtables (see
	// Options.MaxImmutableMemTables).
	MemTableKeptBytes uint64
	// TableReads counts the reads of table files for Gets, iterators and
	// filter fixes (what the block cache missed), TableReadBytes the bytes
	// they read: device reads with Options.DirectReads (the aligned spans
	// around what was asked), page-cache reads otherwise. Compaction
	// inputs are counted apart, in CompactionReads and
	// CompactionReadBytes.
	TableReads, TableReadBytes           uint64
	CompactionReads, CompactionReadBytes uint64
	// Flushes counts memtables flushed to L0; MergedFlushes the flushes
	// that wrote several memtables together (Options.MergeFlushL0Depth).
	Flushes, MergedFlushes uint64
	// Compactions counts compactions run that rewrote tables.
	Compactions uint64
	// TableMoves counts compactions that moved a table to the next level
	// without rewriting it: one table overlapping nothing there.
	TableMoves uint64
	// IntraL0Compactions counts the compactions (of Compactions) that
	// merged L0 tables into one L0 table (compaction.Plan.IsIntraL0).
	IntraL0Compactions uint64
	// BytesFlushed is the table bytes flushes wrote; BytesCompactedIn and
	// BytesCompacted are the table bytes compactions read and wrote.
	BytesFlushed, BytesCompactedIn, BytesCompacted uint64
	// FlushTime and CompactionTime are the wall time flushes and
	// compactions have taken (summed over concurrent compactions);
	// CompactionsRunning is the number running now.
	FlushTime, CompactionTime time.Duration
	CompactionsRunning        int
	// WriteStalls counts the times writers waited for a flush because
	// MaxImmutableMemTables memtables were queued (flushes themselves wait
	// while L0 is at L0StopWritesThreshold), and WriteStallTime is how long
	// they waited in all (Pebble's WriteStallCount and WriteStallDuration).
	WriteStalls    uint64
	WriteStallTime time.Duration
	// WALSwitches counts the memtable switches that gave the store a new
	// WAL; WALSwitchSyncTime is the time their second halves took (the
	// directory fsynced, the old WAL cut, fsynced and closed), each paid
	// by the writer whose write filled the memtable, once it has handed
	// the commit on (docs/ARCHITECTURE.md, "Group commit and the WAL").
	// WALSwitchWaits counts the times a Sync write's fsync waited for
	// second halves still running (for the directory fsync alone where
	// the old WAL was durable already; a NoSync write never waits for
	// one), and WALSwitchWaitTime is how long they waited in all.
	WALSwitches                          uint64
	WALSwitchWaits                       uint64
	WALSwitchSyncTime, WALSwitchWaitTime time.Duration
	// WALPrepareWaits counts the switches whose next WAL, prepared ahead,
	// was not yet populated (its pages faulted in) when the memtable
	// filled, so that the writer whose write filled it waited for the
	// populating; WALPrepareWaitTime is how long they waited in all.
	WALPrepareWaits    uint64
	WALPrepareWaitTime time.Duration
	// CompactionDebt estimates the bytes compactions must still rewrite to
	// bring every level within its target (compaction.Debt).
	CompactionDebt uint64
	// BaseLevel is the level L0 compacts into (compaction.BaseLevel).
	BaseLevel int
	// Levels describe L0..L6.
	Levels [manifest.NumLevels]LevelMetrics
}

// WriteAmplification is the table bytes written (flushes and compactions)
// per byte flushed: 1 with no compaction; the WAL is not counted.
func (m Metrics) WriteAmplification() float64 {
	if m.BytesFlushed == 0 {
		return 0
	}
	return float64(m.BytesFlushed+m.BytesCompacted) / float64(m.BytesFlushed)
}

// ProbesPerGet is the read amplification: table probes (false and true
// positives) per Get.
func (m Metrics) ProbesPerGet() float64 {
	if m.Gets == 0 {
		return 0
	}
	return float64(m.FalsePositiveProbes+m.TruePositiveProbes) / float64(m.Gets)
}

// ReadAmp is the tree's read amplification: the most tables a point read
// may check, the sum of the levels' Sublevels (Pebble's Metrics.ReadAmp,
// with L0 counted by its depth).
func (m Metrics) ReadAmp() int {
	n := 0
	for _, l := range m.Levels {
		n += l.Sublevels
	}
	return n
}

// Metrics returns the current counters.
func (db *DB) Metrics() Metrics {
	v := db.currentVersion()
	defer v.unref()
	var m Metrics
	var live []uint64
	for lvl, ts := range v.Levels {
		m.Levels[lvl].NumFiles = len(ts)
		switch {
		case lvl == 0:
			m.Levels[lvl].Sublevels = manifest.L0Depth(ts, nil)
		case len(ts) > 0:
			m.Levels[lvl].Sublevels = 1
		}
		for _, t := range ts {
			m.Levels[lvl].Size += t.Size
			live = append(live, t.FileNum)
		}
	}
	sum, fBytes, fKeys := db.tc.metrics(live)
	m.Gets = uint64(db.gets.Load())
	m.BytesFlushed = db.flushedBytes.Load()
	m.BytesCompactedIn, m.BytesCompacted = db.compactedReadBytes.Load(), db.compactedBytes.Load()
	m.CompactionDebt = compaction.Debt(v.Levels, db.compactionOptions())
	m.BaseLevel, _ = compaction.BaseLevel(v.Levels, db.compactionOptions())
	m.FilterChecks = sum.FilterChecks
	m.FilterNegatives = sum.FilterNegatives
	m.FalsePositiveProbes = sum.FalsePositiveProbes
	m.TruePositiveProbes = sum.TruePositiveProbes
	m.DataBlockReads = sum.DataBlockReads
	cm := db.tc.cache.Metrics()
	m.BlockCacheSize, m.BlockCacheHits, m.BlockCacheMisses = cm.Size, cm.Hits, cm.Misses
	m.Adaptations = sum.Adaptations
	m.Rebuilds = sum.Rebuilds
	m.RemoteReads = sum.RemoteReads
	if rc := db.tc.remote; rc != nil {
		m.RemoteCacheHits, m.RemoteCacheMisses = rc.Hits(), rc.Misses()
		m.RemoteCacheBytes = rc.Reserved()
	}
	m.PreAdaptations = sum.PreAdaptations + db.preAdaptations.Load()
	m.PreAdaptChecks = sum.PreAdaptChecks + db.preAdaptChecks.Load()
	m.FixesDeferred = sum.FixesDeferred
	m.FixesDropped = sum.FixesDropped
	m.FalsePositivesCached, m.CachedNegatives = sum.FalsePositivesCached, sum.CachedNegatives
	if db.kn != nil {
		m.KnownNegatives = db.kn.Len()
		m.KnownNegativeBytes = db.kn.SizeBytes()
	}
	m.FilterMemoryBytes = fBytes
	if fKeys > 0 {
		m.FilterBitsPerKey = float64(fBytes) * 8 / float64(fKeys)
	}
	db.mu.Lock()
	if mt := db.mu.mem.mt; mt != nil {
		m.MemTables, m.MemTableBytes = 1, uint64(mt.ArenaBytes())
	}
	for _, e := range db.mu.imm {
		m.MemTables++
		m.MemTableBytes += uint64(e.mt.ArenaBytes())
	}
	db.mu.Unlock()
	m.MemTableKeptBytes = uint64(db.memRecycler.Held())
	st := db.readFS.Stats()
	m.TableReads, m.TableReadBytes = st.Reads.Load(), st.Bytes.Load()
	st = db.compactFS.Stats()
	m.CompactionReads, m.CompactionReadBytes = st.Reads.Load(), st.Bytes.Load()
	m.WriteStalls = db.writeStalls.Load()
	m.WriteStallTime = time.Duration(db.writeStallNanos.Load())
	m.WALSwitches, m.WALSwitchWaits = db.walSwitches.Load(), db.walSwitchWaits.Load()
	m.WALSwitchSyncTime = time.Duration(db.walSwitchSyncNanos.Load())
	m.WALSwitchWaitTime = time.Duration(db.walSwitchWaitNs.Load())
	m.WALPrepareWaits, m.WALPrepareWaitTime = db.walPrepareWaits.Load(), time.Duration(db.walPrepareWaitNs.Load())
	m.FlushTime = time.Duration(db.flushNanos.Load())
	m.CompactionTime = time.Duration(db.compactNanos.Load())
	db.compact.mu.Lock()
	m.CompactionsRunning = db.compact.running
	db.compact.mu.Unlock()
	m.Flushes = db.flushes.Load()
	m.MergedFlushes = db.mergedFlushes.Load()
	m.Compactions = db.compactions.Load()
	m.TableMoves = db.tableMoves.Load()
	m.IntraL0Compactions = db.intraL0Compactions.Load()
	return m
}

// ReadCounts are the read path's counters that are cheap to read: a few
// atomic loads, no lock and no visit of the tables (Metrics sums every
// table's counters). Read them around a single Get to see what it did.
// Each equals its Metrics field once no Get is running.
type ReadCounts struct {
	// Gets is Metrics.Gets.
	Gets uint64
	// FalsePositiveProbes is Metrics.FalsePositiveProbes.
	FalsePositiveProbes uint64
}

// ReadCounts returns the read path's cheap counters (see ReadCounts).
func (db *DB) ReadCounts() ReadCounts {
	return ReadCounts{Gets: uint64(db.gets.Load()), FalsePositiveProbes: db.tc.fpProbes.Load()}
}

// String prints the metrics as a table of the levels (tables, bytes, read
// amplification, the base level marked) followed by the read path's and
// the background work's counters, as pebble.Metrics.String does.
func (m Metrics) String() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "level\ttables\tsize\tread-amp\t")
	var tables int
	var size uint64
	for l, lm := range m.Levels {
		mark := ""
		if l == m.BaseLevel && l > 0 {
			mark = " (base)"
		}
		fmt.Fprintf(tw, "%d%s\t%d\t%s\t%d\t\n", l, mark, lm.NumFiles, sizeText(lm.Size), lm.Sublevels)
		tables += lm.NumFiles
		size += lm.Size
	}
	fmt.Fprintf(tw, "total\t%d\t%s\t%d\t\n", tables, sizeText(size), m.ReadAmp())
	_ = tw.Flush()
	perK := func(n uint64) float64 { return float64(n) * 1000 / float64(max(m.Gets, 1)) }
	fmt.Fprintf(&b, "gets %d: filter checks %d, absent answers %d, wasted probes %d (%.2f per 1k gets), found %d, data blocks read %d\n",
		m.Gets, m.FilterChecks, m.FilterNegatives, m.FalsePositiveProbes, perK(m.FalsePositiveProbes), m.TruePositiveProbes, m.DataBlockReads)
	fmt.Fprintf(&b, "filters %s, %.2f bits/key: adaptations %d, pre-adapted %d of %d, rebuilds %d, remote reads %d (cache %s, hits %d, misses %d), fixes deferred %d, dropped %d; false positives cached %d, answered %d\n",
		sizeText(m.FilterMemoryBytes), m.FilterBitsPerKey, m.Adaptations, m.PreAdaptations, m.PreAdaptChecks, m.Rebuilds,
		m.RemoteReads, sizeText(uint64(m.RemoteCacheBytes)), m.RemoteCacheHits, m.RemoteCacheMisses, m.FixesDeferred, m.FixesDropped, m.FalsePositivesCached, m.CachedNegatives)
	fmt.Fprintf(&b, "known negatives %d (%s); memtables %d (%s, %s kept); block cache %s (hits %d, misses %d); table reads %d (%s), compaction reads %d (%s)\n",
		m.KnownNegatives, sizeText(uint64(max(m.KnownNegativeBytes, 0))), m.MemTables, sizeText(m.MemTableBytes), sizeText(m.MemTableKeptBytes),
		sizeText(uint64(max(m.BlockCacheSize, 0))), m.BlockCacheHits, m.BlockCacheMisses,
		m.TableReads, sizeText(m.TableReadBytes), m.CompactionReads, sizeText(m.CompactionReadBytes))
	fmt.Fprintf(&b, "flushes %d (merged %d, %s, %.3fs); compactions %d (moves %d, intra-L0 %d, running %d, %s in, %s out, %.3fs); write amplification %.2f; debt %s; stalls %d (%.3fs)\n",
		m.Flushes, m.MergedFlushes, sizeText(m.BytesFlushed), m.FlushTime.Seconds(), m.Compactions, m.TableMoves,
		m.IntraL0Compactions, m.CompactionsRunning, sizeText(m.BytesCompactedIn), sizeText(m.BytesCompacted),
		m.CompactionTime.Seconds(), m.WriteAmplification(), sizeText(m.CompactionDebt), m.WriteStalls, m.WriteStallTime.Seconds())
	fmt.Fprintf(&b, "WAL switches %d (second halves %.3fs); waits for a second half %d (%.3fs); waits for a WAL's populating %d (%.3fs)\n",
		m.WALSwitches, m.WALSwitchSyncTime.Seconds(), m.WALSwitchWaits, m.WALSwitchWaitTime.Seconds(),
		m.WALPrepareWaits, m.WALPrepareWaitTime.Seconds())
	return b.String()
}

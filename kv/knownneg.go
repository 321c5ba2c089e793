package kv

import (
	"fmt"

	"github.com/adaptkv/adaptkv/kv/internal/knownneg"
)

// Known negatives: the store remembers the keys Get most often found
// absent (a bounded heavy-hitter sketch, package knownneg) and hands them
// to every table a flush or compaction writes: an adaptive filter fixes
// its false positives among those in its key range as it is built, from
// the hash words the builder holds (pre-adaptation, no read of the table:
// filterpolicy.PreAdaptStats), a stacked filter is built around them. So
// what the read path learned outlives the tables that learned it: new
// tables are published with filters that already know the hot absent
// keys, and the sketch is saved on Close and loaded by Open. See
// docs/ARCHITECTURE.md, "Known negatives".

// knownNegFileName is the file the sketch is saved in.
const knownNegFileName = "KNOWNNEG"

// DefaultKnownNegatives is the default of Options.KnownNegatives.
const DefaultKnownNegatives = knownneg.DefaultCapacity

// MaxKnownNegatives bounds Options.KnownNegatives (about 2.8 GiB of
// record with 16-byte keys).
const MaxKnownNegatives = 1 << 26

// openKnownNegatives creates the sketch and loads the saved one. A missing
// file means an empty sketch; a damaged or unreadable one too (it is only
// a hint), and KnownNegativesError reports it. A policy that neither
// adapts nor builds around known negatives has no use for them: the store
// then keeps no record (its absent Gets pay nothing for one).
func (db *DB) openKnownNegatives() {
	if db.opts.KnownNegatives < 0 || !(db.policy.Adaptive() || db.policy.KnownNegatives()) {
		return
	}
	db.kn = knownneg.New(db.opts.KnownNegatives, knownneg.DefaultSampling)
	if db.opts.knownNegSeed != 0 {
		db.kn.SetSeed(db.opts.knownNegSeed)
	}
	// RecordWhileRewriting: absent Gets are recorded only in windows, from
	// the start of each flush or compaction (buildNegatives) and from when
	// the memtable passes half its size (commitGroup), until the record
	// has counted about as many as it holds keys. The record carries what
	// the read path learned into the tables flushes and compactions write;
	// while none is written, the tables' own filters keep it.
	if db.recordRule() == RecordWhileRewriting {
		db.kn.SetWindow(uint64(db.kn.Capacity()))
	}
	if err := db.kn.Load(db.fs, db.fs.PathJoin(db.dir, knownNegFileName)); err != nil {
		db.knErr = fmt.Errorf("kv: known negatives not loaded (starting empty): %w", err)
	}
	db.recordGets = db.recordsAbsent()
}

// saveKnownNegatives writes the sketch (Close; never in a read-only store).
func (db *DB) saveKnownNegatives() error {
	if db.kn == nil || db.opts.ReadOnly {
		return nil
	}
	if err := db.kn.Save(db.fs, db.fs.PathJoin(db.dir, knownNegFileName)); err != nil {
		return fmt.Errorf("kv: save known negatives: %w", err)
	}
	return nil
}

// KnownNegativesError returns why the known negatives saved by the last
// Close could not be loaded at Open (nil if they were, or if there were
// none). The store works without them: it starts with an empty record.
func (db *DB) KnownNegativesError() error { return db.knErr }

// fixRepeated is the table cache's sstable.ReaderOptions.FixFalsePositive
// under FixRepeated and FixCached: fix a false positive only if the
// known-negative record holds its key (asked before); a key it does not
// hold takes a slot now, or while nearly all absent keys are new a bit of
// the record's doorkeeper (knownneg.Sketch.Seen), so its next false
// positive is fixed. Under FixCached the table's cache of false positives
// takes the key meanwhile (sstable.ReaderOptions.CacheFalsePositives), so
// the next false positive is the key's return after the cache let it go.
func (db *DB) fixRepeated(key []byte) bool { return db.kn.Seen(key) }

// fixHeld is FixCached's gate with DirectReads: a key the record holds,
// not one only its doorkeeper marks (knownneg.Sketch.SeenHeld). A bit
// another key set would pass a key asked once, and each fix it passes
// reads the device (about two reads: the remote section's chunk and, for
// aprefix, its bin index's).
func (db *DB) fixHeld(key []byte) bool { return db.kn.SeenHeld(key) }

// cachedReturn is sstable.ReaderOptions.CachedReturn beside fixHeld: a key
// that comes back to a table's cache of false positives has been asked
// before, so it takes its slot in the record (knownneg.Sketch.Seen), and
// its false positive after the cache lets it go is fixed.
func (db *DB) cachedReturn(key []byte) { db.kn.Seen(key) }

// fixAuto is the gate under FixAuto: FixEvery while most absent keys
// repeat, FixRepeated while most are new (knownneg.Sketch.NewShare). A
// fix pays when its key comes back; the share of new keys says whether
// they do.
func (db *DB) fixAuto(key []byte) bool {
	return db.kn.NewShare() < 0.5 || db.kn.Seen(key)
}

// recordsAbsent reports whether absent Gets are recorded (db.kn is set),
// always or in windows (recordRule, openKnownNegatives).
func (db *DB) recordsAbsent() bool { return db.recordRule() != RecordNever }

// recordRule resolves Options.RecordAbsent. RecordAuto records every
// absent Get where the fix rule reads the share of new keys or sights
// that only recording gives (FixRepeated, FixAuto) or where every table
// is built around the record (stacked). Elsewhere it records only while
// tables are rewritten (RecordWhileRewriting), the updates that reach new
// filters: the keys whose false positives a table fixes or caches are in
// the record anyway (the gate takes them, fixRepeated), and the rest of
// the absent Gets of a store only read would pay an update each for
// nothing (5-11% of a Get with DirectReads: docs/BENCHMARKS.md, "Cold
// storage: a data set larger than the block cache").
func (db *DB) recordRule() RecordRule {
	if r := db.opts.RecordAbsent; r != RecordAuto {
		return r
	}
	if db.opts.FixRule == FixRepeated || db.opts.FixRule == FixAuto ||
		(!db.policy.Adaptive() && db.policy.KnownNegatives()) {
		return RecordAlways
	}
	return RecordWhileRewriting
}

// recordAbsent notes a Get that consulted at least one table and found
// key absent.
func (db *DB) recordAbsent(key []byte) {
	if db.recordGets {
		db.kn.Record(key)
	}
}

// knownNegatives returns the current known negatives, sorted by key (nil
// when the record is off or empty). One snapshot serves a whole flush or
// compaction.
func (db *DB) knownNegatives() knownneg.List {
	if db.kn == nil || db.kn.Len() == 0 {
		return nil
	}
	return db.kn.Snapshot()
}

// buildNegatives returns the known negatives a new table's filter is built
// with (nil when the record is off or the policy ignores them): for an
// adaptive policy all of them (the builder fixes its false positives among
// those in its range, the most counted first: filterpolicy.PreAdaptBudget);
// for a policy that builds around them (stacked) those asked more than once
// (a key seen once is no pattern: building around one-off keys costs the
// first layer bits and buys nothing). One list serves a whole flush or
// compaction; each table's builder keeps those in its own key range.
func (db *DB) buildNegatives() knownneg.List {
	if db.kn != nil {
		db.kn.OpenWindow() // tables are rewritten (RecordWhileRewriting)
	}
	switch {
	case db.kn == nil:
		return nil
	case db.policy.Adaptive():
		return db.knownNegatives()
	case db.policy.KnownNegatives():
		return db.kn.Repeated(db.knownNegatives())
	}
	return nil
}

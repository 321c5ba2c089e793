package kv

import (
	"fmt"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/kv/internal/knownneg"
)

// Known negatives: the store remembers the keys Get most often found
// absent (a bounded heavy-hitter sketch, package knownneg) and hands the
// ones in a new table's key range to that table before it is published:
// an adaptive filter fixes its false positives among them (pre-adaptation,
// sstable.Reader.PreAdapt), a stacked filter is built around them. So what
// the read path learned outlives the tables that learned it: flushes and
// compactions write filters that already know the hot absent keys, and the
// sketch is saved on Close and loaded by Open. See docs/ARCHITECTURE.md,
// "Known negatives".

// knownNegFileName is the file the sketch is saved in.
const knownNegFileName = "KNOWNNEG"

// DefaultKnownNegatives is the default of Options.KnownNegatives.
const DefaultKnownNegatives = knownneg.DefaultCapacity

// MaxKnownNegatives bounds Options.KnownNegatives (about 2.5 GiB of
// record with 16-byte keys).
const MaxKnownNegatives = 1 << 26

// openKnownNegatives creates the sketch and loads the saved one. A missing
// file means an empty sketch; a damaged or unreadable one too (it is only
// a hint), and KnownNegativesError reports it.
func (db *DB) openKnownNegatives() {
	if db.opts.KnownNegatives < 0 {
		return
	}
	db.kn = knownneg.New(db.opts.KnownNegatives, knownneg.DefaultSampling)
	if db.opts.knownNegSeed != 0 {
		db.kn.SetSeed(db.opts.knownNegSeed)
	}
	if err := db.kn.Load(db.fs, db.fs.PathJoin(db.dir, knownNegFileName)); err != nil {
		db.knErr = fmt.Errorf("kv: known negatives not loaded (starting empty): %w", err)
	}
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

// fixNow is the table cache's sstable.ReaderOptions.FixFalsePositive
// under FixRepeated: fix a false positive only if the known-negative
// record holds its key (asked before).
func (db *DB) fixNow(key []byte) bool { return db.kn.Contains(key) }

// recordAbsent notes a Get that consulted at least one table and found
// key absent.
func (db *DB) recordAbsent(key []byte) {
	if db.kn != nil {
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
// around: for a policy that uses them (stacked), the current ones that were
// asked more than once (a key seen once is no pattern: building around
// one-off keys costs the first layer bits and buys nothing), else nil. One
// list serves a whole flush or compaction; each table's builder keeps
// those in its own key range.
func (db *DB) buildNegatives() knownneg.List {
	if !db.policy.KnownNegatives() || db.kn == nil {
		return nil
	}
	return db.kn.Repeated(db.knownNegatives())
}

// preAdaptBudget bounds the known negatives checked in a new table to four
// times its keys (the most counted first): a check costs a filter query
// (and, for a false positive, a table probe and a fix), so the bound keeps
// pre-adaptation proportional to the table's write cost however many
// known negatives its key range holds (a small flush of a wide key range).
// The keys left out are the least asked; the read path fixes them if they
// come back. Measured on kvbench churn (taf, wasted probes against the
// ideal bound): half the table's keys 2.9x, twice 1.4-1.8x, four times
// 0.8-1.1x (no cut there).
func preAdaptBudget(tableKeys uint64) int { return max(4096, int(4*tableKeys)) }

// preAdapt opens each new table in the table cache and fixes its filter's
// false positives among the known negatives in its key range, before the
// tables are installed: the reader the table cache keeps (and its saved
// state) is the one every Get will use. A failure only loses the hint: the
// table is correct without it, so it is not an error of the flush or
// compaction.
func (db *DB) preAdapt(metas []*base.TableMeta) {
	if !db.policy.Adaptive() {
		return
	}
	kn := db.knownNegatives()
	if len(kn) == 0 {
		return
	}
	for _, m := range metas {
		in := kn.InRange(m.Smallest.UserKey, m.Largest.UserKey)
		if len(in) == 0 {
			continue
		}
		h, err := db.tc.get(m.FileNum)
		if err != nil {
			continue
		}
		_, _ = h.r.PreAdapt(in.MostCounted(preAdaptBudget(h.r.Metrics().FilterKeys)).Keys())
		db.tc.release(h)
	}
}

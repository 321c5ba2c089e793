package kv

import (
	"sync/atomic"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/internal/base"
)

// version is an immutable set of tables per level. Readers (Gets, iterators,
// compactions) hold a reference while they use it; a table file is deleted
// once no live version lists it.
type version struct {
	levels [compaction.NumLevels][]*base.TableMeta
	refs   atomic.Int32
	db     *DB
}

func (v *version) ref() { v.refs.Add(1) }

func (v *version) unref() {
	if n := v.refs.Add(-1); n == 0 {
		v.db.releaseVersion(v)
	}
}

// newVersion registers a version (with one reference, for the caller) and
// counts its tables.
func (db *DB) newVersion(levels [compaction.NumLevels][]*base.TableMeta) *version {
	v := &version{levels: levels, db: db}
	v.refs.Store(1)
	db.refMu.Lock()
	for _, ts := range levels {
		for _, t := range ts {
			db.fileRefs[t.FileNum]++
		}
	}
	db.refMu.Unlock()
	return v
}

// releaseVersion drops a version's table references and deletes the tables
// no version uses any more.
func (db *DB) releaseVersion(v *version) {
	var obsolete []uint64
	db.refMu.Lock()
	for _, ts := range v.levels {
		for _, t := range ts {
			db.fileRefs[t.FileNum]--
			if db.fileRefs[t.FileNum] <= 0 {
				delete(db.fileRefs, t.FileNum)
				obsolete = append(obsolete, t.FileNum)
			}
		}
	}
	db.refMu.Unlock()
	for _, fn := range obsolete {
		db.deleteTable(fn)
	}
}

// deleteTable evicts a table from the table cache (its counters go to the
// running totals) and removes the table and its adaptive state file.
// After Close (a version released by an iterator left open) the files stay:
// the directory lock is gone, and the next Open deletes them.
func (db *DB) deleteTable(fn uint64) {
	db.tc.evict(fn)
	if db.opts.ReadOnly {
		return
	}
	db.deleteMu.Lock()
	defer db.deleteMu.Unlock()
	if db.filesReleased {
		return
	}
	_ = db.fs.Remove(db.fs.PathJoin(db.dir, tableFileName(fn)))
	_ = db.fs.Remove(db.fs.PathJoin(db.dir, stateFileName(fn)))
}

// currentVersion returns the current version with a reference.
func (db *DB) currentVersion() *version {
	db.mu.Lock()
	v := db.current
	v.ref()
	db.mu.Unlock()
	return v
}

package kv

import (
	"sync/atomic"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/manifest"
)

// version is a manifest.Version the store has installed. Readers (Gets,
// iterators, compactions) hold a reference while they use it; a table file
// is deleted once no live version lists it.
type version struct {
	manifest.Version
	refs atomic.Int32
	db   *DB
}

func (v *version) ref() { v.refs.Add(1) }

func (v *version) unref() {
	if n := v.refs.Add(-1); n == 0 {
		v.db.releaseVersion(v)
	}
}

// newVersion registers a version (with one reference, for the caller) and
// counts its tables.
func (db *DB) newVersion(levels [manifest.NumLevels][]*base.TableMeta) *version {
	v := &version{Version: manifest.NewVersion(levels), db: db}
	v.refs.Store(1)
	db.refs.mu.Lock()
	for _, ts := range levels {
		for _, t := range ts {
			db.refs.count[t.FileNum]++
		}
	}
	db.refs.mu.Unlock()
	return v
}

// releaseVersion drops a version's table references and deletes the tables
// no version uses any more.
func (db *DB) releaseVersion(v *version) {
	var obsolete []uint64
	db.refs.mu.Lock()
	for _, ts := range v.Levels {
		for _, t := range ts {
			db.refs.count[t.FileNum]--
			if db.refs.count[t.FileNum] <= 0 {
				delete(db.refs.count, t.FileNum)
				obsolete = append(obsolete, t.FileNum)
			}
		}
	}
	db.refs.mu.Unlock()
	for _, fn := range obsolete {
		db.deleteTable(fn)
	}
}

// deleteTable evicts a table from the table cache (its counters go to the
// running totals) and queues the table and its adaptive state file for
// removal (deleteLoop). After Close (a version released by an iterator left
// open) the files stay: the directory lock is gone, and the next Open
// deletes them.
func (db *DB) deleteTable(fn uint64) {
	db.tc.evict(fn)
	if db.opts.ReadOnly {
		return
	}
	db.queueDeletion(db.fs.PathJoin(db.dir, tableFileName(fn)), db.fs.PathJoin(db.dir, stateFileName(fn)))
}

// currentVersion returns the current version with a reference.
func (db *DB) currentVersion() *version {
	db.mu.Lock()
	v := db.mu.current
	v.ref()
	db.mu.Unlock()
	return v
}

package kv

import (
	"bytes"
	"slices"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/internal/base"
)

// version is an immutable set of tables per level. Readers (Gets, iterators,
// compactions) hold a reference while they use it; a table file is deleted
// once no live version lists it.
type version struct {
	levels [compaction.NumLevels][]*base.TableMeta
	// l0Sublevels is L0 as Pebble's sublevels (see l0Sublevels), for point
	// reads: one binary search per sublevel instead of a look at every L0
	// table, which flush splitting multiplies.
	l0Sublevels [][]*base.TableMeta
	// belowL0 is levels 1.. that hold tables, top down: point reads and
	// iterators visit only these (the levels above the base level hold
	// none).
	belowL0 [][]*base.TableMeta
	refs    atomic.Int32
	db      *DB
}

// l0Sublevels arranges L0 (oldest first) into sublevels, Pebble's scheme: a
// table's sublevel is one above the highest sublevel of the older tables it
// shares user keys with (0 if none). Tables of one sublevel never share a
// user key (of two that did, the newer would sit above the older), so each
// sublevel is a sorted run; and of the tables holding a key, a newer one is
// always in a higher sublevel, so reading the sublevels from the top visits
// them newest first. Each sublevel is sorted by smallest key.
func l0Sublevels(l0 []*base.TableMeta) [][]*base.TableMeta {
	sub := make([]int, len(l0))
	var out [][]*base.TableMeta
	for i, t := range l0 {
		s := 0
		for j, u := range l0[:i] {
			if sub[j] >= s && bytes.Compare(u.Smallest.UserKey, t.Largest.UserKey) <= 0 &&
				bytes.Compare(t.Smallest.UserKey, u.Largest.UserKey) <= 0 {
				s = sub[j] + 1
			}
		}
		sub[i] = s
		for len(out) <= s {
			out = append(out, nil)
		}
		out[s] = append(out[s], t)
	}
	for _, ts := range out {
		slices.SortFunc(ts, func(a, b *base.TableMeta) int { return bytes.Compare(a.Smallest.UserKey, b.Smallest.UserKey) })
	}
	return out
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
	v := &version{levels: levels, l0Sublevels: l0Sublevels(levels[0]), db: db}
	for _, ts := range levels[1:] {
		if len(ts) > 0 {
			v.belowL0 = append(v.belowL0, ts)
		}
	}
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
	for _, ts := range v.levels {
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

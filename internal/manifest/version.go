// Package manifest holds the LSM tree's metadata: the tables of each level
// as an immutable Version (with L0's sublevels, and each sorted run's
// Search for point reads, computed once, when the version is made), the
// VersionEdit that turns one version into the next
// and its encoding (a record of the manifest file), applying an edit to the
// levels, and L0's structure (Sublevels for reads, Depth for picking).
//
// The store (package kv) writes and reads the manifest file, counts
// references to its versions and deletes the tables no version lists;
// package compaction plans over a version's levels. See
// docs/ARCHITECTURE.md, "On-disk formats".
package manifest

import "github.com/adaptkv/adaptkv/internal/base"

// NumLevels is the number of levels of the LSM tree: L0 (flushed memtables,
// tables may overlap) and L1..L6 (each sorted and non-overlapping).
const NumLevels = 7

// Version is an immutable set of tables per level. L0 is kept oldest first
// (by file number), the other levels by smallest key.
type Version struct {
	Levels [NumLevels][]*base.TableMeta
	// L0Sublevels is L0 as Pebble's sublevels (L0Sublevels), for point
	// reads: one binary search per sublevel instead of a look at every L0
	// table, which flush splitting multiplies.
	L0Sublevels [][]*base.TableMeta
	// BelowL0 is levels 1.. that hold tables, top down: point reads and
	// iterators visit only these (the levels above the base level hold
	// none).
	BelowL0 [][]*base.TableMeta
	// L0Search and BelowL0Search are the Search of each run of
	// L0Sublevels and BelowL0: a point read's binary search per level.
	L0Search, BelowL0Search []Search
}

// NewVersion returns the version of levels, with its L0 sublevels and the
// levels below L0 that hold tables.
func NewVersion(levels [NumLevels][]*base.TableMeta) Version {
	v := Version{Levels: levels, L0Sublevels: L0Sublevels(levels[0])}
	for _, ts := range levels[1:] {
		if len(ts) > 0 {
			v.BelowL0 = append(v.BelowL0, ts)
		}
	}
	v.L0Search = make([]Search, len(v.L0Sublevels))
	for i, ts := range v.L0Sublevels {
		v.L0Search[i] = NewSearch(ts)
	}
	v.BelowL0Search = make([]Search, len(v.BelowL0))
	for i, ts := range v.BelowL0 {
		v.BelowL0Search[i] = NewSearch(ts)
	}
	return v
}

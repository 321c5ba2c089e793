// Package compaction chooses and runs the compactions of adaptkv's leveled
// LSM tree, over the levels of a manifest.Version (internal/manifest).
//
// Picking (Pick, PickRange) follows Pebble and RocksDB: L0 holds flushed
// tables that may overlap and is compacted into the base level once a key
// is in L0Trigger/2 of them (manifest.L0Depth; Pebble's rule, which keeps
// the L0 tables a read checks few), or once it holds L0FileThreshold tables that
// do not overlap; L1..L6 are sorted runs. The base level and the level
// targets are dynamic, as Pebble's (BaseLevel): derived from the data in
// the tree, so a small store compacts L0 straight into the last level and
// a growing one moves its base up, with no empty middle level in between;
// targets grow from BaseLevelBytes (64 MiB by default) at the base level to
// the last level's share. (StaticLevelTargets: L0 into L1, L1..L5 targets
// growing by LevelRatio from BaseLevelBytes.) Among the levels whose
// size/target score is >= 1, the one whose score is highest relative to
// its output level's (Priorities, Pebble's adjustment) is compacted into
// the next one, starting from the table whose overlap with the next level
// is smallest relative to its size. With IntraL0Ratio, an L0 that has
// fallen behind is merged within L0 when that is much cheaper than
// compacting it into the base level (Plan.IsIntraL0).
// A plan never takes a table that is busy in a running compaction and never
// splits the versions of a user key between its inputs and the rest of a
// level.
// Plan.Parts splits a large plan at table boundaries into plans over
// disjoint key ranges that can run at once (RocksDB's subcompactions).
//
// Running (Run) merges the plan's tables (internal/merging) and writes, cut
// into tables of about TargetFileSize, only the versions some reader can
// still see: per user key, the newest version visible to each live snapshot
// and to the latest state. When the output is the bottommost data for its
// range, tombstones with no older kept value beneath them are dropped, and
// so are the range tombstones every snapshot sees (RunOptions.RangeDels:
// the versions a range tombstone of their own snapshot stripe covers are
// dropped at every level), and
// (ZeroSeqs) the values every reader sees are written with sequence number
// 0, as Pebble writes its bottommost level: a table's trailers then cost
// next to nothing.
// Given the plan's grandparents (the tables its outputs will next be
// compacted into), Run cuts outputs where a grandparent begins, as RocksDB
// and Pebble do, so that a later compaction of an output rewrites no
// grandparent it barely overlaps.
//
// A compaction, as the kv package drives it:
//
//	p := compaction.Pick(levels, opts, isBusy) // nil: nothing to do
//	// mark p.Tables() busy; open an iterator on each of them
//	in := merging.NewIter(iters...) // internal/merging
//	metas, err := compaction.Run(in, compaction.RunOptions{
//		Snapshots:      liveSnapshots, // ascending
//		DropTombstones: p.IsBottommost(levels),
//		ZeroSeqs:       p.IsBottommost(levels),
//		TargetFileSize: opts.TargetFileSize,
//		Grandparents:   p.Grandparents(levels),
//		NewOutput:      newTableOutput, // e.g. over sstable.Create
//	})
//	in.Close()
//	// on success: install metas at p.OutputLevel and remove p.Tables();
//	// on error: delete the files of metas; then unmark busy
//
// Everything here works on base.Iterator and TableMeta values, so it is
// tested with in-memory iterators and outputs, without a DB or real tables.
package compaction

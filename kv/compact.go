package kv

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/adaptkv/adaptkv/internal/merging"
	"github.com/adaptkv/adaptkv/internal/rangedel"
	"github.com/adaptkv/adaptkv/sstable"
)

// Background compactions run concurrently, up to
// Options.MaxConcurrentCompactions: compactLoop picks under compact.mu with
// the tables of the running ones marked busy (compaction.Pick never takes a
// busy table, so running compactions never share a table nor write
// overlapping outputs into one level), books the plan's tables and starts
// it. A manual Compact waits for the running ones and holds back new ones
// until it returns, so its plans need no busy set.

func (db *DB) compactionOptions() compaction.Options {
	return compaction.Options{
		L0Trigger:       db.opts.L0CompactionThreshold,
		L0FileThreshold: db.opts.L0CompactionFileThreshold,
		LevelRatio:      db.opts.LevelSizeRatio,
		BaseLevelBytes:  db.opts.baseLevelBytes(),
		TargetFileSize:  db.opts.TargetFileSize,
		IntraL0Ratio:    max(0, db.opts.intraL0Ratio),
	}
}

// baseLevelBytes is the target size of L1: 4 x L0CompactionThreshold
// memtables (64 MiB with the defaults, the compaction package's default),
// scaled with the memtable size so that small stores use several levels.
func (o *Options) baseLevelBytes() uint64 {
	b := uint64(o.MemTableSize) * uint64(o.L0CompactionThreshold) * 4
	return max(b, 1<<20)
}

func (db *DB) compactLoop() {
	defer db.wg.Done()
	for {
		select {
		case <-db.closeCh:
			return
		case <-db.compact.kick:
		}
		db.startCompactions()
	}
}

// startCompactions starts the compactions Pick chooses, while fewer than
// MaxConcurrentCompactions run and no manual Compact is waiting or running.
// After a failed compaction it starts none (the next flush kicks a retry).
func (db *DB) startCompactions() {
	db.compact.mu.Lock()
	defer db.compact.mu.Unlock()
	for db.compact.running < db.opts.MaxConcurrentCompactions && db.compact.manual == 0 {
		if db.closed.Load() {
			return
		}
		db.mu.Lock()
		failed := db.mu.compactErr != nil
		db.mu.Unlock()
		if failed && db.compact.running > 0 {
			return // the running one clears or keeps the error
		}
		v := db.currentVersion()
		busy := func(fn uint64) bool { return db.compact.busy[fn] }
		opts := db.compactionOptions()
		plan := compaction.Pick(v.Levels, opts, busy)
		var outNum uint64 // an intra-L0 compaction's output
		if plan != nil && plan.IsIntraL0() {
			if outNum = db.reserveIntraL0Output(v); outNum == 0 {
				opts.IntraL0Ratio = 0
				plan = compaction.Pick(v.Levels, opts, busy)
			}
		}
		if plan == nil {
			v.unref()
			if db.compact.running == 0 {
				db.mu.Lock()
				db.mu.compactErr = nil // nothing left that failed
				db.mu.Unlock()
			}
			return
		}
		db.bookLocked(plan, true)
		db.wg.Add(1)
		hook := db.testHookCompaction
		go func() {
			defer db.wg.Done()
			if hook != nil {
				hook(plan)
			}
			err := db.runCompaction(plan, v, outNum)
			if f := db.events.BackgroundError; f != nil && err != nil && !errors.Is(err, ErrClosed) {
				f(err)
			}
			v.unref()
			db.compact.mu.Lock()
			db.bookLocked(plan, false)
			db.compact.mu.Unlock()
			db.mu.Lock()
			db.mu.compactErr = err
			db.mu.stallCond.Broadcast()
			db.mu.Unlock()
			if err == nil {
				db.kickCompaction() // the tree may owe more
			}
		}()
		if failed {
			return // one retry at a time
		}
	}
}

// bookLocked marks the plan's tables busy and counts it as running (start),
// or undoes that when it ends, waking a waiting manual Compact.
func (db *DB) bookLocked(plan *compaction.Plan, start bool) {
	for _, t := range plan.Tables() {
		if start {
			db.compact.busy[t.FileNum] = true
		} else {
			delete(db.compact.busy, t.FileNum)
		}
	}
	if start {
		db.compact.running++
	} else {
		db.compact.running--
		db.compact.cond.Broadcast()
	}
}

// reserveIntraL0Output returns the file number of an intra-L0
// compaction's output picked from v, or 0 when it may not run now: L0 is
// read newest first by file number (manifest.Apply), so the output must number
// above its inputs and below every flush whose table is not in v. v must
// still be the current version. With no flush under way (flushLoop marks
// one under db.mu before its outputs take numbers) a new number is above
// every table in v and below any a later flush takes; while a flush runs,
// the number it left free below its own tables (l0Spare) is, once.
func (db *DB) reserveIntraL0Output(v *version) uint64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.current != v {
		return 0
	}
	if !db.mu.flushing {
		return db.allocFileNum()
	}
	n := db.mu.l0Spare
	for _, t := range v.Levels[0] {
		if t.FileNum >= n { // never: the spare was taken after every table in current
			return 0
		}
	}
	db.mu.l0Spare = 0
	return n
}

// runCompaction merges the plan's tables into new tables of its output
// level and installs the result. v is the version the plan was picked
// from (the caller holds a reference); the plan's tables are booked busy.
// An intra-L0 plan writes one table numbered outNum
// (reserveIntraL0Output).
func (db *DB) runCompaction(plan *compaction.Plan, v *version, outNum uint64) (err error) {
	start := time.Now()
	info := compactionInfo(db.nextJobID(), plan)
	if f := db.events.CompactionBegin; f != nil {
		f(info)
	}
	if f := db.events.CompactionEnd; f != nil {
		defer func() {
			info.Duration, info.Err = time.Since(start), err
			f(info)
		}()
	}
	if info.Move {
		if err := db.moveTable(plan); err != nil {
			return err
		}
		info.Output.Tables = info.Input[0].Tables
		return nil
	}
	defer func() { db.compactNanos.Add(int64(time.Since(start))) }()
	parts := db.compactionParts(plan)
	info.Parts = len(parts)
	metas, err := db.inParallel(len(parts), func(i int) ([]*base.TableMeta, error) {
		return db.writeCompaction(parts[i], v, outNum, info.JobID)
	})
	if err != nil {
		return err
	}
	if err := db.logAndApply(compactionEdit(plan, metas), nil); err != nil {
		// The edit may be durable: keep the outputs (orphans are deleted
		// by the next Open).
		return err
	}
	info.Output.Tables = tableInfos(metas)
	db.compactions.Add(1)
	if plan.IsIntraL0() {
		db.intraL0Compactions.Add(1)
	}
	for _, t := range plan.Tables() {
		db.compactedReadBytes.Add(t.Size)
	}
	fns := make([]uint64, len(metas))
	for i, m := range metas {
		db.compactedBytes.Add(m.Size)
		fns[i] = m.FileNum
	}
	db.warmTables(fns...)
	return nil
}

// compactPartTargets is the fewest target-size tables' worth of input a
// part of a manual compaction takes (compactionParts).
const compactPartTargets = 16

// compactionParts splits a manual plan into parts over disjoint key ranges
// that inParallel writes at once (RocksDB's subcompactions, at table
// boundaries: compaction.Plan.Parts): parts of at least an eighth of the
// plan per goroutine and compactPartTargets target-size tables, so that a
// large Compact (a bulk load's) runs on MaxConcurrentCompactions
// goroutines, as the background compactions it pauses did, and writes few
// more tables than it would in one piece (a part ends with one table under
// the target). Background plans run whole: each is one of the
// MaxConcurrentCompactions that run at once.
func (db *DB) compactionParts(plan *compaction.Plan) []*compaction.Plan {
	w := uint64(db.opts.MaxConcurrentCompactions)
	if !plan.Manual || w < 2 {
		return []*compaction.Plan{plan}
	}
	var total uint64
	for _, t := range plan.Tables() {
		total += t.LevelSize()
	}
	return plan.Parts(max(total/(8*w), compactPartTargets*db.opts.TargetFileSize))
}

// compactionInfo describes plan for the event listener.
func compactionInfo(jobID int, plan *compaction.Plan) CompactionInfo {
	info := CompactionInfo{JobID: jobID, Move: isMove(plan), Manual: plan.Manual, Parts: 1,
		Input: []LevelTables{{Level: plan.Level, Tables: tableInfos(plan.Inputs)}}, Output: LevelTables{Level: plan.OutputLevel}}
	if plan.OutputLevel != plan.Level && len(plan.Overlapping) > 0 {
		info.Input = append(info.Input, LevelTables{Level: plan.OutputLevel, Tables: tableInfos(plan.Overlapping)})
	}
	return info
}

// writeCompaction merges the plan's tables into new tables and returns
// them; on an error it removes what it wrote.
func (db *DB) writeCompaction(plan *compaction.Plan, v *version, outNum uint64, jobID int) ([]*base.TableMeta, error) {
	iters, err := db.compactionInputs(plan)
	if err != nil {
		return nil, err
	}
	in := merging.NewIter(iters...)
	rangeDels, err := db.rangeDelsOf(plan.Tables())
	if err != nil {
		in.Close()
		return nil, err
	}
	kn := db.buildNegatives()
	var outs []*tableOutput
	ropts := compaction.RunOptions{
		Snapshots: db.snapshotSeqs(),
		NewOutput: func() (compaction.Output, error) {
			num := outNum
			switch {
			case !plan.IsIntraL0():
				num = db.allocFileNum()
			case len(outs) > 0:
				return nil, errors.New("kv: an intra-L0 compaction writes one table")
			}
			o, err := db.newOutputNum(num, kn, db.opts.TableFormat, jobID, "compacting")
			if err == nil {
				outs = append(outs, o)
			}
			return o, err
		},
		Cancel:    db.closeCh,
		RangeDels: rangeDels,
	}
	// An intra-L0 plan writes one table (TargetFileSize 0) and keeps its
	// tombstones and sequence numbers: older versions of its keys are in
	// the levels below.
	if !plan.IsIntraL0() {
		ropts.TargetFileSize, ropts.Grandparents = db.opts.TargetFileSize, plan.Grandparents(v.Levels)
		bottommost := plan.IsBottommost(v.Levels)
		ropts.DropTombstones, ropts.ZeroSeqs = bottommost, bottommost
	}
	metas, err := compaction.Run(in, ropts)
	if cerr := in.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		for _, m := range metas {
			_ = db.fs.Remove(db.fs.PathJoin(db.dir, tableFileName(m.FileNum)))
		}
		switch {
		case errors.Is(err, sstable.ErrCorrupt):
			err = fmt.Errorf("%w: %w", ErrCorruption, err)
		case errors.Is(err, compaction.ErrCanceled):
			err = fmt.Errorf("%w: %w", ErrClosed, err) // by Close
		}
		return nil, fmt.Errorf("kv: compaction L%d->L%d: %w", plan.Level, plan.OutputLevel, err)
	}
	return metas, nil
}

// compactionEdit deletes the plan's tables and adds metas to its output
// level.
func compactionEdit(plan *compaction.Plan, metas []*base.TableMeta) *manifest.VersionEdit {
	edit := &manifest.VersionEdit{}
	for _, t := range plan.Inputs {
		edit.Deleted = append(edit.Deleted, manifest.DeletedTable{Level: plan.Level, FileNum: t.FileNum})
	}
	if plan.OutputLevel != plan.Level {
		for _, t := range plan.Overlapping {
			edit.Deleted = append(edit.Deleted, manifest.DeletedTable{Level: plan.OutputLevel, FileNum: t.FileNum})
		}
	}
	for _, m := range metas {
		edit.Added = append(edit.Added, manifest.NewTable{Level: plan.OutputLevel, Meta: m})
	}
	return edit
}

// isMove reports whether a background plan can move its table down instead
// of rewriting it (Pebble's and RocksDB's trivial move): one input and
// nothing it overlaps in the output level. A table of L0 alone in its plan
// overlaps no other L0 table (Pick takes L0 tables by overlapping groups),
// so moving it keeps newer versions above older ones. Manual plans always
// rewrite: they are asked to drop what is obsolete.
func isMove(plan *compaction.Plan) bool {
	return !plan.Manual && plan.Level != plan.OutputLevel && len(plan.Inputs) == 1 && len(plan.Overlapping) == 0
}

// moveTable installs the plan's one table at its output level. The file,
// its filter and its adaptive state stay as they are.
func (db *DB) moveTable(plan *compaction.Plan) error {
	t := plan.Inputs[0]
	edit := &manifest.VersionEdit{
		Deleted: []manifest.DeletedTable{{Level: plan.Level, FileNum: t.FileNum}},
		Added:   []manifest.NewTable{{Level: plan.OutputLevel, Meta: t}},
	}
	if err := db.logAndApply(edit, nil); err != nil {
		return err
	}
	db.tableMoves.Add(1)
	return nil
}

// compactionIter reads a compaction input through a private reader (no
// block cache, no adaptive state, no filter: it only iterates), so
// compactions neither evict hot blocks nor count in the read-path metrics
// (DataBlockReads), nor decode filters they never query.
type compactionIter struct {
	base.Iterator
	r *sstable.Reader
}

func (c *compactionIter) Close() error {
	err := c.Iterator.Close()
	if cerr := c.r.Close(); err == nil {
		err = cerr
	}
	return err
}

// compactionInputs returns the iterators a compaction of plan merges: one
// per L0 input (L0 tables overlap), and one levelIter per other level,
// which opens its tables one at a time as Pebble's compaction inputs do.
// An input that opened every table at once (an L0 compaction into a level
// of 15 tables merged 20 iterators) made each merge step sift a deeper
// heap, and held a 256 KiB read-ahead window per table.
func (db *DB) compactionInputs(plan *compaction.Plan) ([]base.Iterator, error) {
	var iters []base.Iterator
	level := func(ts []*base.TableMeta) {
		if len(ts) > 0 {
			iters = append(iters, newLevelIter(ts, func(t *base.TableMeta) (base.Iterator, error) {
				return db.newCompactionIter(t.FileNum)
			}))
		}
	}
	if plan.Level == 0 {
		for _, t := range plan.Inputs {
			it, err := db.newCompactionIter(t.FileNum)
			if err != nil {
				for _, it := range iters {
					it.Close()
				}
				return nil, err
			}
			iters = append(iters, it)
		}
	} else {
		level(plan.Inputs)
	}
	if plan.OutputLevel != plan.Level {
		level(plan.Overlapping)
	}
	return iters, nil
}

// rangeDelsOf returns the range tombstones of tables, merged (each table's
// are read when it opens, and kept with its table cache entry).
func (db *DB) rangeDelsOf(tables []*base.TableMeta) (*rangedel.Set, error) {
	var sets []*rangedel.Set
	for _, t := range tables {
		if !t.HasRangeDels {
			continue
		}
		h, err := db.tc.get(t.FileNum)
		if err != nil {
			return nil, err
		}
		sets = append(sets, h.r.RangeDels())
		db.tc.release(h)
	}
	return rangedel.Merge(sets...), nil
}

func (db *DB) newCompactionIter(fn uint64) (base.Iterator, error) {
	r, err := sstable.Open(db.compactFS, db.fs.PathJoin(db.dir, tableFileName(fn)), sstable.ReaderOptions{FileNum: fn, SkipFilter: true, Sequential: true})
	if err != nil {
		return nil, fmt.Errorf("kv: open table %s: %w", tableFileName(fn), err)
	}
	it, err := r.NewIter(nil, nil)
	if err != nil {
		r.Close()
		return nil, err
	}
	return &compactionIter{Iterator: it, r: r}, nil
}

// warmTables opens new tables in the table cache, so their filters are
// loaded before the first read and Metrics knows their filter sizes.
func (db *DB) warmTables(fns ...uint64) {
	// Under a version that lists the tables, so that none can be deleted
	// (and evicted) before its cache entry exists; a table a compaction
	// already replaced is not opened.
	v := db.currentVersion()
	defer v.unref()
	for _, ts := range v.Levels {
		for _, t := range ts {
			if slices.Contains(fns, t.FileNum) {
				db.warmTable(t.FileNum)
			}
		}
	}
}

// warmTable opens one table in the table cache (an error leaves it to the
// first read, which reports it).
func (db *DB) warmTable(fn uint64) {
	if h, err := db.tc.get(fn); err == nil {
		db.tc.release(h)
	}
}

// writtenSince reports whether plan rewrites the last level into itself
// and every table it takes is numbered from first on: Compact wrote them
// all, as the bottommost output of a level above, with nothing obsolete to
// drop, so it need not write the same bytes again (a bulk load's Compact
// writes its data to the last level once).
func writtenSince(plan *compaction.Plan, first uint64) bool {
	if plan.Level != plan.OutputLevel || plan.Level != manifest.NumLevels-1 {
		return false
	}
	for _, t := range plan.Inputs {
		if t.FileNum < first {
			return false
		}
	}
	return true
}

// pauseCompactions waits for the background compactions running and keeps
// new ones from starting (as a manual compaction: startCompactions starts
// none while one waits or runs) until the returned resume is called.
func (db *DB) pauseCompactions() (resume func()) {
	db.compact.mu.Lock()
	db.compact.manual++
	for db.compact.running > 0 {
		db.compact.cond.Wait()
	}
	db.compact.mu.Unlock()
	return func() {
		db.compact.mu.Lock()
		db.compact.manual--
		db.compact.mu.Unlock()
		db.kickCompaction()
	}
}

// Compact flushes the memtable and compacts every table overlapping the
// user keys [start, end] (nil: unbounded) level by level down to the last
// level, so that shadowed versions and tombstones in the range are dropped
// (except what live snapshots still see); it returns once the files of the
// tables it replaced are removed (those an open iterator still reads stay
// until it is closed). The last level is rewritten into itself unless
// this Compact wrote every table of it in the range; a large level is
// compacted in key ranges on MaxConcurrentCompactions goroutines at once
// (compactionParts). start > end is an error wrapping
// ErrInvalidOptions; a Compact that Close cancels returns an error wrapping
// ErrClosed.
func (db *DB) Compact(start, end []byte) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	if start != nil && end != nil && bytes.Compare(start, end) > 0 {
		return fmt.Errorf("%w: Compact range start %q > end %q", ErrInvalidOptions, start, end)
	}
	if err := db.Flush(); err != nil {
		return err
	}
	db.compact.manualMu.Lock()
	defer db.compact.manualMu.Unlock()
	defer db.pauseCompactions()()
	// Tables numbered from here on are this Compact's outputs: no
	// background compaction runs until it returns.
	ours := db.nextFileNum.Load()
	for level := 0; level < manifest.NumLevels; level++ {
		if db.closed.Load() {
			return ErrClosed
		}
		v := db.currentVersion()
		plan, err := compaction.TryPickRange(v.Levels, level, start, end, nil)
		if plan != nil {
			plan.SkipEmptyLevels(v.Levels, nil) // no table is busy (see above)
		}
		if err != nil {
			v.unref()
			return fmt.Errorf("kv: compact: %w", err)
		}
		if plan == nil || writtenSince(plan, ours) {
			v.unref()
			continue
		}
		err = db.runCompaction(plan, v, 0) // a manual plan is never intra-L0
		v.unref()
		if err != nil {
			return err
		}
	}
	db.waitDeletions()
	return nil
}

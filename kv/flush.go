package kv

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/adaptkv/adaptkv/internal/merging"
	"github.com/adaptkv/adaptkv/internal/rangedel"
	"github.com/adaptkv/adaptkv/kv/internal/memtable"
)

// flushLoop flushes immutable memtables, oldest first, to L0: all those
// queued at once in one flush.
func (db *DB) flushLoop() {
	defer db.wg.Done()
	for {
		db.mu.Lock()
		for len(db.mu.imm) == 0 && !db.mu.closing && db.mu.bgErr == nil {
			db.mu.flushCond.Wait()
		}
		// L0 too deep: wait for compactions (unless one failed: then
		// flushing on beats stalling writers for good).
		for db.l0StalledLocked() &&
			!db.mu.closing && db.mu.bgErr == nil && db.mu.compactErr == nil {
			db.kickCompaction()
			db.mu.stallCond.Wait()
		}
		// L0 deep: a lone full memtable waits for the next (holdFlushLocked).
		for db.holdFlushLocked() && !db.mu.closing && db.mu.bgErr == nil {
			db.mu.held = db.mu.imm[0]
			db.mu.flushCond.Wait()
		}
		// Each wait above ends when the store closes or fails; otherwise
		// a memtable is queued.
		if db.mu.closing || db.mu.bgErr != nil {
			db.mu.Unlock()
			return
		}
		// Every queued memtable goes into this flush (as Pebble's do):
		// one layer of L0 tables, however many memtables waited; unless
		// merged flushes are off.
		ms := slices.Clone(db.mu.imm)
		db.mu.held, db.mu.heldRelease = nil, false
		if db.opts.MergeFlushL0Depth < 0 {
			ms = ms[:1]
		}
		next := db.mu.mem.walNum
		if len(db.mu.imm) > len(ms) {
			next = db.mu.imm[len(ms)].walNum
		}
		db.mu.flushing = true
		// Below this flush's tables and above every table in current:
		// one intra-L0 compaction may number its output with it while
		// the flush runs (reserveIntraL0Output).
		db.mu.l0Spare = db.allocFileNum()
		db.mu.Unlock()
		if err := db.flushMemtables(ms, next); err != nil {
			db.mu.Lock()
			db.mu.flushing, db.mu.l0Spare = false, 0 // an installed flush cleared them itself
			db.mu.Unlock()
			db.setBGErr(fmt.Errorf("kv: flush: %w", err))
			return
		}
	}
}

// l0StalledLocked reports whether L0 is too deep (or holds too many
// tables) for another flush: see Options.L0StopWritesThreshold.
func (db *DB) l0StalledLocked() bool {
	l0 := db.mu.current.Levels[0]
	return len(l0) >= 2*db.opts.L0CompactionFileThreshold ||
		len(l0) >= db.opts.L0StopWritesThreshold && manifest.L0Depth(l0, nil) >= db.opts.L0StopWritesThreshold
}

// holdFlushLocked reports whether flushLoop should keep the one queued
// memtable until the next is full and flush the two together: L0 is at
// least Options.MergeFlushL0Depth deep (or was when the memtable filled,
// and writes have not paused since L0 drained: armHeldReleaseLocked), a
// second queued memtable does not stall writers, and no Flush is waiting.
// Halving the flushes halves how fast L0 deepens while its compactions are
// behind. See docs/ARCHITECTURE.md, "Merged flushes".
func (db *DB) holdFlushLocked() bool {
	d := db.opts.MergeFlushL0Depth
	if d <= 0 || len(db.mu.imm) != 1 || db.opts.MaxImmutableMemTables < 2 || db.mu.flushWaiters > 0 {
		return false
	}
	return db.l0DeepLocked() || (db.mu.held == db.mu.imm[0] && !db.mu.heldRelease)
}

// l0DeepLocked reports whether L0 is at least MergeFlushL0Depth deep.
func (db *DB) l0DeepLocked() bool {
	return manifest.L0Depth(db.mu.current.Levels[0], nil) >= db.opts.MergeFlushL0Depth
}

// heldQuiet is how long writes must pause, once L0 is shallower than
// MergeFlushL0Depth again, before a memtable held for a merged flush goes
// alone. While writes go on the next memtable fills and the two merge as
// planned (flushing the held one as soon as L0 drains costs churn a fifth
// more write amplification); once they stop, every read would search the
// held memtable until a next one fills, which a read-mostly spell may
// never do (absent Gets 0.4 us slower each in kvbench's adversary).
const heldQuiet = 100 * time.Millisecond

// armHeldReleaseLocked, called when a version is installed, starts a
// quiet check if a memtable is held and L0 is no longer deep: db.heldQuiet
// (heldQuiet) later, if the same memtable is held and the mutable one has
// not grown, the held one goes alone; otherwise the check starts again
// for whatever is held then (nothing, or L0 deep again: the next install
// checks anew).
func (db *DB) armHeldReleaseLocked() {
	if db.mu.heldQuietArmed || db.mu.closing || !db.holdFlushLocked() || db.l0DeepLocked() {
		return
	}
	db.mu.heldQuietArmed = true
	held, size := db.mu.held, db.mu.mem.mt.Size()
	time.AfterFunc(db.heldQuiet, func() {
		db.mu.Lock()
		defer db.mu.Unlock()
		db.mu.heldQuietArmed = false
		if !db.mu.closing && db.mu.held == held && db.mu.mem.mt.Size() == size &&
			db.holdFlushLocked() && !db.l0DeepLocked() {
			db.mu.heldRelease = true
			db.mu.flushCond.Broadcast()
			return
		}
		db.armHeldReleaseLocked()
	})
}

// flushMemtables writes the memtables ms (the oldest queued, in order)
// to one layer of L0 tables and installs them with nextLog, the WAL of the
// oldest memtable left unflushed.
func (db *DB) flushMemtables(ms []*memEntry, nextLog uint64) (err error) {
	start := time.Now()
	info := FlushInfo{JobID: db.nextJobID(), Memtables: len(ms), Parts: 1}
	if f := db.events.FlushBegin; f != nil {
		f(info)
	}
	defer func() {
		d := time.Since(start)
		db.flushNanos.Add(int64(d))
		if f := db.events.FlushEnd; f != nil {
			info.Duration, info.Err = d, err
			f(info)
		}
	}()
	edit := &manifest.VersionEdit{HasLogNum: true, LogNum: nextLog}
	var mts []*memtable.MemTable
	var rangeDels []*rangedel.Set
	for _, m := range ms {
		if m.mt.Len() > 0 {
			mts = append(mts, m.mt)
		}
		rangeDels = append(rangeDels, m.mt.RangeDels())
	}
	if rds := rangedel.Merge(rangeDels...); len(mts) > 0 || rds.Len() > 0 {
		metas, parts, err := db.writeFlush(mts, rds, info.JobID)
		info.Parts = parts
		if err != nil {
			return err
		}
		info.Output = tableInfos(metas)
		for _, meta := range metas {
			edit.Added = append(edit.Added, manifest.NewTable{Level: 0, Meta: meta})
			// Opened before the install, so that
			// no read meets an unopened table and no version is held
			// after it: a version held past the install kept a table a
			// concurrent Compact replaced on disk after Compact returned.
			db.warmTable(meta.FileNum)
		}
	}
	// The edit names WAL nextLog as the oldest the store needs: its
	// directory entry durable first (the switch that created it finished,
	// see walswitch.go), so that a crash never leaves a manifest naming a
	// WAL that is gone.
	if err := db.waitWALSwitchesBefore(nextLog); err != nil {
		return err
	}
	err = db.logAndApply(edit, func() {
		db.mu.imm = slices.Clone(db.mu.imm[len(ms):])
		for _, m := range ms {
			m.flushed = true
			// Queued here, before Flush can see m flushed, so that a
			// Flush followed by Compact or Close finds the WAL's removal
			// queued.
			db.queueDeletion(db.fs.PathJoin(db.dir, walFileName(m.walNum)))
		}
		db.mu.flushing, db.mu.l0Spare = false, 0 // its tables are in current (reserveIntraL0Output)
		// Counted before Flush can see ms flushed: its caller's Metrics
		// include them.
		db.flushes.Add(uint64(len(ms)))
		if len(ms) > 1 {
			db.mergedFlushes.Add(1)
		}
		for _, a := range edit.Added {
			db.flushedBytes.Add(a.Meta.Size)
		}
		db.mu.stallCond.Broadcast()
	})
	if err != nil {
		return err
	}
	db.kickCompaction()
	return nil
}

// writeFlush writes the entries of the memtables mts (oldest first) and
// the range tombstones rds as L0 tables, split where FlushSplitBytes asks;
// a large flush writes its key ranges at once (flushRanges), as many as
// it returns in parts.
func (db *DB) writeFlush(mts []*memtable.MemTable, rds *rangedel.Set, jobID int) (metas []*base.TableMeta, parts int, err error) {
	var splits [][]byte
	if db.opts.FlushSplitBytes > 0 {
		v := db.currentVersion()
		splits = compaction.FlushSplitKeys(v.Levels, db.compactionOptions())
		v.unref()
	}
	write := func(lo, hi []byte) ([]*base.TableMeta, error) {
		its := make([]base.Iterator, len(mts))
		for i, m := range mts {
			its[i] = m.NewIter()
		}
		var it base.Iterator
		if len(its) == 1 {
			it = its[0]
		} else {
			// Sequence numbers grow from each memtable to the next, so
			// merging by internal key keeps every version in order (no
			// memtable: range tombstones only).
			it = merging.NewIter(its...)
		}
		defer it.Close() // memtable iterators hold nothing and cannot fail
		ri := &rangeIter{it: it, lo: lo, hi: hi}
		if (lo != nil || hi != nil) && !ri.First() {
			return nil, nil // a part with no entries (see flushRanges): no table
		}
		return db.writeTables(ri, rds, splits, uint64(db.opts.FlushSplitBytes), jobID, "flushing")
	}
	cuts := db.flushRanges(mts, rds)
	if len(cuts) == 0 {
		metas, err := write(nil, nil)
		return metas, 1, err
	}
	parts = len(cuts) + 1
	metas, err = db.inParallel(parts, func(i int) ([]*base.TableMeta, error) {
		var lo, hi []byte // part i is [cuts[i-1], cuts[i])
		if i > 0 {
			lo = cuts[i-1]
		}
		if i < len(cuts) {
			hi = cuts[i]
		}
		return write(lo, hi)
	})
	return metas, parts, err
}

// defaultFlushPartBytes is the memtable bytes of each key range a large
// flush writes at once, and maxFlushParts the most ranges it writes.
const (
	defaultFlushPartBytes = 32 << 20
	maxFlushParts         = 8
)

// flushRanges returns where a flush of mts cuts its output into key
// ranges written at once (none: one range). A flush of at least two
// parts' worth of memtable bytes (64 MiB: a bulk load's large memtable)
// writes parts of about 32 MiB, at most maxFlushParts, cut at user keys
// sampled from its largest memtable (memtable.SplitKeys), on up to
// MaxConcurrentCompactions goroutines. Each part is written as a flush of
// its own would be and no two parts share a user key, so L0 holds the same
// entries in tables that do not overlap, which a Compact then rewrites at
// once too (compactionParts). Range tombstones would have to be cut with
// the parts: a flush holding any is written as one range.
func (db *DB) flushRanges(mts []*memtable.MemTable, rds *rangedel.Set) [][]byte {
	if rds.Len() > 0 || db.opts.MaxConcurrentCompactions < 2 || len(mts) == 0 {
		return nil
	}
	var total int64
	largest := mts[0]
	for _, m := range mts {
		total += m.Size()
		if m.Size() > largest.Size() {
			largest = m
		}
	}
	part := db.opts.flushPartBytes
	if part <= 0 {
		part = defaultFlushPartBytes
	}
	if total < 2*part {
		return nil
	}
	return largest.SplitKeys(int(min((total+part-1)/part, maxFlushParts)))
}

// inParallel runs write(0..n-1) on up to MaxConcurrentCompactions
// goroutines and returns the tables they wrote, in the order of i. If any
// fails, it removes every table written and returns the errors, joined.
func (db *DB) inParallel(n int, write func(i int) ([]*base.TableMeta, error)) ([]*base.TableMeta, error) {
	results := make([][]*base.TableMeta, n)
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, max(1, db.opts.MaxConcurrentCompactions)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				results[i], errs[i] = write(i)
			}
		}()
	}
	wg.Wait()
	var metas []*base.TableMeta
	for _, r := range results {
		metas = append(metas, r...)
	}
	if err := errors.Join(errs...); err != nil {
		for _, m := range metas {
			_ = db.fs.Remove(db.fs.PathJoin(db.dir, tableFileName(m.FileNum)))
		}
		return nil, err
	}
	return metas, nil
}

func (db *DB) kickCompaction() {
	select {
	case db.compact.kick <- struct{}{}:
	default:
	}
}

// Flush writes the memtable to an L0 table and waits until it is durable
// there (together with every memtable queued before it).
func (db *DB) Flush() error {
	if db.closed.Load() {
		return ErrClosed
	}
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	// Counted before the memtable rotates, so that flushLoop holds back
	// none of those this Flush waits for (holdFlushLocked).
	db.mu.Lock()
	db.mu.flushWaiters++
	db.mu.Unlock()
	req := &commitReq{flush: true, wake: make(chan bool, 1)}
	err := db.commit(req)
	db.mu.Lock()
	defer db.mu.Unlock()
	defer func() { db.mu.flushWaiters-- }()
	if err != nil {
		return err
	}
	// A memtable held back before this Flush goes now. (The rotation, if
	// the memtable was not empty, woke flushLoop with both queued: they
	// are flushed together.)
	db.mu.flushCond.Signal()
	for _, m := range req.rotated {
		for !m.flushed && db.mu.bgErr == nil && !db.mu.closing {
			db.mu.stallCond.Wait()
		}
	}
	if db.mu.bgErr != nil {
		return db.mu.bgErr
	}
	if db.mu.closing {
		return ErrClosed
	}
	return nil
}

package kv

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/adaptkv/adaptkv/kv/internal/memtable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// commitReq is one writer waiting in the commit pipeline.
type commitReq struct {
	batch   *Batch
	sync    bool
	flush   bool        // switch the memtable (DB.Flush)
	rotated []*memEntry // memtables a flush request must wait for
	err     error
	wake    chan bool // false: done; true: you are the next leader
	own     Batch     // the batch of Set and Delete, reused with the request
	// group holds the requests this one commits when it leads, reused
	// with the request (nil after a group handed to the WAL syncer).
	group []*commitReq
}

// Set writes key -> value (a copy). nil options mean Sync.
func (db *DB) Set(key, value []byte, o *WriteOptions) error {
	req := getCommitReq()
	defer putCommitReq(req)
	if err := req.own.Set(key, value); err != nil {
		return err
	}
	return db.commitOne(req, &req.own, o)
}

// Delete removes key. nil options mean Sync.
func (db *DB) Delete(key []byte, o *WriteOptions) error {
	req := getCommitReq()
	defer putCommitReq(req)
	if err := req.own.Delete(key); err != nil {
		return err
	}
	return db.commitOne(req, &req.own, o)
}

// DeleteRange deletes every key in [start, end) (Pebble's semantics: the
// keys written before the call; a key written after it, or later in the
// same batch, lives). start must be below end (ErrInvalidRange). nil
// options mean Sync. The store keeps one range tombstone, whatever the
// number of keys it deletes; compactions drop the keys it covers.
func (db *DB) DeleteRange(start, end []byte, o *WriteOptions) error {
	req := getCommitReq()
	defer putCommitReq(req)
	if err := req.own.DeleteRange(start, end); err != nil {
		return err
	}
	return db.commitOne(req, &req.own, o)
}

// Apply commits the batch atomically (one WAL record; readers see all of it
// or none). nil options mean Sync. The batch may be reused after Apply
// returns.
func (db *DB) Apply(b *Batch, o *WriteOptions) error {
	// The store's state first: a batch, whatever its size, meets a closed
	// or read-only store with that error (commitOne checks again).
	if db.closed.Load() {
		return ErrClosed
	}
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	if b == nil || b.count == 0 {
		return nil
	}
	if n := b.memSize(); n > maxBatchMem {
		return fmt.Errorf("%w: %d entries, %d bytes, need %d bytes of memtable > MaxBatchSize %d",
			ErrBatchTooLarge, b.count, len(b.data), n, maxBatchMem)
	}
	req := getCommitReq()
	defer putCommitReq(req)
	return db.commitOne(req, b, o)
}

// maxBatchMem is MaxBatchSize, a variable so that tests can lower it.
var maxBatchMem int64 = MaxBatchSize

// groupLen is how many of the requests pending, from the first, make the
// next commit group: all of them, or as many as keep the memtable bytes
// their batches may take within maxBatchMem (at least one), so that a
// memtable below MemTableSize always has room for a group
// (memtable.Capacity). The others wait for the next leader.
func groupLen(pending []*commitReq) int {
	var sum int64
	for i, r := range pending {
		if r.batch == nil {
			continue
		}
		if sum += r.batch.memSize(); sum > maxBatchMem && i > 0 {
			return i
		}
	}
	return len(pending)
}

// commitOne commits b through req, after the checks every write makes.
// Neither the WAL nor the memtable keeps b's bytes (both copy), so b is
// free again when it returns.
func (db *DB) commitOne(req *commitReq, b *Batch, o *WriteOptions) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	req.batch, req.sync = b, o.sync()
	return db.commit(req)
}

// commitReqs recycles the requests of writes with their wake channels and
// their batch buffers: a request is free again once commit returned, since
// the leader touches a request for the last time when it sends on its
// channel.
var commitReqs = sync.Pool{New: func() any { return &commitReq{wake: make(chan bool, 1)} }}

// maxPooledBatch is the largest batch buffer a recycled request keeps.
const maxPooledBatch = 64 << 10

func getCommitReq() *commitReq { return commitReqs.Get().(*commitReq) }

func putCommitReq(req *commitReq) {
	own := req.own
	own.Reset()
	if cap(own.data) > maxPooledBatch {
		own = Batch{}
	}
	*req = commitReq{wake: req.wake, own: own, group: req.group}
	commitReqs.Put(req)
}

// commit runs req through group commit: the first writer to arrive becomes
// the leader and commits every request queued meanwhile as one group (one
// WAL write), then hands leadership to the first writer that queued during
// its commit. A group that must wait for an fsync (it or a group before it
// is Sync) is published by the WAL syncer instead (publishGroup), so the
// next leader writes and applies its group while the fsync runs.
func (db *DB) commit(req *commitReq) error {
	db.commits.mu.Lock()
	if db.closed.Load() {
		db.commits.mu.Unlock()
		return ErrClosed
	}
	db.commits.pending = append(db.commits.pending, req)
	if db.commits.leading {
		db.commits.mu.Unlock()
		if lead := <-req.wake; !lead {
			return req.err
		}
		db.commits.mu.Lock()
	}
	db.commits.leading = true
	// The group is copied into the leader's own buffer, so that pending
	// keeps its array for the writers that queue next: no allocation a
	// write once the buffers have grown.
	n := groupLen(db.commits.pending)
	group := append(req.group[:0], db.commits.pending[:n]...)
	rest := copy(db.commits.pending, db.commits.pending[n:])
	clear(db.commits.pending[rest:])
	db.commits.pending = db.commits.pending[:rest]
	db.commits.mu.Unlock()

	queued := false
	if p, ok := db.commitGroup(group); ok {
		queued = db.publishGroup(group, p)
	}

	switched := db.walToFinish
	db.walToFinish = nil

	db.commits.mu.Lock()
	var next *commitReq
	if len(db.commits.pending) > 0 {
		next = db.commits.pending[0]
	} else {
		db.commits.leading = false
		db.commits.cond.Broadcast()
	}
	db.commits.mu.Unlock()
	// The next leader first: its WAL write starts while the writers of
	// this group wake up (or while the syncer syncs this group).
	if next != nil {
		next.wake <- true
	}
	// A WAL switch this group made is finished once the next leader and
	// the group's writers are on their way, off their path (see
	// walswitch.go): the writer whose write filled the memtable pays for
	// it.
	if queued {
		// The group, req included, belongs to the syncer now: it wakes
		// every writer of it once the group is published or failed.
		req.group = nil
		if switched != nil {
			switched.finish(db)
		}
		<-req.wake
		return req.err
	}
	for _, r := range group {
		if r != req {
			r.wake <- false
		}
	}
	clear(group)
	req.group = group[:0]
	if switched != nil {
		switched.finish(db)
	}
	return req.err
}

// failGroup hands err to every request of group.
func failGroup(group []*commitReq, err error) {
	for _, r := range group {
		r.err = err
	}
}

// groupEnd is what publishing a written and applied commit group needs.
type groupEnd struct {
	lastSeq uint64     // the group's last sequence number
	sync    bool       // a write of the group asked for Sync
	wal     *walWriter // the WAL the group's records are in
	offset  int64      // the WAL's size after the group's records
}

// commitGroup writes the group's batches to the WAL (handed to the OS, not
// synced) and applies them to the memtable. ok says the group has batches to
// publish; on an error every request of the group holds it and ok is false.
func (db *DB) commitGroup(group []*commitReq) (end groupEnd, ok bool) {
	fail := func(err error) { failGroup(group, err) }
	if err := db.bgErrNow.Load(); err != nil {
		fail(*err)
		return end, false
	}
	if err := db.rotateForGroup(group); err != nil {
		fail(err)
		return end, false
	}

	seq := db.commits.nextSeq
	sync, batches := false, false
	for _, r := range group {
		if r.batch == nil {
			continue
		}
		batches = true
		r.batch.setSeq(seq)
		seq += uint64(r.batch.count)
		if err := db.wal.add(r.batch.data); err != nil {
			fail(db.setBGErr(fmt.Errorf("kv: WAL write: %w", err)))
			return end, false
		}
		sync = sync || r.sync
	}
	if !batches {
		return end, false // only flush requests
	}
	db.walGroups.Add(1)
	db.wal.countGroup(sync)
	if sync || !db.opts.WALBufferNoSync {
		if err := db.wal.flush(false); err != nil {
			fail(db.setBGErr(fmt.Errorf("kv: WAL write: %w", err)))
			return end, false
		}
	} else {
		if err := db.wal.finishRecords(); err != nil {
			fail(db.setBGErr(fmt.Errorf("kv: WAL write: %w", err)))
			return end, false
		}
		select {
		case db.walKick <- struct{}{}:
		default:
		}
	}
	mt := db.mu.mem.mt
	for _, r := range group {
		if r.batch == nil {
			continue
		}
		// The memtable copies keys and values: the batch stays the caller's.
		db.commits.entries = applyBatch(mt, r.batch.data, db.commits.entries)
	}
	db.commits.nextSeq = seq
	// A memtable past half its size will be flushed soon: with
	// RecordWhileRewriting absent Gets are recorded from now on, so that
	// its table is built with the keys asked meanwhile. Once per memtable
	// (OpenWindow does nothing under the other rules; it does not wait for
	// the record's lock, and a busy lock is tried again at the next group).
	if me := db.mu.mem; db.kn != nil && !me.halfFull && mt.Size() >= int64(db.opts.MemTableSize)/2 {
		me.halfFull = db.kn.OpenWindow()
	}
	return groupEnd{lastSeq: seq - 1, sync: sync, wal: db.wal, offset: db.wal.size()}, true
}

// rotateForGroup makes the memtable immutable before the group is applied
// if it is full or a request of the group is a flush, and hands each flush
// request the memtables it waits for (the current one and every older
// queued one).
func (db *DB) rotateForGroup(group []*commitReq) error {
	flush := false
	for _, r := range group {
		flush = flush || r.flush
	}
	mem := db.mu.mem // only the leader replaces db.mu.mem
	if !flush && mem.mt.Size() < int64(db.opts.MemTableSize) {
		return nil
	}
	if flush {
		db.mu.Lock()
		rotated := slices.Clone(db.mu.imm)
		db.mu.Unlock()
		if !mem.mt.Empty() {
			rotated = append(rotated, mem)
		}
		for _, r := range group {
			if r.flush {
				r.rotated = rotated
			}
		}
	}
	if mem.mt.Empty() {
		return nil
	}
	return db.rotateMemtable()
}

// publishGroup makes a written and applied group visible: at once if it
// needs no fsync and no group before it waits for one (readers see
// sequence numbers up to end.lastSeq from then on), else by queueing it for
// the WAL syncer (walSyncLoop), which publishes groups in order. It reports
// whether the group was queued; the syncer then wakes its writers.
//
// A group is published only once durable if it or any group before it is
// Sync, as in Pebble: no reader sees a Sync write that a crash could take
// back, and no later write becomes visible before it. After a background
// error (a failed fsync) no group is published: its writers get the error.
func (db *DB) publishGroup(group []*commitReq, end groupEnd) bool {
	q := &db.walSync
	q.mu.Lock()
	defer q.mu.Unlock()
	if !end.sync && len(q.queue) == 0 && !q.busy {
		// An fsync of a group before this one may have failed while this
		// one was written (the syncer is done with it, so the queue is
		// empty): then the group follows a write that may not be durable,
		// and publishing it would show that write too. Its writers get the
		// error, as the syncer's would (syncRound).
		if err := db.bgErrNow.Load(); err != nil {
			failGroup(group, *err)
			return false
		}
		db.lastSeq.Store(end.lastSeq)
		return false
	}
	q.queue = append(q.queue, syncGroup{group: group, end: end})
	if len(q.queue) == 1 {
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// syncGroup is a commit group queued for the WAL syncer.
type syncGroup struct {
	group []*commitReq
	end   groupEnd
}

// walSyncLoop is the WAL syncer: it takes every group queued for it, fsyncs
// the WAL once for all of them if any is Sync, publishes them and wakes
// their writers, and starts over at once if more were queued meanwhile. So
// fsyncs run back to back while leaders write and apply the next groups
// (Pebble's LogWriter flush loop syncs off the writers' path the same
// way; docs/ARCHITECTURE.md, "Group commit and the WAL"). Only the commit
// leader queues groups, and it waits for the queue to drain before it
// closes a WAL (drainWALSyncs), so the groups of one round share a WAL.
//
// It yields its P before each round (runtime.Gosched). The writers a round
// wakes wait in the syncer's run queue, the last one woken in the slot the
// scheduler runs next; that one commits at once and wakes the syncer into
// the same slot, and the syncer's fsync then holds the P with the others
// still queued behind it. With the other P busy (a flush or compaction on
// two cores) the pair took turns for up to 10 ms, until the runtime
// preempted them, one write per fsync (traced: rounds of 1 write for
// 15 ms during a flush, where rounds of 16 ran before). Yielding first
// lets the queued writers commit, so that the round takes all their groups.
func (db *DB) walSyncLoop() {
	defer db.wg.Done()
	q := &db.walSync
	var round []syncGroup
	for {
		select {
		case <-q.kick:
		case <-db.closeCh:
			return
		}
		for {
			runtime.Gosched()
			q.mu.Lock()
			round, q.queue = q.queue, round[:0]
			q.busy = len(round) > 0
			q.mu.Unlock()
			if len(round) == 0 {
				break
			}
			err := db.syncRound(round)
			q.mu.Lock()
			q.busy = false
			q.cond.Broadcast()
			q.mu.Unlock()
			for _, g := range round {
				for _, r := range g.group {
					r.err = err
					r.wake <- false
				}
			}
			clear(round)
		}
	}
}

// syncRound fsyncs the WAL for round if any of its groups is Sync and
// publishes the round's last sequence number. After a WAL error (this
// fsync's or an earlier one's) nothing is published: the round's groups
// follow a write that may not be durable.
func (db *DB) syncRound(round []syncGroup) error {
	if err := db.bgErrNow.Load(); err != nil {
		return *err
	}
	last := round[len(round)-1].end
	if slices.ContainsFunc(round, func(g syncGroup) bool { return g.end.sync }) {
		// The WALs before this one durable, and this one's name, first: a
		// Sync write is durable with every write before it.
		if err := db.waitWALSwitchesForSync(); err != nil {
			return err
		}
		if err := last.wal.sync(); err != nil {
			return db.setBGErr(fmt.Errorf("kv: WAL sync: %w", err))
		}
		db.walSyncs.Add(1)
		last.wal.synced.Store(last.offset)
	}
	db.lastSeq.Store(last.lastSeq)
	return nil
}

// drainWALSyncs waits until the WAL syncer has published every queued
// group. The commit leader calls it before it switches WALs, Close before
// it closes the WAL.
func (db *DB) drainWALSyncs() {
	q := &db.walSync
	q.mu.Lock()
	for len(q.queue) > 0 || q.busy {
		q.cond.Wait()
	}
	q.mu.Unlock()
}

// rotateMemtable queues the mutable memtable for flushing and starts a new
// one with a new WAL, stalling while too many memtables wait for a flush.
func (db *DB) rotateMemtable() error {
	db.mu.Lock()
	if len(db.mu.imm) >= db.opts.MaxImmutableMemTables && db.mu.bgErr == nil && !db.mu.closing {
		start := time.Now()
		if f := db.events.WriteStallBegin; f != nil {
			db.mu.Unlock()
			f(WriteStallBeginInfo{Reason: "memtable count limit reached"})
			db.mu.Lock()
		}
		for len(db.mu.imm) >= db.opts.MaxImmutableMemTables && db.mu.bgErr == nil && !db.mu.closing {
			db.mu.stallCond.Wait()
		}
		db.writeStalls.Add(1)
		db.writeStallNanos.Add(int64(time.Since(start)))
		if f := db.events.WriteStallEnd; f != nil {
			db.mu.Unlock()
			f()
			db.mu.Lock()
		}
	}
	err := db.mu.bgErr
	db.mu.Unlock()
	if err != nil {
		return err
	}
	db.drainWALSyncs()
	// The next memtable's chunks before the next WAL: the WAL's
	// preparation, started after it, is the first of the two to run.
	db.prefillMemtable()
	num := db.allocFileNum()
	if err := db.rotateWAL(num); err != nil {
		return err
	}
	db.mu.Lock()
	db.mu.imm = append(slices.Clone(db.mu.imm), db.mu.mem)
	db.mu.mem = &memEntry{mt: memtable.NewRecycled(db.memRecycler), walNum: num}
	oldRS := db.newReadStateLocked()
	db.mu.flushCond.Signal()
	db.mu.Unlock()
	releaseReadState(oldRS)
	return nil
}

// prefillMemtable has a goroutine of its own fault in the chunks of the
// next memtable ahead of the writers (memtable.Recycler.Prefill), unless
// one is at it or the recycler keeps a memtable's worth already: until the
// first flushes hand their memtables' chunks back, each chunk a memtable
// takes is fresh memory, and writing it faults on the writer's path (a
// page of 4 KiB values is one write, and one fault each). Open starts it,
// and every memtable rotation before it makes the new memtable. The
// memory is what the recycler keeps anyway once as many memtables have
// been flushed. It prefills at most prefillMaxBytes.
func (db *DB) prefillMemtable() {
	want := min(memtableChunkBytes(db.opts.MemTableSize), prefillMaxBytes)
	if db.memRecycler.Held() >= want || !db.prefilling.CompareAndSwap(false, true) {
		return
	}
	db.wg.Add(1)
	go func() {
		defer db.wg.Done()
		defer db.prefilling.Store(false)
		db.memRecycler.Prefill(want)
	}()
}

// prefillMaxBytes bounds what prefillMemtable faults in ahead. The rest of
// a larger memtable faults on its writers' path: with a bulk load's 485
// MiB memtable (kvbench -records 5000000), prefilling all of it at Open
// and again at its rotation took the CPU and memory of the flush and of
// the compaction after it.
const prefillMaxBytes = 64 << 20

// memtableChunkBytes is the most chunk bytes a memtable of size bytes takes:
// Size counts the arena bytes its entries use, and a memtable ends up to
// one batch past size, in the last chunk's spare room or a new one.
func memtableChunkBytes(size int) int { return size + 2*memtable.ChunkSize(size) }

// walWriteBackLoop writes the WAL buffer to the OS whenever a commit group
// left records in it (Options.WALBufferNoSync), off the writers' path: the
// leader keeps appending to the buffer while the write runs. A write error
// stops the store's writes as a WAL write error in a commit would.
func (db *DB) walWriteBackLoop() {
	defer db.wg.Done()
	for {
		select {
		case <-db.walKick:
		case <-db.closeCh:
			return
		}
		if err := db.walNow.Load().writeBack(); err != nil {
			db.setBGErr(fmt.Errorf("kv: WAL write: %w", err))
			return
		}
	}
}

// walPreallocateSize is the WAL's preallocation step: 110% of the memtable
// size, Pebble's choice, so a WAL usually needs one step.
func (db *DB) walPreallocateSize() int { return db.opts.MemTableSize + db.opts.MemTableSize/10 }

// mapsWAL says whether WALs are to be mapped (Options.DisableWALMapping):
// only files of the OS file system can be, and only the default NoSync
// mode gains. With WALBufferNoSync the writers already make no system
// call, and the background write(2) is faster than a mapping: it pays for
// the page cache's fresh pages on its own goroutine, where a mapping makes
// the writer pay for them (on this project's 2-core VM, a first write to a
// page cost about 9 us).
func (db *DB) mapsWAL() bool {
	return !db.opts.DisableWALMapping && !db.opts.WALBufferNoSync && db.fs == vfs.Default
}

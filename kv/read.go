package kv

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/kv/internal/memtable"
	"github.com/adaptkv/adaptkv/kv/internal/striped"
)

// readState is what reads see: the memtables (newest first) and a
// referenced version. The DB keeps the current one (db.mu.rs) and replaces it
// whenever a memtable switches or a version is installed; a read takes a
// reference instead of copying the structures.
//
// The references also count the reads in flight, for Close: a read state's
// references are the DB's own (while it is db.mu.rs), one per open iterator
// (also counted in iters) and one per Get or iterator construction in
// flight. Close stops new reads (db.mu.closing), then waits until every live
// read state (db.mu.liveRS) holds no reference of the last kind, at no cost to
// the read path beyond the reference it takes anyway.
type readState struct {
	// refs is striped (package striped): every Get takes and drops one,
	// and a single shared word would make concurrent Gets contend.
	refs  striped.RefCount
	dbRef striped.Ref  // the DB's own reference, dropped by retire
	iters atomic.Int32 // references held by open iterators
	mems  []*memtable.MemTable
	v     *version
}

// readView is a readState at a sequence number: versions with Seq < seq
// are visible.
type readView struct {
	*readState
	seq uint64
	ref striped.Ref
}

// release drops the view's reference.
func (v readView) release() { v.drop(v.ref) }

// loadReadState returns a referenced view of the current state. seq 0 means
// the latest state: an implicit snapshot, not registered with compactions.
//
// The pin takes no lock: it loads the current state (db.rsNow), takes a
// striped reference unless the state was already retired (its count is
// closed when db.mu.rs moves on), and, for an implicit snapshot, reads lastSeq
// and then checks that the state is still current, retrying otherwise. So
// the sequence number is read after the pin with no memtable switch or
// version install in between,
// as if both happened in one critical section of db.mu (as in Pebble's
// loadReadState, which pins under a read lock and then reads the visible
// sequence number). Invariant: every entry with a sequence number <= lastSeq
// read here is in one of rs.mems or in a table of rs.v, and rs.v holds no
// entry above it, so the newest version that compactions kept of any key is
// visible:
//   - the commit leader inserts a group into db.mu.mem's memtable, then
//     it or the WAL syncer publishes lastSeq; the leader switches memtables
//     (rotateMemtable) only before inserting a group and after the syncer
//     published every group queued, under db.mu, together with a new
//     db.mu.rs. So the
//     memtable of any published entry is db.mu.mem or in db.mu.imm of the db.mu.rs
//     current when lastSeq was read; the check after the read makes that the
//     pinned one (a switch before the read publishes a new db.rsNow before
//     the group's publish, and the check sees it);
//   - db.mu.imm holds only published groups, and a flush moves one from db.mu.imm
//     to a table of the version in one critical section (logAndApply's
//     install, which also replaces db.mu.rs): the pinned state has the memtable
//     or the table, and its tables hold only entries published before it was
//     pinned.
//
// Reading lastSeq first (before the pin) breaks this: a newer version
// written, flushed and compacted in between replaces the one the reader
// may see with one it may not (compactions keep only the newest version
// above the oldest registered snapshot), and the key seems absent.
//
// After Close began it returns ErrClosed: Close sets closingNow and then
// counts the references (waitReads); the pin takes its reference and then
// reads closingNow, so one of the two sees the other.
func (db *DB) loadReadState(seq uint64) (readView, error) {
	if db.testHookBeforePin != nil {
		db.testHookBeforePin()
	}
	for {
		rs := db.rsNow.Load()
		ref, ok := rs.refs.TryAcquire()
		if !ok {
			continue // retired between the load and the reference
		}
		if db.closingNow.Load() {
			rs.drop(ref)
			return readView{}, ErrClosed
		}
		if seq != 0 {
			return readView{rs, seq, ref}, nil
		}
		s := db.lastSeq.Load() + 1
		if db.rsNow.Load() != rs {
			rs.drop(ref)
			continue
		}
		return readView{rs, s, ref}, nil
	}
}

// drop drops a reference; the last one of a retired state frees it.
func (rs *readState) drop(ref striped.Ref) { rs.refs.Release(ref) }

// free forgets a retired state no one references (refs' OnFree), and
// drops its references to its memtables and version.
func (rs *readState) free() {
	db := rs.v.db
	db.mu.Lock()
	delete(db.mu.liveRS, rs)
	db.mu.Unlock()
	for _, mt := range rs.mems {
		mt.Unref()
	}
	rs.v.unref()
}

// retire drops the DB's own reference of a state that is no longer db.mu.rs:
// no new reference is taken, and the last one frees it.
func (rs *readState) retire() {
	rs.refs.Close()
	rs.drop(rs.dbRef)
}

// readsInFlight reports whether a Get or an iterator construction holds a
// read state (see readState).
func (db *DB) readsInFlight() bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	for rs := range db.mu.liveRS {
		n := rs.refs.Held() - int64(rs.iters.Load())
		if rs == db.mu.rs {
			n-- // the DB's own reference
		}
		if n > 0 {
			return true
		}
	}
	return false
}

// waitReads waits until no Get or iterator construction is in flight; the
// caller has set db.mu.closing, so no new one starts. Reads are short (one
// may read a filter's remote representation to adapt), so it yields, then
// sleeps.
func (db *DB) waitReads() {
	for spin := 0; db.readsInFlight(); spin++ {
		if spin < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(min(time.Duration(spin-63)*10*time.Microsecond, time.Millisecond))
		}
	}
}

// newReadStateLocked makes db.mu.rs reflect db.mu.mem, db.mu.imm and db.mu.current and
// returns the previous one, which the caller releases after unlocking db.mu.
func (db *DB) newReadStateLocked() *readState {
	rs := &readState{v: db.mu.current}
	rs.v.ref()
	rs.refs.OnFree(rs.free)
	rs.dbRef = rs.refs.Acquire()
	db.mu.liveRS[rs] = struct{}{}
	rs.mems = make([]*memtable.MemTable, 0, 1+len(db.mu.imm))
	rs.mems = append(rs.mems, db.mu.mem.mt)
	for i := len(db.mu.imm) - 1; i >= 0; i-- {
		rs.mems = append(rs.mems, db.mu.imm[i].mt)
	}
	// The read states listing a memtable hold it: the current one lists
	// every memtable still written or flushed, so a memtable's memory is
	// recycled only once it is flushed and the last read that could see
	// it has finished (memtable.Recycler).
	for _, mt := range rs.mems {
		mt.Ref()
	}
	old := db.mu.rs
	db.mu.rs = rs
	db.rsNow.Store(rs)
	return old
}

func releaseReadState(rs *readState) {
	if rs != nil {
		rs.retire()
	}
}

// Get returns a copy of the value of key, or an error wrapping ErrNotFound.
func (db *DB) Get(key []byte) ([]byte, error) { return db.get(key, 0) }

func (db *DB) get(key []byte, seq uint64) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if db.closed.Load() {
		return nil, ErrClosed
	}
	db.gets.Add(1) // striped: every Get counts
	// In flight while it holds rs: Close waits for this read before it
	// closes the tables (or the read fails here with ErrClosed).
	rs, err := db.loadReadState(seq)
	if err != nil {
		return nil, err
	}
	defer rs.release()
	return db.getIn(rs, key)
}

// getIn looks key up in the view rs: the memtables, then the tables, each
// through its filter.
func (db *DB) getIn(rs readView, key []byte) ([]byte, error) {
	// rd is the newest range tombstone covering key that the read sees,
	// among the sources passed so far (0: none). Sources go newest first,
	// and a range tombstone sits no lower than the versions it deletes
	// (its table's bounds include it), so when a version turns up, every
	// tombstone that could delete it has been passed.
	var rd uint64
	for _, mt := range rs.mems {
		if s := mt.RangeDels(); s != nil {
			rd = max(rd, s.Covering(key, rs.seq))
		}
		if v, kind, vseq, ok := mt.GetVersion(key, rs.seq); ok {
			if kind == base.KeyKindSet && vseq >= rd {
				return append(make([]byte, 0, len(v)), v...), nil
			}
			return nil, ErrNotFound
		}
	}
	// L0 newest first: the sublevels from the top, in each the one table
	// whose range may hold key (see manifest.L0Sublevels).
	probed := false // some table was consulted: an absent key is recorded
	for s := len(rs.v.L0Sublevels) - 1; s >= 0; s-- {
		ts := rs.v.L0Sublevels[s]
		i := rs.v.L0Search[s].Find(ts, key)
		if i == len(ts) || bytes.Compare(ts[i].Smallest.UserKey, key) > 0 {
			continue
		}
		probed = true
		v, done, err := db.getFromTable(ts[i], key, rs.seq, &rd)
		if done || err != nil {
			return db.gotFromTable(key, v, err)
		}
	}
	// Then one table per level (two if a key's versions end one table and
	// start the next, which the compaction package never produces).
	for l, ts := range rs.v.BelowL0 {
		i := rs.v.BelowL0Search[l].Find(ts, key)
		for ; i < len(ts) && bytes.Compare(ts[i].Smallest.UserKey, key) <= 0; i++ {
			probed = true
			v, done, err := db.getFromTable(ts[i], key, rs.seq, &rd)
			if done || err != nil {
				return db.gotFromTable(key, v, err)
			}
			if !bytes.Equal(ts[i].Largest.UserKey, key) {
				break
			}
		}
	}
	if probed {
		db.recordAbsent(key)
	}
	return nil, ErrNotFound
}

// errRangeDeleted is getFromTable's answer for a version a range tombstone
// deletes.
var errRangeDeleted = fmt.Errorf("%w: deleted by a range", ErrNotFound)

// gotFromTable ends a Get that a table answered: a key a range deletion
// removed is absent for the known-negative record, as a key no table
// holds is.
func (db *DB) gotFromTable(key, v []byte, err error) ([]byte, error) {
	if err == errRangeDeleted {
		db.recordAbsent(key)
		return nil, ErrNotFound
	}
	return v, err
}

// getFromTable looks key up in one table (filter first; the table counts
// and adapts), after raising *rd to the table's newest range tombstone
// covering key (whatever the filter says: a filter speaks of point keys
// only). done reports that a version was found: a value, or a tombstone
// (then the error is ErrNotFound), or one deleted by *rd (errRangeDeleted).
func (db *DB) getFromTable(t *base.TableMeta, key []byte, seq uint64, rd *uint64) (value []byte, done bool, err error) {
	h, err := db.tc.getTable(t)
	if err != nil {
		return nil, true, err
	}
	defer db.tc.release(h)
	if s := h.r.RangeDels(); s != nil {
		*rd = max(*rd, s.Covering(key, seq))
	}
	v, kind, vseq, found, err := h.r.GetVersion(key, seq)
	if err != nil {
		return nil, true, err
	}
	if !found {
		return nil, false, nil
	}
	if vseq < *rd {
		return nil, true, errRangeDeleted
	}
	if kind == base.KeyKindSet {
		if v == nil {
			v = []byte{}
		}
		return v, true, nil
	}
	return nil, true, ErrNotFound
}

// Snapshot is a consistent point-in-time view: Get and NewIter see the
// store as it was when the snapshot was taken. Close it to let compactions
// drop the versions it keeps alive.
type Snapshot struct {
	db     *DB
	seq    uint64
	closed bool
}

// NewSnapshot takes a snapshot of the current state.
func (db *DB) NewSnapshot() *Snapshot {
	s := &Snapshot{db: db}
	db.mu.Lock()
	s.seq = db.lastSeq.Load() + 1
	db.mu.snapshots[s] = struct{}{}
	db.mu.Unlock()
	return s
}

// Get reads key as of the snapshot.
func (s *Snapshot) Get(key []byte) ([]byte, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	return s.db.get(key, s.seq)
}

// NewIter returns an iterator over the snapshot.
func (s *Snapshot) NewIter(o *IterOptions) (*Iterator, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	return s.db.newIter(o, s.seq)
}

func (s *Snapshot) isClosed() bool {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	return s.closed
}

// Close releases the snapshot. Closing twice returns ErrClosed.
func (s *Snapshot) Close() error {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	delete(s.db.mu.snapshots, s)
	return nil
}

// snapshotSeqs returns the live snapshots' sequence numbers, ascending.
func (db *DB) snapshotSeqs() []uint64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	seqs := make([]uint64, 0, len(db.mu.snapshots))
	for s := range db.mu.snapshots {
		seqs = append(seqs, s.seq)
	}
	slices.Sort(seqs)
	return seqs
}

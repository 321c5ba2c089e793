package kv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/internal/atomicfile"
	"github.com/adaptkv/adaptkv/internal/directio"
	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/adaptkv/adaptkv/kv/internal/knownneg"
	"github.com/adaptkv/adaptkv/kv/internal/memtable"
	"github.com/adaptkv/adaptkv/kv/internal/striped"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// maxManifestSize is the size at which the manifest is rewritten as a single
// snapshot edit in a new file.
const maxManifestSize = 1 << 20

// DB is an open store. All methods are safe for concurrent use.
//
// Its state is grouped below by the lock that guards it, as sub-structs
// named for what they hold (commits, mu, refs, deletion, manifest,
// compact), as Pebble's d.mu and d.mu.compact. The lock order (a goroutine
// holding one may take only those after it) is:
//
//	compact.manualMu -> compact.mu -> manifest.mu -> mu -> refs.mu -> deletion.mu
//
// with tableCache.mu, the memtable's insert lock (and the memtable
// recycler's, taken under it or alone), the WAL buffer's locks and the
// known-negative sketch's lock as leaves, taken under any of these and
// holding nothing else. walSync.mu is a leaf too (the leader takes it to
// publish or queue a group, the syncer to take a round). commits.mu stands
// apart: it guards only the commit queue and is never held while another
// lock is taken (the commit leader writes the WAL and the memtable, and
// takes mu, after releasing it). Reads
// take no lock at all (see loadReadState). docs/ARCHITECTURE.md,
// "Concurrency in the store", says why each piece is where it is.
type DB struct {
	dir    string
	opts   Options
	fs     vfs.FS
	policy filterpolicy.Policy
	lock   io.Closer
	tc     *tableCache

	// readFS and compactFS read tables (Options.DirectReads): readFS for
	// the table cache (Gets, iterators, filter fixes; its reads are
	// Metrics.TableReads), compactFS for compaction inputs.
	readFS, compactFS *directio.FS

	closed      atomic.Bool
	lastSeq     atomic.Uint64 // last sequence number applied to the memtable (visible)
	nextFileNum atomic.Uint64

	// commits is the commit pipeline's queue (group commit, write.go).
	commits struct {
		mu      sync.Mutex // guards pending and leading
		cond    *sync.Cond // signalled when leadership ends (on mu)
		pending []*commitReq
		leading bool
		// nextSeq is the sequence number of the next batch entry; only
		// the leader uses it. Entries below it may not be published yet
		// (lastSeq) while they wait for the WAL syncer.
		nextSeq uint64
		// entries is the leader's scratch space for a batch's point
		// entries (applyBatch).
		entries []memtable.Entry
	}
	// walSync is the WAL syncer's queue of commit groups waiting for an
	// fsync or for a group before them (walSyncLoop, write.go).
	walSync struct {
		mu    sync.Mutex // guards queue and busy
		cond  *sync.Cond // signalled when the syncer finishes a round (on mu)
		queue []syncGroup
		busy  bool // the syncer is working on a round taken from queue
		kick  chan struct{}
	}
	wal *walWriter // used only by the commit leader
	// walNext is the WAL being prepared for the next memtable (walnext.go);
	// used only by the commit leader, and by Close after the last one.
	walNext *walPrep
	// walPending are the WAL switches whose second half may still run, and
	// those that failed (walswitch.go): the WAL syncer and Close wait for
	// them. list is copied on write.
	walPending struct {
		mu   sync.Mutex
		list []*walSwitch
	}
	// walToFinish is a switch the commit leader made during its group: it
	// finishes it once it has handed leadership on (commit).
	walToFinish *walSwitch
	// switchFinishing and switchNamed, if set (tests), are called as a
	// switch's second half begins and once its directory sync is done.
	switchFinishing, switchNamed func()
	// walNow mirrors wal for the WAL write-back goroutine of
	// Options.WALBufferNoSync, which walKick wakes (see walWriteBackLoop).
	walNow  atomic.Pointer[walWriter]
	walKick chan struct{}

	// memRecycler keeps the memory of flushed memtables that no read
	// state lists any more, for the next memtables (memtable.Recycler).
	memRecycler *memtable.Recycler
	// prefilling is set while a goroutine prefills memRecycler
	// (prefillMemtable).
	prefilling atomic.Bool

	// mu guards the memtables, the tree and what reads see, and the
	// store's closing and sticky errors.
	mu struct {
		sync.Mutex
		mem     *memEntry
		imm     []*memEntry // full memtables, oldest first; replaced, never mutated
		current *version
		rs      *readState              // what reads see; see loadReadState
		liveRS  map[*readState]struct{} // read states with references
		logNum  uint64
		// snapshots are the open Snapshots.
		snapshots  map[*Snapshot]struct{}
		closing    bool
		bgErr      error // sticky error of the WAL or manifest: writes fail
		compactErr error // last background compaction error
		// flushing is set while flushLoop writes and installs a flush
		// (from before its tables take file numbers until they are in
		// current, or it failed): an intra-L0 compaction may take an
		// output number then only if it is l0Spare (reserveIntraL0Output).
		flushing bool
		// l0Spare, while flushing, is a file number the flush took before
		// its tables' and left for one intra-L0 output (0: taken).
		l0Spare uint64
		// flushWaiters counts the Flush calls waiting: no memtable is
		// held back for a merged flush then (holdFlushLocked).
		flushWaiters int
		// held is the memtable flushLoop holds for a merged flush;
		// heldQuietArmed: a quiet check of it is pending; heldRelease:
		// that check found writes paused with L0 shallow, so it goes
		// alone (armHeldReleaseLocked).
		held                        *memEntry
		heldQuietArmed, heldRelease bool
		flushCond                   *sync.Cond
		stallCond                   *sync.Cond // signalled when a flush finishes or bgErr is set
	}
	// rsNow mirrors mu.rs and closingNow mirrors mu.closing for the
	// lock-free pin of loadReadState; both are written under mu with their
	// mirror. bgErrNow points at mu.bgErr once it is set, for the commit
	// leader's check without mu (bgErr never changes after it is set).
	rsNow      atomic.Pointer[readState]
	closingNow atomic.Bool
	bgErrNow   atomic.Pointer[error]
	events     EventListener // Options.EventListener (or Logger's); fields may be nil
	jobIDs     atomic.Int64

	// refs counts, per table, the versions that hold it.
	refs struct {
		mu    sync.Mutex
		count map[uint64]int
	}

	// deletion is the queue of obsolete files deleteLoop removes
	// (deleter.go), and orders file deletion against Close releasing the
	// directory.
	deletion struct {
		mu              sync.Mutex
		cond            *sync.Cond    // signals queue, released and removed changes
		queue           []string      // paths not yet removed
		queued, removed uint64        // paths ever queued, and removed
		released        bool          // Close released the directory: queue no file
		done            chan struct{} // closed when deleteLoop returns
	}

	// manifest is the manifest file; mu serializes its writes and the
	// version installs that follow them (logAndApply).
	manifest struct {
		mu sync.Mutex
		w  *manifestWriter
	}

	// compact is the compaction schedule (compact.go).
	compact struct {
		// manualMu is held by the manual Compact running (one at a time),
		// and by Close to wait for it.
		manualMu sync.Mutex
		// mu guards the fields below: the tables of running compactions
		// and their count. It is held only to pick and to book-keep, never
		// while a compaction runs.
		mu      sync.Mutex
		cond    *sync.Cond // signalled when a compaction ends (on mu)
		busy    map[uint64]bool
		running int // compactions running (background and manual)
		manual  int // manual Compact calls: no background compaction starts
		kick    chan struct{}
	}
	closeCh chan struct{}
	wg      sync.WaitGroup

	// kn is the record of known negatives (nil: Options.KnownNegatives < 0);
	// knErr why the saved one could not be loaded. See knownneg.go.
	kn    *knownneg.Sketch
	knErr error
	// recordGets: absent Gets are counted in kn (Options.RecordAbsent).
	recordGets bool

	gets                 striped.Counter // every Get adds one: striped
	flushes, compactions atomic.Uint64
	mergedFlushes        atomic.Uint64 // flushes of several memtables
	tableMoves           atomic.Uint64 // compactions that moved a table (not counted in compactions)
	intraL0Compactions   atomic.Uint64 // of compactions, those within L0
	// Table bytes written by flushes, and read (inputs) and written by
	// compactions.
	flushedBytes, compactedReadBytes, compactedBytes atomic.Uint64
	// preAdaptChecks and preAdaptations count the known negatives new
	// tables' filters checked and fixed as they were built.
	preAdaptChecks, preAdaptations atomic.Uint64
	flushNanos, compactNanos       atomic.Int64  // time spent in each
	walGroups, walSyncs            atomic.Uint64 // commit groups written, fsyncs (tests)
	// Writer stalls for a queued flush, and the time they took.
	writeStalls     atomic.Uint64
	writeStallNanos atomic.Int64
	// WAL switches, their second halves' time, and the waits of writers
	// for a second half still running (Metrics.WALSwitches).
	walSwitches, walSwitchWaits         atomic.Uint64
	walSwitchSyncNanos, walSwitchWaitNs atomic.Int64
	walPrepareWaits                     atomic.Uint64
	walPrepareWaitNs                    atomic.Int64

	// testHookCompaction, if set (by tests, under compact.mu), runs at the
	// start of each background compaction, with its plan booked.
	testHookCompaction func(*compaction.Plan)

	// testHookBeforePin, if set (by tests, before any read), runs in
	// loadReadState before the read state is pinned.
	testHookBeforePin func()
	// heldQuiet is how long writes pause before a held memtable goes
	// alone (the constant heldQuiet; tests set it under mu).
	heldQuiet time.Duration
}

type memEntry struct {
	mt      *memtable.MemTable
	walNum  uint64
	flushed bool // under db.mu
	// halfFull: the memtable passed half its size, and opened the known
	// negatives' recording window (commitGroup); only the leader uses it.
	halfFull bool
}

// openTableFS sets up the file systems tables are read through, checking
// with DirectReads that the store's directory takes O_DIRECT.
func (db *DB) openTableFS() error {
	direct := db.opts.DirectReads
	if direct {
		if err := directio.Check(db.fs.PathJoin(db.dir, lockFileName)); err != nil {
			return fmt.Errorf("%w: DirectReads: %w", ErrInvalidOptions, err)
		}
	}
	var err error
	if db.readFS, err = directio.New(db.fs, direct, nil); err != nil {
		return fmt.Errorf("%w: DirectReads: %w", ErrInvalidOptions, err)
	}
	db.compactFS, err = directio.New(db.fs, direct, nil)
	return err
}

// Open opens (creating it if needed, unless ReadOnly) the store in dir.
// Recovery replays the WALs into memtables of Options.MemTableSize and
// flushes each to an L0 table; see the package doc for the durability and
// corruption policy.
func Open(dir string, opts *Options) (*DB, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	policy := o.Filter
	if policy == nil {
		policy, err = filterpolicy.ByName(o.FilterPolicy)
		if err != nil {
			return nil, fmt.Errorf("kv: filter policy %q: %w", o.FilterPolicy, err)
		}
	}
	lock, err := lockDir(o.FS, dir, o.ReadOnly)
	if err != nil {
		return nil, err
	}
	db := newDB(dir, o, policy, lock)
	if err := db.openTableFS(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	db.initSync()
	go db.deleteLoop()
	// The table cache owns the block cache's reference (see tableCache).
	db.tc = newTableCache(db.readFS, dir, pebble.NewCache(o.BlockCacheSize), o.MaxOpenFiles, o.ReadOnly)
	if policy.Adaptive() && o.RemoteCacheSize > 0 {
		db.tc.useRemoteCache(o.RemoteCacheSize)
	}
	db.openKnownNegatives() // before recovery: its flush uses them
	if db.kn != nil {       // before any table is opened
		db.setFixGate()
	}
	if !o.FixInline {
		db.tc.startFixes()
	}
	if err := db.recover(); err != nil {
		db.abandonOpen()
		return nil, err
	}
	db.commits.nextSeq = db.lastSeq.Load() + 1
	if !o.ReadOnly {
		// The options the store runs with, for people and tools (Open
		// never reads it; ParseOptions does): best effort, since a store
		// that cannot write it loses nothing.
		_ = atomicfile.Write(o.FS, o.FS.PathJoin(dir, optionsFileName), o.FS.PathJoin(dir, optionsFileName+".tmp"), []byte(o.String()))
		db.startBackground()
	}
	db.wg.Add(1)
	go db.warmLiveTables()
	return db, nil
}

// lockDir creates dir if it does not exist (unless readOnly) and takes its
// lock.
func lockDir(fs vfs.FS, dir string, readOnly bool) (io.Closer, error) {
	if !readOnly {
		if _, err := fs.Stat(dir); errors.Is(err, os.ErrNotExist) {
			if err := fs.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			// Make the new directory's entry durable in its parent.
			if err := syncDir(fs, fs.PathDir(dir)); err != nil {
				return nil, err
			}
		}
	}
	lock, err := fs.Lock(fs.PathJoin(dir, lockFileName))
	if err != nil {
		if _, serr := fs.Stat(dir); serr != nil {
			return nil, fmt.Errorf("kv: open %s: %w", dir, serr)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrLocked, dir, err)
	}
	return lock, nil
}

// newDB returns the DB of a store whose directory Open holds the lock of,
// with its event listener chosen.
func newDB(dir string, o Options, policy filterpolicy.Policy, lock io.Closer) *DB {
	db := &DB{
		dir: dir, opts: o, fs: o.FS, policy: policy, lock: lock,
		walKick:   make(chan struct{}, 1),
		closeCh:   make(chan struct{}),
		heldQuiet: heldQuiet,
		// Room for the chunks of every memtable writers may fill before
		// they stall (memtableChunkBytes each). A flush of several queued
		// memtables frees them at once, and the writes that fill the next
		// ones would otherwise zero and fault in fresh chunks on the
		// writer's path.
		memRecycler: memtable.NewRecycler(o.MemTableSize, (o.MaxImmutableMemTables+1)*memtableChunkBytes(o.MemTableSize)),
	}
	switch {
	case o.EventListener != nil:
		db.events = *o.EventListener
	case o.Logger != nil:
		db.events = MakeLoggingEventListener(o.Logger)
	}
	return db
}

// initSync makes the DB's maps, condition variables and channels.
func (db *DB) initSync() {
	db.refs.count = make(map[uint64]int)
	db.mu.snapshots = make(map[*Snapshot]struct{})
	db.mu.liveRS = make(map[*readState]struct{})
	db.compact.busy = make(map[uint64]bool)
	db.compact.kick = make(chan struct{}, 1)
	db.commits.cond = sync.NewCond(&db.commits.mu)
	db.walSync.cond = sync.NewCond(&db.walSync.mu)
	db.walSync.kick = make(chan struct{}, 1)
	db.mu.flushCond = sync.NewCond(&db.mu)
	db.mu.stallCond = sync.NewCond(&db.mu)
	db.compact.cond = sync.NewCond(&db.compact.mu)
	db.deletion.cond = sync.NewCond(&db.deletion.mu)
	db.deletion.done = make(chan struct{})
}

// setFixGate hands the table cache the gate of Options.FixRule, which
// reads the record of known negatives.
func (db *DB) setFixGate() {
	switch db.opts.FixRule {
	case FixRepeated:
		db.tc.fixGate = db.fixRepeated
	case FixAuto:
		db.tc.fixGate = db.fixAuto
	case FixCached:
		// Without DirectReads a key's return to the cache fixes its false
		// positive; with it, where a fix is a device read, only a false
		// positive of a key the record holds in a slot is fixed, and a
		// return to the cache takes the key its slot (see Options.FixRule).
		db.tc.fixGate, db.tc.cacheFPs = db.fixRepeated, true
		db.tc.fixReturning = !db.opts.DirectReads
		if db.opts.DirectReads {
			db.tc.fixGate, db.tc.cachedReturn = db.fixHeld, db.cachedReturn
		}
	}
}

// abandonOpen closes what a failed recovery opened (the files it created
// stay: the next Open deletes what no manifest refers to) and the lock.
func (db *DB) abandonOpen() {
	if db.wal != nil {
		db.wal.close()
	}
	if db.manifest.w != nil {
		db.manifest.w.close()
	}
	db.tc.closeAll()
	db.stopDeletions()
	db.lock.Close()
}

// startBackground starts the goroutines of a writable store: flushes,
// compactions, WAL syncs (and write-back) and a first compaction check.
func (db *DB) startBackground() {
	db.prefillMemtable()
	db.wg.Add(3)
	go db.flushLoop()
	go db.compactLoop()
	go db.walSyncLoop()
	if db.opts.WALBufferNoSync {
		db.wg.Add(1)
		go db.walWriteBackLoop()
	}
	db.kickCompaction()
}

// warmLiveTables opens the live tables (up to MaxOpenFiles) in the background
// after Open, so that their filters are loaded before the first reads and
// Metrics reports the filter size of the whole store.
func (db *DB) warmLiveTables() {
	defer db.wg.Done()
	v := db.currentVersion()
	defer v.unref()
	n := 0
	for _, ts := range v.Levels {
		for _, t := range ts {
			if n >= db.opts.MaxOpenFiles {
				return
			}
			select {
			case <-db.closeCh:
				return
			default:
			}
			if h, err := db.tc.get(t.FileNum); err == nil {
				db.tc.release(h)
			}
			n++
		}
	}
}

// logAndApply writes edit to the manifest (fsynced) and installs the version
// it yields. install, if non-nil, runs under db.mu in the same critical
// section (so readers see the memtable leave and its table arrive at once).
func (db *DB) logAndApply(edit *manifest.VersionEdit, install func()) error {
	db.manifest.mu.Lock()
	defer db.manifest.mu.Unlock()
	db.mu.Lock()
	cur := db.mu.current
	logNum := db.mu.logNum
	db.mu.Unlock()
	levels, err := manifest.Apply(cur.Levels, edit)
	if err != nil {
		return err
	}
	if edit.HasLogNum {
		logNum = edit.LogNum
	}
	edit.HasNextFile, edit.NextFileNum = true, db.nextFileNum.Load()
	edit.HasLastSeq, edit.LastSeq = true, db.lastSeq.Load()
	if len(edit.Added) > 0 {
		if err := syncDir(db.fs, db.dir); err != nil {
			return db.setBGErr(err)
		}
	}
	if db.manifest.w.size >= maxManifestSize {
		num := db.allocFileNum()
		m, err := createManifest(db.fs, db.dir, num, manifest.SnapshotEdit(levels, logNum, db.nextFileNum.Load(), db.lastSeq.Load()))
		if err != nil {
			return db.setBGErr(err)
		}
		old := db.manifest.w
		db.manifest.w = m
		old.close()
		_ = db.fs.Remove(db.fs.PathJoin(db.dir, manifestFileName(old.num)))
	} else if err := db.manifest.w.write(edit); err != nil {
		return db.setBGErr(err)
	}
	v := db.newVersion(levels)
	db.mu.Lock()
	old := db.mu.current
	db.mu.current = v
	db.mu.logNum = logNum
	if install != nil {
		install()
	}
	db.mu.stallCond.Broadcast() // L0 may have shrunk: see flushLoop
	db.armHeldReleaseLocked()
	oldRS := db.newReadStateLocked()
	db.mu.Unlock()
	releaseReadState(oldRS)
	old.unref()
	return nil
}

func (db *DB) setBGErr(err error) error {
	db.mu.Lock()
	first := db.mu.bgErr == nil
	if first {
		db.mu.bgErr = err
		db.bgErrNow.Store(&db.mu.bgErr)
	}
	db.mu.stallCond.Broadcast()
	db.mu.flushCond.Broadcast()
	db.mu.Unlock()
	if f := db.events.BackgroundError; f != nil && first {
		f(err)
	}
	return err
}

// nextJobID numbers flushes and compactions for the EventListener.
func (db *DB) nextJobID() int { return int(db.jobIDs.Add(1)) }

// Close syncs the WAL, waits for the flush or compaction in progress and for
// the Gets and iterator constructions in flight, saves the tables' adaptive
// filter state and releases the directory lock. Reads that begin after
// Close began return ErrClosed, as does anything of the DB used afterwards.
// Close snapshots and iterators first: an iterator left open stops working
// (see Iterator) and keeps its tables open until it is closed.
func (db *DB) Close() error {
	db.commits.mu.Lock()
	if db.closed.Load() {
		db.commits.mu.Unlock()
		return ErrClosed
	}
	db.closed.Store(true)
	for db.commits.leading {
		db.commits.cond.Wait()
	}
	db.commits.mu.Unlock()
	db.drainWALSyncs()

	db.mu.Lock()
	db.mu.closing = true
	db.closingNow.Store(true)
	db.mu.flushCond.Broadcast()
	db.mu.stallCond.Broadcast()
	db.mu.Unlock()
	close(db.closeCh)
	db.wg.Wait()
	// A manual Compact in flight is canceled (closeCh) and stops at its
	// next level; wait for it before closing the manifest. (Background
	// compactions are in wg.)
	db.compact.manualMu.Lock()
	defer db.compact.manualMu.Unlock()

	var err error
	keep := func(e error) {
		if err == nil && e != nil {
			err = e
		}
	}
	keep(db.waitWALSwitches())
	if db.wal != nil {
		keep(db.wal.close())
	}
	if w := db.takePreparedWAL(false); w != nil {
		db.discardWAL(w)
	}
	if db.manifest.w != nil {
		keep(db.manifest.w.close())
	}
	// No Get or iterator construction is in flight any more. Iterators
	// left open keep their tables (and the block cache) until closed.
	db.waitReads()
	keep(db.tc.closeAll())
	keep(db.saveKnownNegatives())
	db.stopDeletions()
	keep(db.lock.Close())
	return err
}

package kv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/internal/atomicfile"
	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/directio"
	"github.com/adaptkv/adaptkv/internal/rangedel"
	"github.com/adaptkv/adaptkv/kv/internal/knownneg"
	"github.com/adaptkv/adaptkv/kv/internal/memtable"
	"github.com/adaptkv/adaptkv/kv/internal/striped"
	"github.com/adaptkv/adaptkv/sstable"
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
	// walSwitch is the last WAL switch, whose second half may still run
	// (walswitch.go): the WAL syncer, the next switch and Close wait for it.
	walSwitch atomic.Pointer[walSwitch]
	// walToFinish is a switch the commit leader made during its group: it
	// finishes it once it has handed leadership on (commit).
	walToFinish *walSwitch
	// switchFinishing, if set (tests), is called as a switch's second
	// half begins.
	switchFinishing func()
	// walNow mirrors wal for the WAL write-back goroutine of
	// Options.WALBufferNoSync, which walKick wakes (see walWriteBackLoop).
	walNow  atomic.Pointer[walWriter]
	walKick chan struct{}

	// memRecycler keeps the memory of flushed memtables that no read
	// state lists any more, for the next memtables (memtable.Recycler).
	memRecycler *memtable.Recycler

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
		// current, or it failed): no intra-L0 compaction may take an
		// output number then (reserveIntraL0Output).
		flushing bool
		// flushWaiters counts the Flush calls waiting: no memtable is
		// held back for a merged flush then (holdFlushLocked).
		flushWaiters int
		flushCond    *sync.Cond
		stallCond    *sync.Cond // signalled when a flush finishes or bgErr is set
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

	// testHookCompaction, if set (by tests, under compact.mu), runs at the
	// start of each background compaction, with its plan booked.
	testHookCompaction func(*compaction.Plan)

	// testHookBeforePin, if set (by tests, before any read), runs in
	// loadReadState before the read state is pinned.
	testHookBeforePin func()
}

type memEntry struct {
	mt      *memtable.MemTable
	walNum  uint64
	flushed bool // under db.mu
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
	fs := o.FS
	if !o.ReadOnly {
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
	db := &DB{
		dir: dir, opts: o, fs: fs, policy: policy, lock: lock,
		walKick: make(chan struct{}, 1),
		closeCh: make(chan struct{}),
		// Room for one memtable's chunks (Size counts the arena bytes
		// its entries use; a memtable ends up to one batch past
		// MemTableSize, in the last chunk's spare room or a new one).
		memRecycler: memtable.NewRecycler(o.MemTableSize, o.MemTableSize+2*memtable.ChunkSize(o.MemTableSize)),
	}
	switch {
	case o.EventListener != nil:
		db.events = *o.EventListener
	case o.Logger != nil:
		db.events = MakeLoggingEventListener(o.Logger)
	}
	if err := db.openTableFS(); err != nil {
		_ = lock.Close()
		return nil, err
	}
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
	go db.deleteLoop()
	// The table cache owns the block cache's reference (see tableCache).
	db.tc = newTableCache(db.readFS, dir, pebble.NewCache(o.BlockCacheSize), o.MaxOpenFiles, o.ReadOnly)
	if policy.Adaptive() && o.RemoteCacheSize > 0 {
		db.tc.useRemoteCache(o.RemoteCacheSize)
	}
	db.openKnownNegatives() // before recovery: its flush uses them
	if db.kn != nil {       // before any table is opened
		switch o.FixRule {
		case FixRepeated:
			db.tc.fixGate = db.fixRepeated
		case FixAuto:
			db.tc.fixGate = db.fixAuto
		case FixCached:
			db.tc.fixGate, db.tc.cacheFPs = db.fixHeld, true
			if !o.DirectReads { // see Options.FixRule
				db.tc.fixGate, db.tc.fixReturning = db.fixRepeated, true
			}
		}
	}
	if !o.FixInline {
		db.tc.startFixes()
	}
	if err := db.recover(); err != nil {
		// Close what recovery opened (the files it created stay: the next
		// Open deletes what no manifest refers to).
		if db.wal != nil {
			db.wal.close()
		}
		if db.manifest.w != nil {
			db.manifest.w.close()
		}
		db.tc.closeAll()
		db.stopDeletions()
		lock.Close()
		return nil, err
	}
	db.commits.nextSeq = db.lastSeq.Load() + 1
	if !o.ReadOnly {
		// The options the store runs with, for people and tools (Open
		// never reads it; ParseOptions does): best effort, since a store
		// that cannot write it loses nothing.
		_ = atomicfile.Write(fs, fs.PathJoin(dir, optionsFileName), fs.PathJoin(dir, optionsFileName+".tmp"), []byte(o.String()))
		db.wg.Add(3)
		go db.flushLoop()
		go db.compactLoop()
		go db.walSyncLoop()
		if o.WALBufferNoSync {
			db.wg.Add(1)
			go db.walWriteBackLoop()
		}
		db.kickCompaction()
	}
	db.wg.Add(1)
	go db.warmLiveTables()
	return db, nil
}

// warmLiveTables opens the live tables (up to MaxOpenFiles) in the background
// after Open, so that their filters are loaded before the first reads and
// Metrics reports the filter size of the whole store.
func (db *DB) warmLiveTables() {
	defer db.wg.Done()
	v := db.currentVersion()
	defer v.unref()
	n := 0
	for _, ts := range v.levels {
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

func (db *DB) allocFileNum() uint64 { return db.nextFileNum.Add(1) - 1 }

// writeTable writes the entries of it into a new table and returns its
// metadata (the file is synced by the sstable writer).
func (db *DB) writeTable(it base.Iterator, rangeDels *rangedel.Set) (*base.TableMeta, error) {
	metas, err := db.writeTables(it, rangeDels, nil, 0, db.nextJobID(), "recovering")
	if err != nil {
		return nil, err
	}
	return metas[0], nil
}

// flushFormat is the block layout of the tables flushes and recovery
// write (Options.FlushInTableFormat).
func (db *DB) flushFormat() sstable.Format {
	if db.opts.FlushInTableFormat {
		return db.opts.TableFormat
	}
	return sstable.FormatRow
}

// writeTables writes every entry of it and the range tombstones rangeDels
// (together at least one) into new tables, cutting before the first user
// key past a split key once the table holds minBytes
// (Options.FlushSplitBytes); splits ascend. Each table takes the
// tombstones of its key range (rangedel.Splitter).
func (db *DB) writeTables(it base.Iterator, rangeDels *rangedel.Set, splits [][]byte, minBytes uint64, job int, reason string) ([]*base.TableMeta, error) {
	kn := db.buildNegatives()
	rds := rangedel.NewSplitter(rangeDels)
	var last []byte // the last user key written to out
	var metas []*base.TableMeta
	var out *tableOutput
	fail := func(err error) ([]*base.TableMeta, error) {
		if out != nil {
			out.Abort()
		}
		for _, m := range metas {
			_ = db.fs.Remove(db.fs.PathJoin(db.dir, tableFileName(m.FileNum)))
		}
		return nil, err
	}
	newOutput := func() error {
		var err error
		out, err = db.newOutputNum(db.allocFileNum(), kn, db.flushFormat(), job, reason)
		return err
	}
	finish := func(frags []rangedel.Fragment) error {
		err := out.AddRangeDels(frags)
		var meta *base.TableMeta
		if err == nil {
			meta, err = out.Finish()
		}
		if err != nil {
			out.Abort()
		}
		out = nil
		if err == nil {
			metas = append(metas, meta)
		}
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		// Splits are passed as soon as a key exceeds them, so a key that
		// passes one starts a new user key (every earlier key is at or
		// below it): cutting there never parts the versions of a key.
		passed := false
		for len(splits) > 0 && bytes.Compare(k.UserKey, splits[0]) > 0 {
			splits, passed = splits[1:], true
		}
		if passed && out != nil && out.EstimatedSize() >= minBytes {
			if err := finish(rds.Cut(last)); err != nil {
				return fail(err)
			}
		}
		if out == nil {
			if err := newOutput(); err != nil {
				return fail(err)
			}
		}
		if err := out.Add(k, it.Value()); err != nil {
			return fail(err)
		}
		last = append(last[:0], k.UserKey...)
	}
	if err := it.Error(); err != nil {
		return fail(err)
	}
	frags := rds.Rest()
	if out == nil && len(frags) > 0 {
		if err := newOutput(); err != nil {
			return fail(err)
		}
	}
	if out == nil {
		return fail(fmt.Errorf("kv: no entries to write"))
	}
	if err := finish(frags); err != nil {
		return fail(err)
	}
	return metas, nil
}

// tableOutput is a compaction.Output backed by an sstable.Writer.
type tableOutput struct {
	db      *DB
	fileNum uint64
	w       *sstable.Writer
}

// newOutputNum creates table number fn for job (reason: "flushing",
// "compacting", "recovering"); kn are the known negatives a policy that
// builds around them gets (see buildNegatives).
func (db *DB) newOutputNum(fn uint64, kn knownneg.List, format sstable.Format, job int, reason string) (*tableOutput, error) {
	path := db.fs.PathJoin(db.dir, tableFileName(fn))
	if f := db.events.TableCreated; f != nil {
		f(TableCreateInfo{JobID: job, Reason: reason, FileNum: fn, Path: path})
	}
	w, err := sstable.Create(db.fs, path, sstable.WriterOptions{Policy: db.policy, KnownNegatives: kn, Format: format})
	if err != nil {
		return nil, err
	}
	return &tableOutput{db: db, fileNum: fn, w: w}, nil
}

func (o *tableOutput) Add(key base.InternalKey, value []byte) error { return o.w.Add(key, value) }
func (o *tableOutput) EstimatedSize() uint64                        { return o.w.EstimatedSize() }
func (o *tableOutput) Abort() error                                 { return o.w.Abort() }
func (o *tableOutput) AddRangeDels(frags []rangedel.Fragment) error {
	return o.w.AddRangeDels(frags)
}
func (o *tableOutput) Finish() (*base.TableMeta, error) {
	info, err := o.w.Close()
	if err != nil {
		return nil, err
	}
	o.db.preAdaptChecks.Add(uint64(info.PreAdapted.Checked))
	o.db.preAdaptations.Add(uint64(info.PreAdapted.Fixed))
	return &base.TableMeta{FileNum: o.fileNum, Size: info.Size, Smallest: info.Smallest, Largest: info.Largest,
		HasRangeDels: info.RangeDels > 0}, nil
}

// logAndApply writes edit to the manifest (fsynced) and installs the version
// it yields. install, if non-nil, runs under db.mu in the same critical
// section (so readers see the memtable leave and its table arrive at once).
func (db *DB) logAndApply(edit *versionEdit, install func()) error {
	db.manifest.mu.Lock()
	defer db.manifest.mu.Unlock()
	db.mu.Lock()
	cur := db.mu.current
	logNum := db.mu.logNum
	db.mu.Unlock()
	levels, err := applyEdit(cur.levels, edit)
	if err != nil {
		return err
	}
	if edit.hasLogNum {
		logNum = edit.logNum
	}
	edit.hasNextFile, edit.nextFileNum = true, db.nextFileNum.Load()
	edit.hasLastSeq, edit.lastSeq = true, db.lastSeq.Load()
	if len(edit.added) > 0 {
		if err := syncDir(db.fs, db.dir); err != nil {
			return db.setBGErr(err)
		}
	}
	if db.manifest.w.size >= maxManifestSize {
		num := db.allocFileNum()
		m, err := createManifest(db.fs, db.dir, num, snapshotEdit(levels, logNum, db.nextFileNum.Load(), db.lastSeq.Load()))
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
		if db.opts.MergeFlushL0Depth < 0 {
			ms = ms[:1]
		}
		next := db.mu.mem.walNum
		if len(db.mu.imm) > len(ms) {
			next = db.mu.imm[len(ms)].walNum
		}
		db.mu.flushing = true
		db.mu.Unlock()
		if err := db.flushMemtables(ms, next); err != nil {
			db.mu.Lock()
			db.mu.flushing = false // an installed flush cleared it itself
			db.mu.Unlock()
			db.setBGErr(fmt.Errorf("kv: flush: %w", err))
			return
		}
	}
}

// l0StalledLocked reports whether L0 is too deep (or holds too many
// tables) for another flush: see Options.L0StopWritesThreshold.
func (db *DB) l0StalledLocked() bool {
	l0 := db.mu.current.levels[0]
	return len(l0) >= 2*db.opts.L0CompactionFileThreshold ||
		len(l0) >= db.opts.L0StopWritesThreshold && compaction.L0Depth(l0, nil) >= db.opts.L0StopWritesThreshold
}

// holdFlushLocked reports whether flushLoop should keep the one queued
// memtable until the next is full and flush the two together: L0 is at
// least Options.MergeFlushL0Depth deep, a second queued memtable does not
// stall writers, and no Flush is waiting. Halving the flushes halves how
// fast L0 deepens while its compactions are behind. See
// docs/ARCHITECTURE.md, "Merged flushes".
func (db *DB) holdFlushLocked() bool {
	d := db.opts.MergeFlushL0Depth
	return d > 0 && len(db.mu.imm) == 1 && db.opts.MaxImmutableMemTables >= 2 &&
		db.mu.flushWaiters == 0 && compaction.L0Depth(db.mu.current.levels[0], nil) >= d
}

// flushMemtables writes the memtables ms (the oldest queued, in order)
// to one layer of L0 tables and installs them with nextLog, the WAL of the
// oldest memtable left unflushed.
func (db *DB) flushMemtables(ms []*memEntry, nextLog uint64) (err error) {
	start := time.Now()
	info := FlushInfo{JobID: db.nextJobID(), Memtables: len(ms)}
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
	edit := &versionEdit{hasLogNum: true, logNum: nextLog}
	var its []base.Iterator
	var rangeDels []*rangedel.Set
	for _, m := range ms {
		if m.mt.Len() > 0 {
			its = append(its, m.mt.NewIter())
		}
		rangeDels = append(rangeDels, m.mt.RangeDels())
	}
	if rds := rangedel.Merge(rangeDels...); len(its) > 0 || rds.Len() > 0 {
		var splits [][]byte
		if db.opts.FlushSplitBytes > 0 {
			v := db.currentVersion()
			splits = compaction.FlushSplitKeys(v.levels, db.compactionOptions())
			v.unref()
		}
		var it base.Iterator = compaction.NewMergingIter() // none: range tombstones only
		if len(its) > 0 {
			it = its[0]
		}
		if len(its) > 1 {
			// Sequence numbers grow from each memtable to the next, so
			// merging by internal key keeps every version in order.
			it = compaction.NewMergingIter(its...)
		}
		metas, err := db.writeTables(it, rds, splits, uint64(db.opts.FlushSplitBytes), info.JobID, "flushing")
		_ = it.Close() // memtable iterators hold nothing and cannot fail
		if err != nil {
			return err
		}
		info.Output = tableInfos(metas)
		for _, meta := range metas {
			edit.added = append(edit.added, addedTable{level: 0, meta: meta})
			// Opened before the install, so that
			// no read meets an unopened table and no version is held
			// after it: a version held past the install kept a table a
			// concurrent Compact replaced on disk after Compact returned.
			db.warmTable(meta.FileNum)
		}
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
		db.mu.flushing = false // its tables are in current (reserveIntraL0Output)
		// Counted before Flush can see ms flushed: its caller's Metrics
		// include them.
		db.flushes.Add(uint64(len(ms)))
		if len(ms) > 1 {
			db.mergedFlushes.Add(1)
		}
		for _, a := range edit.added {
			db.flushedBytes.Add(a.meta.Size)
		}
		db.mu.stallCond.Broadcast()
	})
	if err != nil {
		return err
	}
	db.kickCompaction()
	return nil
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
	keep(db.waitWALSwitch())
	if db.wal != nil {
		keep(db.wal.close())
	}
	if w := db.takePreparedWAL(); w != nil {
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

package kv

// Recovery at Open: read the manifest (or start empty), check that the state
// it names is whole on disk, replay the WALs it still needs into memtables,
// flush those to L0 under a new manifest and WAL, and delete what no longer
// belongs to the store. See the package doc for the durability and
// corruption policy, docs/ARCHITECTURE.md ("Contracts") for the rules.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/adaptkv/adaptkv/kv/internal/memtable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// recover runs recovery and installs the recovered state in db. Its steps
// are ordered so that a recovery that fails or is interrupted anywhere
// leaves a directory the next Open recovers the same way.
func (db *DB) recover() error {
	fs, dir := db.fs, db.dir
	st, err := db.readStoreState()
	if err != nil {
		return err
	}
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	wals, maxNum := walsToReplay(names, st)
	db.nextFileNum.Store(maxNum)
	db.lastSeq.Store(st.lastSeq)
	if err := checkStateOnDisk(st, names); err != nil {
		return err
	}
	mts, err := db.replayWALs(wals)
	if err != nil {
		return err
	}
	if db.opts.ReadOnly {
		db.installReadOnly(st, mts)
		return nil
	}

	// Flush what the WAL held into L0 tables (one a memtable, oldest
	// first), write a fresh manifest whose log number is a new WAL's, then
	// create that WAL. In this order a recovery that fails or is
	// interrupted at any step leaves the old WALs as they were (the newest
	// still newest, its torn tail still tolerated) or a manifest that no
	// longer needs them: never a new empty WAL next to a manifest that
	// still does.
	levels, err := db.flushRecovered(st.levels, mts)
	if err != nil {
		return err
	}
	walNum := db.allocFileNum()
	manNum := db.allocFileNum()
	m, err := createManifest(fs, dir, manNum,
		manifest.SnapshotEdit(levels, walNum, db.nextFileNum.Load(), db.lastSeq.Load()))
	if err != nil {
		return err
	}
	db.manifest.w = m
	w, err := createWAL(fs, fs.PathJoin(dir, walFileName(walNum)), walNum, db.walPreallocateSize(), db.mapsWAL(), populateLearn)
	if err != nil {
		return err
	}
	db.wal = w
	db.walNow.Store(w)
	if err := syncDir(fs, dir); err != nil {
		return err
	}
	db.mu.logNum = walNum
	db.mu.mem = &memEntry{mt: memtable.NewRecycled(db.memRecycler), walNum: walNum}
	db.mu.current = db.newVersion(levels)
	db.newReadStateLocked()
	deleteObsoleteFiles(fs, dir, names, levels, walNum, manNum)
	return nil
}

// walsToReplay returns the numbers of the WALs in names that the state st
// does not cover, in order, and the first file number above every file in
// names and st's next file number.
func walsToReplay(names []string, st *manifestState) (wals []uint64, maxNum uint64) {
	maxNum = st.nextFileNum
	for _, n := range names {
		ft, num := parseFileName(n)
		if ft == fileTypeWAL && num >= st.logNum {
			wals = append(wals, num)
		}
		if ft != fileTypeUnknown && num >= maxNum {
			maxNum = num + 1
		}
	}
	slices.Sort(wals)
	return wals, maxNum
}

// installReadOnly installs the state of a read-only store: the replayed
// memtables stay memtables, the newest one mutable (never written).
func (db *DB) installReadOnly(st *manifestState, mts []*memtable.MemTable) {
	db.mu.logNum = st.logNum
	last := len(mts) - 1
	for _, mt := range mts[:last] {
		db.mu.imm = append(db.mu.imm, &memEntry{mt: mt})
	}
	db.mu.mem = &memEntry{mt: mts[last]}
	db.mu.current = db.newVersion(st.levels)
	db.newReadStateLocked()
}

// flushRecovered writes each non-empty replayed memtable as an L0 table
// and returns levels with them added.
func (db *DB) flushRecovered(levels [manifest.NumLevels][]*base.TableMeta, mts []*memtable.MemTable) ([manifest.NumLevels][]*base.TableMeta, error) {
	var edit manifest.VersionEdit
	for _, mt := range mts {
		if mt.Empty() {
			continue
		}
		meta, err := db.writeTable(mt.NewIter(), mt.RangeDels())
		if err != nil {
			return levels, err
		}
		edit.Added = append(edit.Added, manifest.NewTable{Level: 0, Meta: meta})
	}
	if len(edit.Added) == 0 {
		return levels, nil
	}
	return manifest.Apply(levels, &edit)
}

// readStoreState reads the state CURRENT names, or returns the empty state
// of a new store (after checking that the directory holds no store files:
// see checkNoStoreFiles).
func (db *DB) readStoreState() (*manifestState, error) {
	fs, dir := db.fs, db.dir
	_, err := fs.Stat(fs.PathJoin(dir, currentFileName))
	switch {
	case err == nil:
		return readManifest(fs, dir)
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	case db.opts.ReadOnly:
		return nil, fmt.Errorf("kv: open %s read-only: no store there: %w", dir, err)
	}
	if err := checkNoStoreFiles(fs, dir); err != nil {
		return nil, err
	}
	return &manifestState{nextFileNum: 1}, nil
}

// checkNoStoreFiles reports ErrCorruption when dir, which has no CURRENT,
// holds what only an opened store writes: a table, an adaptive state file,
// the known negatives or a WAL with records. Without CURRENT the store
// would open empty beside them, silently without its data. (A MANIFEST and
// an empty WAL alone are what a crash during a store's first Open leaves.)
func checkNoStoreFiles(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		ft, _ := parseFileName(n)
		bad := ft == fileTypeTable || ft == fileTypeState || n == knownNegFileName
		if ft == fileTypeWAL {
			if bad, err = walHasData(fs, fs.PathJoin(dir, n)); err != nil {
				return err
			}
		}
		if bad {
			return fmt.Errorf("%w: %s has no %s but holds store file %s", ErrCorruption, dir, currentFileName, n)
		}
	}
	return nil
}

// checkStateOnDisk reports ErrCorruption unless the state st describes is
// whole among the directory's files names: every table of the manifest
// exists, and a damaged last manifest record was torn, not lost.
//
// A damaged last manifest record is a torn write only if nothing acted on
// it: an edit is acted on once durable (a flush's edit deletes the WAL it
// replaced, a compaction's deletes its inputs), so the state before it must
// still be whole on disk: the WAL it names (rotation creates a WAL before
// any edit names it) and its tables. Otherwise the record was written and
// lost later: the data it carried is gone, which is corruption, not a crash.
//
// A manifest cut at a record boundary shows no damaged record, but the WAL
// it names is then gone while a newer one is here: a WAL is deleted only
// after an edit naming a newer WAL is durable, so that edit was lost. (The
// named WAL may be absent with no newer one: recovery writes the manifest
// naming its new WAL before it creates that WAL.)
func checkStateOnDisk(st *manifestState, names []string) error {
	present := make(map[string]bool, len(names))
	for _, n := range names {
		present[n] = true
	}
	if st.logNum != 0 && !present[walFileName(st.logNum)] {
		if st.torn >= 0 {
			return fmt.Errorf("%w: the last record of %s (offset %d) is damaged and the state before it is not on disk (WAL %s is gone): an acknowledged edit was lost",
				ErrCorruption, manifestFileName(st.manifestNum), st.torn, walFileName(st.logNum))
		}
		if n, ok := newerWAL(names, st.logNum); ok {
			return fmt.Errorf("%w: %s names WAL %s, which is gone while the newer %s is here: the edit that moved on to it was lost (manifest cut short?)",
				ErrCorruption, manifestFileName(st.manifestNum), walFileName(st.logNum), n)
		}
	}
	for lvl, ts := range st.levels {
		for _, t := range ts {
			if !present[tableFileName(t.FileNum)] {
				return fmt.Errorf("%w: table %s of L%d is missing", ErrCorruption, tableFileName(t.FileNum), lvl)
			}
		}
	}
	return nil
}

// newerWAL returns the name of a WAL among names numbered above logNum.
func newerWAL(names []string, logNum uint64) (string, bool) {
	for _, n := range names {
		if ft, num := parseFileName(n); ft == fileTypeWAL && num > logNum {
			return n, true
		}
	}
	return "", false
}

// replayWALs replays the WALs wals (ascending) into memtables, raising
// db.lastSeq to the last sequence number replayed. A memtable takes whole
// batches until it reaches MemTableSize, as in the running store, so each
// stays within memtable.Capacity; there is always at least one, the newest
// last. The newest WAL, whose torn tail is tolerated, is the newest with
// data: a later empty (or all-zero, see walHasData) WAL was created by a
// rotation or a recovery that went no further, before any record was
// written to it (see replayWAL).
//
// The WALs form a chain: each one a switch created starts with a switch
// record naming the one before. A WAL whose switch record names a WAL
// between it and the WAL before it in wals follows a WAL whose directory
// entry a machine crash lost before its switch finished: the replay ends
// before it, as at a WAL torn then (the writes from there on were all
// NoSync: a Sync write waits until every WAL before it is durable, its
// directory entry too). If one of the WALs from there on says it was
// fsynced (a record's synced offset), the missing WAL was durable and then
// lost: ErrCorruption. (The first WAL, the one
// the manifest names, is never missing after a crash: a flush waits for
// the switches before its manifest edit names a newer WAL, and
// checkStateOnDisk reports it gone.)
func (db *DB) replayWALs(wals []uint64) ([]*memtable.MemTable, error) {
	fs, dir := db.fs, db.dir
	newest := len(wals) - 1
	for ; newest > 0; newest-- {
		has, err := walHasData(fs, fs.PathJoin(dir, walFileName(wals[newest])))
		if err != nil {
			return nil, err
		}
		if has {
			break
		}
	}
	mts := []*memtable.MemTable{memtable.New()}
	for i, num := range wals {
		// The next WAL's switch record says where this one's records end
		// (a WAL switch fsyncs the old WAL while writes go to the new
		// one). A next WAL with data but no readable first record lost its
		// start in a crash during the switch: this one may be torn as the
		// newest is.
		last, sealedAt, gap := i >= newest, int64(-1), false
		if i < newest {
			rec, err := firstRecord(fs, fs.PathJoin(dir, walFileName(wals[i+1])))
			if err != nil {
				return nil, err
			}
			prev, end, ok := parseSwitchRecord(rec)
			switch {
			case ok && prev == num:
				sealedAt = end
			case ok && prev > num:
				// WAL prev, between this one and the next, is gone.
				if err := db.checkNoSyncAfterGap(prev, wals[i+1:]); err != nil {
					return nil, err
				}
				gap = true
			}
			last = last || rec == nil || gap
		}
		_, err := replayWAL(fs, fs.PathJoin(dir, walFileName(num)), last, sealedAt, func(data []byte) error {
			if _, _, ok := parseSwitchRecord(data); ok {
				return nil
			}
			mt := mts[len(mts)-1]
			if mt.Size() >= int64(db.opts.MemTableSize) {
				mt = memtable.New()
				mts = append(mts, mt)
			}
			_, _, err := decodeBatch(data, func(seq uint64, e batchEntry) error {
				e.applyTo(mt, seq)
				if seq > db.lastSeq.Load() {
					db.lastSeq.Store(seq)
				}
				return nil
			})
			return err
		})
		if errors.Is(err, errSwitchTorn) || (err == nil && gap) {
			break // the WALs after it hold only later, unacknowledged writes
		}
		if err != nil {
			return nil, err
		}
	}
	return mts, nil
}

// checkNoSyncAfterGap returns ErrCorruption if one of the WALs after (those
// after the missing WAL missing) says it was fsynced: a Sync write waits
// until every WAL before it is durable, its directory entry too, so the
// missing WAL had been durable (see replayWALs).
func (db *DB) checkNoSyncAfterGap(missing uint64, after []uint64) error {
	for _, num := range after {
		data, err := readFile(db.fs, db.fs.PathJoin(db.dir, walFileName(num)))
		if err != nil {
			return err
		}
		synced := false
		_ = readLog(data, func(rec []byte) error {
			if len(rec) >= 8 && binary.LittleEndian.Uint64(rec[:8]) > 0 {
				synced = true
				return errStop
			}
			return nil
		}, func(int64, error) error { return nil })
		if synced {
			return fmt.Errorf("%w: WAL %s is missing, and WAL %s after it was fsynced", ErrCorruption, walFileName(missing), walFileName(num))
		}
	}
	return nil
}

// errStop ends a readLog walk that has found what it looked for.
var errStop = errors.New("stop")

// deleteObsoleteFiles deletes, among the directory's files names, those
// nothing refers to once levels, WAL walNum and manifest manNum are the
// store's: older WALs and manifests, tables (and their state files) of no
// level, temporary files. Failures are ignored: the next Open tries again.
func deleteObsoleteFiles(fs vfs.FS, dir string, names []string, levels [manifest.NumLevels][]*base.TableMeta, walNum, manNum uint64) {
	live := make(map[uint64]bool)
	for _, ts := range levels {
		for _, t := range ts {
			live[t.FileNum] = true
		}
	}
	for _, n := range names {
		ft, num := parseFileName(n)
		del := false
		switch ft {
		case fileTypeTable, fileTypeState:
			del = !live[num]
		case fileTypeWAL:
			del = num < walNum
		case fileTypeManifest:
			del = num != manNum
		case fileTypeTemp:
			del = true
		}
		if del {
			_ = fs.Remove(fs.PathJoin(dir, n))
		}
	}
}

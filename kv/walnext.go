package kv

import "time"

// The next WAL, prepared ahead. A mapped WAL's pages are faulted in by a
// goroutine of their own (walMapping.populateAhead); when the WAL was
// created at the rotation, that goroutine raced the writer from the
// mapping's first page, and on a busy machine it waited for a CPU while
// the writer went ahead and paid the faults: a NoSync write that crossed
// into a new WAL page was 7-10x likelier than others to be among the
// slowest 1%. So each rotation has the WAL after the new one created,
// allocated, mapped and populated under a temporary name while the new
// memtable fills, and the next rotation only renames it (once its pages are
// all in: where populating is behind, the rotating writer waits). See
// docs/ARCHITECTURE.md, "Group commit and the WAL".

// nextWALFileName is the file the next WAL is prepared in. Its suffix makes
// it a temporary file: Open removes one a crash left behind.
const nextWALFileName = "NEXTWAL.tmp"

// nextWALPath is the path of the next WAL's file while it is prepared.
func (db *DB) nextWALPath() string { return db.fs.PathJoin(db.dir, nextWALFileName) }

// walPrep is a WAL being prepared on a goroutine of its own (prepareWAL).
type walPrep struct {
	done chan struct{} // closed once w or err is set
	w    *walWriter
	err  error
}

// preparesWAL says whether the store prepares its next WAL ahead: only a
// mapped WAL gains (its pages are populated ahead of the writer), and only
// where renaming an open file is allowed.
func (db *DB) preparesWAL() bool { return walMappingSupported && db.mapsWAL() }

// prepareWAL starts preparing the WAL after the current one when reach,
// the new WAL's (walWriter.populateReach), says its writers do not sync:
// it is then populated whole. The rotation calls it once it has installed
// a new WAL, so the next one has the whole life of a memtable to be ready.
// A WAL populated by windows (its writers sync) is created at the
// rotation as before: its first window is all a preparation could
// populate, and the fdatasyncs of Sync writers are where their tail is.
// Only the commit leader uses db.walNext, and Close after the last leader.
func (db *DB) prepareWAL(reach int) {
	if reach != populateWhole || !db.preparesWAL() {
		return
	}
	p := &walPrep{done: make(chan struct{})}
	db.walNext = p
	go func() {
		defer close(p.done)
		p.w, p.err = createWAL(db.fs, db.nextWALPath(), 0, db.walPreallocateSize(), true, populateWhole)
		// Prepared means populated: the rotation that takes this WAL
		// waits for its pages rather than leave them to fault on the
		// writers' path. Populating needs a CPU that the writers, the
		// flush and compactions share, and on a busy machine it is often
		// still running when the memtable fills; the rotating writer's
		// wait hands it a P.
		if p.err == nil && p.w.mapped != nil {
			p.w.mapped.populating.Wait()
		}
	}()
}

// newWAL returns the WAL numbered num for a new memtable, whose pages are
// to be populated up to reach bytes ahead of the writer: the prepared one,
// renamed to its name, or a new one (none was prepared, preparing it
// failed, it cannot be renamed, or the writers have begun to sync since:
// its pages, populated whole, are dirty zeros the first fdatasync would
// write).
func (db *DB) newWAL(num uint64, reach int) (*walWriter, error) {
	path := db.fs.PathJoin(db.dir, walFileName(num))
	if w := db.takePreparedWAL(true); w != nil {
		if reach == populateWhole {
			if err := db.fs.Rename(db.nextWALPath(), path); err == nil {
				w.num = num
				return w, nil
			}
		}
		db.discardWAL(w)
	}
	return createWAL(db.fs, path, num, db.walPreallocateSize(), db.mapsWAL(), reach)
}

// takePreparedWAL waits for the WAL being prepared, if any, and returns it;
// nil if none was or preparing it failed (whatever it left is removed: a
// failed preparation is only a lost head start, and creating the WAL at
// the rotation reports any error that matters). With counted (a rotation's
// wait) a wait for a preparation still populating is counted in
// Metrics.WALPrepareWaits and WALPrepareWaitTime.
func (db *DB) takePreparedWAL(counted bool) *walWriter {
	p := db.walNext
	if p == nil {
		return nil
	}
	db.walNext = nil
	select {
	case <-p.done:
	default:
		start := time.Now()
		<-p.done
		if counted {
			db.walPrepareWaits.Add(1)
			db.walPrepareWaitNs.Add(int64(time.Since(start)))
		}
	}
	if p.err != nil {
		_ = db.fs.Remove(db.nextWALPath())
		return nil
	}
	return p.w
}

// discardWAL closes a prepared WAL that was never used and removes its
// file; it holds no record, so nothing is synced.
func (db *DB) discardWAL(w *walWriter) {
	w.closed = true
	if w.mapped != nil {
		_ = w.mapped.unmap()
	}
	_ = w.f.Close()
	_ = db.fs.Remove(db.nextWALPath())
}

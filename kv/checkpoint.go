package kv

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"

	"github.com/adaptkv/adaptkv/internal/atomicfile"
	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrCheckpointExists is returned by Checkpoint when its directory exists.
var ErrCheckpointExists = errors.New("kv: checkpoint directory exists")

// Checkpoint writes to dir, which must not exist, a store that Open reads
// as this one stood at one moment during the call: every write
// acknowledged before the call, possibly some made during it, in the same
// tables (hard links where the file system allows, copies otherwise), with
// the adaptive filters' state and the known negatives, so the copy reads
// as adapted as the original. Writes may go on meanwhile. The memtable is
// flushed first (the copy has no WAL). The directory's CURRENT is written
// last: a checkpoint that fails part way does not open as a store (Open
// finds tables without CURRENT: corruption), and Checkpoint removes what
// it wrote. dir is on the store's file system.
func (db *DB) Checkpoint(dir string) (err error) {
	if db.closed.Load() {
		return ErrClosed
	}
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	fs := db.fs
	if _, err := fs.Stat(dir); err == nil {
		return fmt.Errorf("%w: %s", ErrCheckpointExists, dir)
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("kv: checkpoint %s: %w", dir, err)
	}
	if err := db.Flush(); err != nil {
		return fmt.Errorf("kv: checkpoint: %w", err)
	}
	// The version after the flush holds every write acknowledged before
	// the call; its reference keeps its tables on disk while they are
	// linked.
	v := db.currentVersion()
	defer v.unref()
	lastSeq, nextFile := db.lastSeq.Load(), db.nextFileNum.Load()
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("kv: checkpoint %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			_ = fs.RemoveAll(dir)
			err = fmt.Errorf("kv: checkpoint %s: %w", dir, err)
		}
	}()
	for _, level := range v.Levels {
		for _, t := range level {
			if err := vfs.LinkOrCopy(fs, fs.PathJoin(db.dir, tableFileName(t.FileNum)), fs.PathJoin(dir, tableFileName(t.FileNum))); err != nil {
				return err
			}
			if err := db.checkpointState(dir, t.FileNum); err != nil {
				return err
			}
		}
	}
	if db.kn != nil {
		if err := db.kn.Save(fs, fs.PathJoin(dir, knownNegFileName)); err != nil {
			return err
		}
	}
	if err := copySynced(fs, fs.PathJoin(db.dir, optionsFileName), fs.PathJoin(dir, optionsFileName)); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	// No WAL: the log number is one no file has, so Open replays none.
	const manifestNum = 1
	m, err := createManifest(fs, dir, manifestNum, manifest.SnapshotEdit(v.Levels, nextFile, nextFile+1, lastSeq))
	if err != nil {
		return err
	}
	return m.close()
}

// checkpointState saves table fn's adaptive state (if its reader is open
// and adapted since the last save) and copies the state file into dir.
func (db *DB) checkpointState(dir string, fn uint64) error {
	h, err := db.tc.get(fn)
	if err != nil {
		return err
	}
	err = h.r.SaveState()
	db.tc.release(h)
	if err != nil {
		return err
	}
	err = copySynced(db.fs, db.fs.PathJoin(db.dir, stateFileName(fn)), db.fs.PathJoin(dir, stateFileName(fn)))
	if errors.Is(err, iofs.ErrNotExist) {
		return nil // a static filter, or never adapted
	}
	return err
}

// copySynced copies a small file durably (atomicfile: temporary file,
// fsync, rename). The source is written atomically too, so the copy is
// one whole version of it.
func copySynced(fs vfs.FS, from, to string) error {
	f, err := fs.Open(from)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return atomicfile.Write(fs, to, to+".tmp", data)
}

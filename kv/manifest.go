package kv

// The manifest file: appending version edits (manifestWriter), reading the
// state back at Open (readManifest), and CURRENT, which names the live
// manifest. What an edit holds is internal/manifest.

import (
	"fmt"
	"strings"

	"github.com/adaptkv/adaptkv/internal/atomicfile"
	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// manifestWriter appends edits to the current manifest file.
type manifestWriter struct {
	num    uint64
	f      vfs.File
	w      *record.Writer
	size   int64
	closed bool
	failed error // first write error: the writer is poisoned
}

// write appends e and fsyncs. After a failure the edit may or may not be
// durable, so the writer is poisoned: nothing more is written (close only
// closes the file) and the caller must neither install the edit nor delete
// the files it adds; the next Open settles which state is on disk.
func (m *manifestWriter) write(e *manifest.VersionEdit) error {
	if m.failed != nil {
		return fmt.Errorf("kv: an earlier manifest write failed: %w", m.failed)
	}
	_, err := m.w.WriteRecord(e.Encode())
	if err == nil {
		err = m.w.Flush()
	}
	if err == nil {
		m.size = m.w.Size()
		err = m.f.Sync()
	}
	if err != nil {
		m.failed = err
	}
	return err
}

func (m *manifestWriter) close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	if m.failed != nil {
		return m.f.Close()
	}
	err := m.w.Close()
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// setCurrent points CURRENT at manifest num atomically: temp file, fsync,
// rename, directory fsync.
func setCurrent(fs vfs.FS, dir string, num uint64) error {
	return atomicfile.Write(fs, fs.PathJoin(dir, currentFileName),
		fs.PathJoin(dir, fmt.Sprintf("CURRENT.%06d.tmp", num)), []byte(manifestFileName(num)+"\n"))
}

func syncDir(fs vfs.FS, dir string) error { return atomicfile.SyncDir(fs, dir) }

// manifestState is what recovery reads from the manifest.
type manifestState struct {
	manifestNum uint64
	levels      [manifest.NumLevels][]*base.TableMeta
	logNum      uint64
	nextFileNum uint64
	lastSeq     uint64
	// torn is the offset of a damaged or truncated last record that was
	// dropped (-1: none). Recovery accepts it as a torn write only if the
	// state before it is whole on disk (see recover).
	torn int64
}

// readManifest loads the state named by CURRENT. A damaged last record is
// dropped and reported in torn (a crash while an edit was being written
// leaves one, never acknowledged); a bad record followed by valid ones is
// corruption.
func readManifest(fs vfs.FS, dir string) (*manifestState, error) {
	return readManifestWith(fs, dir, nil)
}

// readManifestWith is readManifest that also hands each applied edit to
// onEdit (nil: none), in order.
func readManifestWith(fs vfs.FS, dir string, onEdit func(*manifest.VersionEdit)) (*manifestState, error) {
	cur, err := readFile(fs, fs.PathJoin(dir, currentFileName))
	if err != nil {
		return nil, err
	}
	name := strings.TrimSpace(string(cur))
	ft, num := parseFileName(name)
	if ft != fileTypeManifest {
		return nil, fmt.Errorf("%w: CURRENT names %q", ErrCorruption, name)
	}
	path := fs.PathJoin(dir, name)
	data, err := readFile(fs, path)
	if err != nil {
		return nil, fmt.Errorf("%w: CURRENT names %s: %v", ErrCorruption, name, err)
	}
	st := &manifestState{manifestNum: num, torn: -1}
	nrec := 0
	err = readLog(data, func(rec []byte) error {
		e, err := manifest.DecodeEdit(rec)
		if err != nil {
			return err
		}
		nrec++
		if e.HasLogNum {
			st.logNum = e.LogNum
		}
		if e.HasNextFile {
			st.nextFileNum = e.NextFileNum
		}
		if e.HasLastSeq {
			st.lastSeq = e.LastSeq
		}
		st.levels, err = manifest.Apply(st.levels, e)
		if err == nil && onEdit != nil {
			onEdit(e)
		}
		return err
	}, func(off int64, cause error) error {
		if laterSyncedRecord(data, off, false) {
			return fmt.Errorf("%w: manifest %s: bad record at offset %d: %v", ErrCorruption, name, off, cause)
		}
		st.torn = off
		return nil
	})
	if err != nil {
		return nil, err
	}
	if nrec == 0 {
		return nil, fmt.Errorf("%w: manifest %s has no valid record", ErrCorruption, name)
	}
	return st, nil
}

// createManifest writes a new manifest holding e and makes it current.
func createManifest(fs vfs.FS, dir string, num uint64, e *manifest.VersionEdit) (*manifestWriter, error) {
	f, err := fs.Create(fs.PathJoin(dir, manifestFileName(num)), vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	m := &manifestWriter{num: num, f: f, w: record.NewWriter(f)}
	if err := m.write(e); err != nil {
		m.close()
		return nil, err
	}
	// The manifest's directory entry must be durable before CURRENT can name
	// it: a file system may persist the later rename of CURRENT and lose the
	// earlier, unsynced create (vfs.NewCrashableMem does), leaving CURRENT
	// pointing at nothing.
	if err := syncDir(fs, dir); err != nil {
		m.close()
		return nil, err
	}
	if err := setCurrent(fs, dir, num); err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

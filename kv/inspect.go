package kv

// Looking inside a store: its tables with their filters (DB.Tables), a
// whole-store check (DB.Check) and its manifest's edits (ReadManifest), for
// operators and the adaptkv command.

import (
	"errors"
	"fmt"

	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TableStats describes one live table (DB.Tables).
type TableStats struct {
	// Level is the table's level (0..6).
	Level int
	TableInfo
	// RangeDels says the table holds range tombstones.
	RangeDels bool
	// Keys counts its point keys (every version), from its properties.
	Keys uint64
	// FilterKind names its filter ("none" without one); FilterKeys counts
	// the distinct keys the filter holds, FilterBytes its size in memory,
	// BitsPerKey the two together, RemoteBytes its remote section on disk.
	FilterKind  string
	FilterKeys  uint64
	FilterBytes uint64
	BitsPerKey  float64
	RemoteBytes uint64
	// History is what the filter has done over the table's life (saved
	// with its adaptive state, plus this session's).
	History sstable.FilterHistory
	// StateError says why a saved adaptive state was rejected (the
	// pristine filter is used); nil when it loaded or there is none.
	StateError error
}

// Tables returns the live tables, L0 (newest first) then L1..L6 in key
// order, with what their filters hold and have done. It opens every table
// (through the table cache).
func (db *DB) Tables() ([]TableStats, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	v := db.currentVersion()
	defer v.unref()
	var out []TableStats
	for lvl := 0; lvl < manifest.NumLevels; lvl++ {
		ts := v.Levels[lvl]
		for i := range ts {
			t := ts[i]
			if lvl == 0 {
				t = ts[len(ts)-1-i]
			}
			st := TableStats{Level: lvl, TableInfo: tableInfo(t), RangeDels: t.HasRangeDels}
			h, err := db.tc.get(t.FileNum)
			if err != nil {
				return nil, err
			}
			r := h.r
			props, err := r.Properties()
			if err == nil {
				st.Keys = props.NumEntries - props.NumRangeDeletions
				m := r.Metrics()
				st.FilterKind, st.FilterKeys, st.FilterBytes = r.FilterKind(), m.FilterKeys, m.FilterBytes
				if m.FilterKeys > 0 {
					st.BitsPerKey = float64(8*m.FilterBytes) / float64(m.FilterKeys)
				}
				st.RemoteBytes, st.History = r.RemoteBytes(), r.History()
				if serr := r.StateError(); serr != nil && !errors.Is(serr, sstable.ErrNoState) {
					st.StateError = serr
				}
			}
			db.tc.release(h)
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// CheckReport is what DB.Check read.
type CheckReport struct {
	// Tables, Bytes: the live tables read, and their size.
	Tables int
	Bytes  uint64
	// Keys counts the point keys read (every version); each user key was
	// also asked of its table's filter.
	Keys uint64
	// RemoteSlots counts the filters' remote slots read.
	RemoteSlots int
}

// Check reads every live table whole (sstable.Reader.Verify: every data
// block with its checksum, the keys' order, the filter answering "maybe"
// for every stored key with the adaptive state the store would load, the
// remote section's chunks), with its range tombstones and its adaptive
// state file, and reports the first damage found, wrapping ErrCorruption
// and naming the file. Open has read (and checked) the manifest and the
// WALs; a damaged known-negatives file is reported too. Check changes
// nothing: it works on a ReadOnly store.
func (db *DB) Check() (CheckReport, error) {
	var rep CheckReport
	if db.closed.Load() {
		return rep, ErrClosed
	}
	v := db.currentVersion()
	defer v.unref()
	for _, ts := range v.Levels {
		for _, t := range ts {
			path := db.fs.PathJoin(db.dir, tableFileName(t.FileNum))
			r, err := sstable.Open(db.fs, path, sstable.ReaderOptions{FileNum: t.FileNum,
				StatePath: db.fs.PathJoin(db.dir, stateFileName(t.FileNum)), StateReadOnly: true})
			if err != nil {
				return rep, fmt.Errorf("%w: %s: %w", ErrCorruption, path, err)
			}
			res, err := r.Verify()
			if err == nil && t.HasRangeDels != (r.RangeDels().Len() > 0) {
				err = fmt.Errorf("the manifest says range tombstones %v, the table holds %d fragments", t.HasRangeDels, r.RangeDels().Len())
			}
			// A table written before the manifest recorded remote sections
			// says 0 whatever it holds.
			if err == nil && t.RemoteSize != 0 && t.RemoteSize != r.RemoteBytes() {
				err = fmt.Errorf("the manifest says a filter remote section of %d bytes, the table holds %d", t.RemoteSize, r.RemoteBytes())
			}
			if cerr := r.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return rep, fmt.Errorf("%w: %s: %w", ErrCorruption, path, err)
			}
			rep.Tables++
			rep.Bytes += t.Size
			rep.Keys += res.Keys
			rep.RemoteSlots += res.RemoteSlots
		}
	}
	if db.knErr != nil {
		return rep, fmt.Errorf("%w: %s: %w", ErrCorruption, db.fs.PathJoin(db.dir, knownNegFileName), db.knErr)
	}
	return rep, nil
}

// ManifestEdit is one record of a store's manifest (ReadManifest): the
// tables it deletes and adds, and the counters it sets.
type ManifestEdit struct {
	// HasLogNum, HasNextFileNum and HasLastSeq say which counters the edit
	// sets: the WAL number below which logs are obsolete, the next file
	// number, the last sequence number.
	HasLogNum, HasNextFileNum, HasLastSeq bool
	LogNum, NextFileNum, LastSeq          uint64
	Deleted                               []ManifestTable
	Added                                 []ManifestTable
}

// ManifestTable is a table a ManifestEdit deletes (FileNum alone is set)
// or adds.
type ManifestTable struct {
	Level int
	TableInfo
	RangeDels bool
	// RemoteSize is the part of Size that is the filter's remote section,
	// which level sizing leaves out (docs/ARCHITECTURE.md, "Compactions"):
	// 0 for a table without one, or written before the manifest recorded it.
	RemoteSize uint64
}

// ReadManifest returns the name of the manifest CURRENT names in dir and
// its edits in order, as Open would read them (a torn last record, which a
// crash leaves unacknowledged, is left out; other damage is ErrCorruption).
// It reads the files only: it takes no lock and needs no Open.
func ReadManifest(fs vfs.FS, dir string) (name string, edits []ManifestEdit, err error) {
	st, err := readManifestWith(fs, dir, func(e *manifest.VersionEdit) {
		me := ManifestEdit{HasLogNum: e.HasLogNum, HasNextFileNum: e.HasNextFile, HasLastSeq: e.HasLastSeq,
			LogNum: e.LogNum, NextFileNum: e.NextFileNum, LastSeq: e.LastSeq}
		for _, d := range e.Deleted {
			me.Deleted = append(me.Deleted, ManifestTable{Level: d.Level, TableInfo: TableInfo{FileNum: d.FileNum}})
		}
		for _, a := range e.Added {
			me.Added = append(me.Added, ManifestTable{Level: a.Level, TableInfo: tableInfo(a.Meta), RangeDels: a.Meta.HasRangeDels,
				RemoteSize: a.Meta.RemoteSize})
		}
		edits = append(edits, me)
	})
	if err != nil {
		return "", nil, err
	}
	return manifestFileName(st.manifestNum), edits, nil
}

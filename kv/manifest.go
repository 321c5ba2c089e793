package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/adaptkv/adaptkv/internal/atomicfile"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// versionEdit is one manifest record: the change from one version to the
// next plus the store's counters at that point.
type versionEdit struct {
	hasLogNum, hasNextFile, hasLastSeq bool
	logNum                             uint64 // WALs with a smaller number are obsolete
	nextFileNum                        uint64
	lastSeq                            uint64
	deleted                            []deletedTable
	added                              []addedTable
}

type deletedTable struct {
	level   int
	fileNum uint64
}

type addedTable struct {
	level int
	meta  *compaction.TableMeta
}

const (
	tagLogNum      = 1
	tagNextFileNum = 2
	tagLastSeq     = 3
	tagDeleted     = 4
	tagAdded       = 5
)

func appendKey(dst []byte, k sstable.InternalKey) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(k.UserKey)))
	dst = append(dst, k.UserKey...)
	dst = binary.AppendUvarint(dst, k.Seq)
	return append(dst, byte(k.Kind))
}

func (e *versionEdit) encode() []byte {
	var b []byte
	if e.hasLogNum {
		b = binary.AppendUvarint(append(b, tagLogNum), e.logNum)
	}
	if e.hasNextFile {
		b = binary.AppendUvarint(append(b, tagNextFileNum), e.nextFileNum)
	}
	if e.hasLastSeq {
		b = binary.AppendUvarint(append(b, tagLastSeq), e.lastSeq)
	}
	for _, d := range e.deleted {
		b = append(b, tagDeleted, byte(d.level))
		b = binary.AppendUvarint(b, d.fileNum)
	}
	for _, a := range e.added {
		b = append(b, tagAdded, byte(a.level))
		b = binary.AppendUvarint(b, a.meta.FileNum)
		b = binary.AppendUvarint(b, a.meta.Size)
		b = appendKey(b, a.meta.Smallest)
		b = appendKey(b, a.meta.Largest)
	}
	return b
}

type editDecoder struct {
	p   []byte
	err error
}

func (d *editDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *editDecoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.p) == 0 {
		d.err = errors.New("truncated")
		return 0
	}
	c := d.p[0]
	d.p = d.p[1:]
	return c
}

func (d *editDecoder) key() sstable.InternalKey {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.p)) {
		d.err = errors.New("truncated key")
	}
	if d.err != nil {
		return sstable.InternalKey{}
	}
	k := sstable.InternalKey{UserKey: slices.Clone(d.p[:n])}
	d.p = d.p[n:]
	k.Seq = d.uvarint()
	k.Kind = sstable.Kind(d.byte())
	return k
}

func decodeEdit(b []byte) (*versionEdit, error) {
	e := &versionEdit{}
	d := &editDecoder{p: b}
	for len(d.p) > 0 && d.err == nil {
		switch tag := d.byte(); tag {
		case tagLogNum:
			e.hasLogNum, e.logNum = true, d.uvarint()
		case tagNextFileNum:
			e.hasNextFile, e.nextFileNum = true, d.uvarint()
		case tagLastSeq:
			e.hasLastSeq, e.lastSeq = true, d.uvarint()
		case tagDeleted:
			lvl := int(d.byte())
			e.deleted = append(e.deleted, deletedTable{level: lvl, fileNum: d.uvarint()})
		case tagAdded:
			lvl := int(d.byte())
			m := &compaction.TableMeta{}
			m.FileNum = d.uvarint()
			m.Size = d.uvarint()
			m.Smallest = d.key()
			m.Largest = d.key()
			e.added = append(e.added, addedTable{level: lvl, meta: m})
		default:
			d.err = fmt.Errorf("unknown tag %d", tag)
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: manifest edit: %v", ErrCorruption, d.err)
	}
	for _, x := range e.deleted {
		if x.level >= compaction.NumLevels {
			return nil, fmt.Errorf("%w: manifest edit: level %d", ErrCorruption, x.level)
		}
	}
	for _, x := range e.added {
		if x.level >= compaction.NumLevels {
			return nil, fmt.Errorf("%w: manifest edit: level %d", ErrCorruption, x.level)
		}
	}
	return e, nil
}

// applyEdit returns the levels after e. Level 0 is kept oldest first (by file
// number: flushes allocate increasing numbers), other levels by smallest key.
func applyEdit(levels [compaction.NumLevels][]*compaction.TableMeta, e *versionEdit) ([compaction.NumLevels][]*compaction.TableMeta, error) {
	var out [compaction.NumLevels][]*compaction.TableMeta
	del := make(map[uint64]int, len(e.deleted))
	for _, d := range e.deleted {
		del[d.fileNum] = d.level
	}
	for lvl := range levels {
		changed := false
		for _, a := range e.added {
			if a.level == lvl {
				changed = true
			}
		}
		for _, d := range e.deleted {
			if d.level == lvl {
				changed = true
			}
		}
		if !changed {
			out[lvl] = levels[lvl]
			continue
		}
		var ts []*compaction.TableMeta
		for _, t := range levels[lvl] {
			if l, ok := del[t.FileNum]; ok && l == lvl {
				delete(del, t.FileNum)
				continue
			}
			ts = append(ts, t)
		}
		for _, a := range e.added {
			if a.level == lvl {
				ts = append(ts, a.meta)
			}
		}
		if lvl == 0 {
			slices.SortFunc(ts, func(a, b *compaction.TableMeta) int { return cmpU64(a.FileNum, b.FileNum) })
		} else {
			slices.SortFunc(ts, func(a, b *compaction.TableMeta) int {
				return sstable.CompareInternalKeys(a.Smallest, b.Smallest)
			})
			for i := 1; i < len(ts); i++ {
				if sstable.CompareInternalKeys(ts[i-1].Largest, ts[i].Smallest) >= 0 {
					return out, fmt.Errorf("%w: tables %d and %d overlap in L%d", ErrCorruption, ts[i-1].FileNum, ts[i].FileNum, lvl)
				}
			}
		}
		out[lvl] = ts
	}
	if len(del) > 0 {
		for fn, l := range del {
			return out, fmt.Errorf("%w: manifest deletes table %d absent from L%d", ErrCorruption, fn, l)
		}
	}
	return out, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

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
func (m *manifestWriter) write(e *versionEdit) error {
	if m.failed != nil {
		return fmt.Errorf("kv: an earlier manifest write failed: %w", m.failed)
	}
	_, err := m.w.WriteRecord(e.encode())
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

// File names.
func tableFileName(num uint64) string    { return fmt.Sprintf("%06d.sst", num) }
func stateFileName(num uint64) string    { return fmt.Sprintf("%06d.fstate", num) }
func walFileName(num uint64) string      { return fmt.Sprintf("%06d.log", num) }
func manifestFileName(num uint64) string { return fmt.Sprintf("MANIFEST-%06d", num) }

const (
	currentFileName = "CURRENT"
	lockFileName    = "LOCK"
)

type fileType int

const (
	fileTypeUnknown fileType = iota
	fileTypeTable
	fileTypeState
	fileTypeWAL
	fileTypeManifest
	fileTypeTemp
)

// parseFileName recognizes the store's file names.
func parseFileName(name string) (fileType, uint64) {
	var num uint64
	if strings.HasPrefix(name, "MANIFEST-") {
		if _, err := fmt.Sscanf(name, "MANIFEST-%d", &num); err == nil && name == manifestFileName(num) {
			return fileTypeManifest, num
		}
		return fileTypeUnknown, 0
	}
	if strings.HasSuffix(name, ".tmp") {
		return fileTypeTemp, 0
	}
	i := strings.IndexByte(name, '.')
	if i <= 0 {
		return fileTypeUnknown, 0
	}
	if _, err := fmt.Sscanf(name[:i], "%d", &num); err != nil {
		return fileTypeUnknown, 0
	}
	switch name[i:] {
	case ".sst":
		return fileTypeTable, num
	case ".fstate":
		return fileTypeState, num
	case ".log":
		return fileTypeWAL, num
	}
	return fileTypeUnknown, 0
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
	levels      [compaction.NumLevels][]*compaction.TableMeta
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
		e, err := decodeEdit(rec)
		if err != nil {
			return err
		}
		nrec++
		if e.hasLogNum {
			st.logNum = e.logNum
		}
		if e.hasNextFile {
			st.nextFileNum = e.nextFileNum
		}
		if e.hasLastSeq {
			st.lastSeq = e.lastSeq
		}
		st.levels, err = applyEdit(st.levels, e)
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

// snapshotEdit is an edit that recreates the whole state (the first record
// of a new manifest).
func snapshotEdit(levels [compaction.NumLevels][]*compaction.TableMeta, logNum, nextFile, lastSeq uint64) *versionEdit {
	e := &versionEdit{hasLogNum: true, logNum: logNum, hasNextFile: true, nextFileNum: nextFile, hasLastSeq: true, lastSeq: lastSeq}
	for lvl, ts := range levels {
		for _, t := range ts {
			e.added = append(e.added, addedTable{level: lvl, meta: t})
		}
	}
	return e
}

// createManifest writes a new manifest holding e and makes it current.
func createManifest(fs vfs.FS, dir string, num uint64, e *versionEdit) (*manifestWriter, error) {
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

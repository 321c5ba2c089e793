package kv

// The version edit: what one manifest record says (see docs/ARCHITECTURE.md,
// "On-disk formats") and its encoding. Applying an edit to the levels is applyedit.go,
// the manifest file that holds the records is manifest.go.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/internal/base"
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
	meta  *base.TableMeta
}

const (
	tagLogNum      = 1
	tagNextFileNum = 2
	tagLastSeq     = 3
	tagDeleted     = 4
	tagAdded       = 5
	// tagAddedRangeDels is tagAdded for a table with range tombstones
	// (base.TableMeta.HasRangeDels).
	tagAddedRangeDels = 6
)

func appendKey(dst []byte, k base.InternalKey) []byte {
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
		tag := byte(tagAdded)
		if a.meta.HasRangeDels {
			tag = tagAddedRangeDels
		}
		b = append(b, tag, byte(a.level))
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

func (d *editDecoder) key() base.InternalKey {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.p)) {
		d.err = errors.New("truncated key")
	}
	if d.err != nil {
		return base.InternalKey{}
	}
	k := base.InternalKey{UserKey: slices.Clone(d.p[:n])}
	d.p = d.p[n:]
	k.Seq = d.uvarint()
	k.Kind = base.KeyKind(d.byte())
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
		case tagAdded, tagAddedRangeDels:
			lvl := int(d.byte())
			m := &base.TableMeta{HasRangeDels: tag == tagAddedRangeDels}
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

// snapshotEdit is an edit that recreates the whole state (the first record
// of a new manifest).
func snapshotEdit(levels [compaction.NumLevels][]*base.TableMeta, logNum, nextFile, lastSeq uint64) *versionEdit {
	e := &versionEdit{hasLogNum: true, logNum: logNum, hasNextFile: true, nextFileNum: nextFile, hasLastSeq: true, lastSeq: lastSeq}
	for lvl, ts := range levels {
		for _, t := range ts {
			e.added = append(e.added, addedTable{level: lvl, meta: t})
		}
	}
	return e
}

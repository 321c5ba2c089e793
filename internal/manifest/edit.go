package manifest

// The version edit: what one manifest record says (docs/ARCHITECTURE.md,
// "On-disk formats") and its encoding.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/adaptkv/adaptkv/internal/base"
)

// VersionEdit is one manifest record: the change from one version to the
// next plus the store's counters at that point.
type VersionEdit struct {
	HasLogNum, HasNextFile, HasLastSeq bool
	LogNum                             uint64 // WALs with a smaller number are obsolete
	NextFileNum                        uint64
	LastSeq                            uint64
	Deleted                            []DeletedTable
	Added                              []NewTable
}

// DeletedTable is a table an edit removes from a level.
type DeletedTable struct {
	Level   int
	FileNum uint64
}

// NewTable is a table an edit adds to a level.
type NewTable struct {
	Level int
	Meta  *base.TableMeta
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
	// tagAddedRemote and tagAddedRangeDelsRemote are tagAdded and
	// tagAddedRangeDels for a table whose filter has a remote section: its
	// size (base.TableMeta.RemoteSize) follows the table's size. A table
	// without one keeps the older tags, so a store with a static policy
	// writes the manifest it always wrote.
	tagAddedRemote          = 7
	tagAddedRangeDelsRemote = 8
)

func appendKey(dst []byte, k base.InternalKey) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(k.UserKey)))
	dst = append(dst, k.UserKey...)
	dst = binary.AppendUvarint(dst, k.Seq)
	return append(dst, byte(k.Kind))
}

// Encode returns the edit as a manifest record (DecodeEdit reads it).
func (e *VersionEdit) Encode() []byte {
	var b []byte
	if e.HasLogNum {
		b = binary.AppendUvarint(append(b, tagLogNum), e.LogNum)
	}
	if e.HasNextFile {
		b = binary.AppendUvarint(append(b, tagNextFileNum), e.NextFileNum)
	}
	if e.HasLastSeq {
		b = binary.AppendUvarint(append(b, tagLastSeq), e.LastSeq)
	}
	for _, d := range e.Deleted {
		b = append(b, tagDeleted, byte(d.Level))
		b = binary.AppendUvarint(b, d.FileNum)
	}
	for _, a := range e.Added {
		tag := byte(tagAdded)
		if a.Meta.HasRangeDels {
			tag = tagAddedRangeDels
		}
		if a.Meta.RemoteSize > 0 {
			tag += tagAddedRemote - tagAdded
		}
		b = append(b, tag, byte(a.Level))
		b = binary.AppendUvarint(b, a.Meta.FileNum)
		b = binary.AppendUvarint(b, a.Meta.Size)
		if a.Meta.RemoteSize > 0 {
			b = binary.AppendUvarint(b, a.Meta.RemoteSize)
		}
		b = appendKey(b, a.Meta.Smallest)
		b = appendKey(b, a.Meta.Largest)
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

// DecodeEdit decodes a manifest record. Errors wrap base.ErrCorruption.
func DecodeEdit(b []byte) (*VersionEdit, error) {
	e := &VersionEdit{}
	d := &editDecoder{p: b}
	for len(d.p) > 0 && d.err == nil {
		switch tag := d.byte(); tag {
		case tagLogNum:
			e.HasLogNum, e.LogNum = true, d.uvarint()
		case tagNextFileNum:
			e.HasNextFile, e.NextFileNum = true, d.uvarint()
		case tagLastSeq:
			e.HasLastSeq, e.LastSeq = true, d.uvarint()
		case tagDeleted:
			lvl := int(d.byte())
			e.Deleted = append(e.Deleted, DeletedTable{Level: lvl, FileNum: d.uvarint()})
		case tagAdded, tagAddedRangeDels, tagAddedRemote, tagAddedRangeDelsRemote:
			lvl := int(d.byte())
			m := &base.TableMeta{HasRangeDels: tag == tagAddedRangeDels || tag == tagAddedRangeDelsRemote}
			m.FileNum = d.uvarint()
			m.Size = d.uvarint()
			if tag >= tagAddedRemote {
				if m.RemoteSize = d.uvarint(); d.err == nil && (m.RemoteSize == 0 || m.RemoteSize > m.Size) {
					d.err = fmt.Errorf("remote section of %d bytes in a table of %d", m.RemoteSize, m.Size)
				}
			}
			m.Smallest = d.key()
			m.Largest = d.key()
			e.Added = append(e.Added, NewTable{Level: lvl, Meta: m})
		default:
			d.err = fmt.Errorf("unknown tag %d", tag)
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: manifest edit: %v", base.ErrCorruption, d.err)
	}
	for _, x := range e.Deleted {
		if x.Level >= NumLevels {
			return nil, fmt.Errorf("%w: manifest edit: level %d", base.ErrCorruption, x.Level)
		}
	}
	for _, x := range e.Added {
		if x.Level >= NumLevels {
			return nil, fmt.Errorf("%w: manifest edit: level %d", base.ErrCorruption, x.Level)
		}
	}
	return e, nil
}

// SnapshotEdit is an edit that recreates the whole state (the first record
// of a new manifest).
func SnapshotEdit(levels [NumLevels][]*base.TableMeta, logNum, nextFile, lastSeq uint64) *VersionEdit {
	e := &VersionEdit{HasLogNum: true, LogNum: logNum, HasNextFile: true, NextFileNum: nextFile, HasLastSeq: true, LastSeq: lastSeq}
	for lvl, ts := range levels {
		for _, t := range ts {
			e.Added = append(e.Added, NewTable{Level: lvl, Meta: t})
		}
	}
	return e
}

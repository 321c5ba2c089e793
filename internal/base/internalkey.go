package base

import (
	"bytes"
	"cmp"
	"sync/atomic"
)

// KeyKind is the kind of an internal key. The values match Pebble's
// InternalKeyKind so keys pass through Pebble's sstable writer unchanged.
type KeyKind uint8

const (
	// KeyKindDelete is a point tombstone.
	KeyKindDelete KeyKind = 0
	// KeyKindSet is a key with a value.
	KeyKindSet KeyKind = 1
	// KeyKindRangeDelete is a range tombstone (package rangedel). Tables keep
	// range tombstones in a block of their own, never among the point
	// keys; a table bound with this kind is a range tombstone's start, or
	// (with sequence number MaxSeq) its exclusive end.
	KeyKindRangeDelete KeyKind = 15
)

// MaxSeq is the largest sequence number a key may carry (Pebble's trailer
// holds seq<<8|kind in 64 bits). A table bound at a range tombstone's
// exclusive end carries it, so that the bound sorts before every key with
// that user key.
const MaxSeq = 1<<56 - 1

// InternalKey is a user key with the sequence number of the write that made
// it and its kind. Internal keys sort by user key ascending, then by sequence
// number descending (newest first), then by kind descending.
type InternalKey struct {
	UserKey []byte
	Seq     uint64
	Kind    KeyKind
}

// CompareInternalKeys orders internal keys: user key ascending (bytes.Compare),
// then sequence number descending, then kind descending. It returns -1, 0 or +1.
func CompareInternalKeys(a, b InternalKey) int {
	if c := bytes.Compare(a.UserKey, b.UserKey); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Seq, a.Seq); c != 0 {
		return c
	}
	return cmp.Compare(b.Kind, a.Kind)
}

// Iterator walks internal keys in internal-key order. Positioning methods
// report whether the iterator is now at a key; Key and Value are valid until
// the next positioning call. Error reports the first error met; a nil Error
// after a false positioning result means the iteration is exhausted.
//
// Tables, memtables and the merging iterator of the compaction package all
// implement it.
type Iterator interface {
	// First moves to the smallest internal key.
	First() bool
	// Last moves to the largest internal key.
	Last() bool
	// SeekGE moves to the first internal key whose user key is >= key.
	SeekGE(key []byte) bool
	// SeekLT moves to the last internal key whose user key is < key.
	SeekLT(key []byte) bool
	// Next moves to the next internal key.
	Next() bool
	// Prev moves to the previous internal key.
	Prev() bool
	// Key returns the current internal key.
	Key() InternalKey
	// Value returns the current value (nil for tombstones).
	Value() []byte
	// Error returns the first error the iterator met.
	Error() error
	// Close releases the iterator's resources and returns Error.
	Close() error
}

// TableMeta describes one table for picking compactions and in the
// manifest; compaction.Run returns one for each table it writes. Smallest
// and Largest bound the table's keys: its first and last point keys,
// widened to its range tombstones (a tombstone's start, or its exclusive
// end with sequence number MaxSeq). HasRangeDels says the table holds range
// tombstones.
type TableMeta struct {
	FileNum, Size     uint64
	Smallest, Largest InternalKey
	HasRangeDels      bool
	// RemoteSize is the part of Size that is the filter's remote section
	// (filterpolicy: read only to fix a false positive, never by a Get
	// that the filter answers or by a compaction). LevelSize leaves it
	// out, so that an adaptive policy's 8 bytes a key do not change the
	// shape of the LSM.
	RemoteSize uint64
	// Open is the store's slot on this table (not in the manifest): kv's
	// table cache keeps the table's open reader there while it is open, so
	// that a read holding the metadata finds it without a map lookup.
	Open Slot
}

// LevelSize is the size that level sizing and compaction picking count:
// the file's size without the filter's remote section.
func (t *TableMeta) LevelSize() uint64 { return t.Size - min(t.RemoteSize, t.Size) }

// Slot holds one value, loaded and stored atomically. It must not be
// copied after first use (go vet's copylocks checks).
type Slot struct {
	_ noCopy
	v atomic.Value
}

// Load returns the value last stored (nil: none).
func (s *Slot) Load() any { return s.v.Load() }

// Store sets the value; every value stored in one slot has the same type.
func (s *Slot) Store(v any) { s.v.Store(v) }

// CompareAndSwap stores new if the slot holds old, and reports whether it
// did.
func (s *Slot) CompareAndSwap(old, new any) bool { return s.v.CompareAndSwap(old, new) }

// noCopy makes go vet's copylocks report copies of the struct holding it.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

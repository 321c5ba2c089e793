package kv

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/kv/internal/memtable"
)

// Batch encoding (also the WAL record payload):
//
//	[0:8)   WAL synced offset (filled by the commit leader, see wal.go)
//	[8:16)  sequence number of the first entry, little endian
//	[16:20) entry count, little endian
//	entries: kind byte, uvarint key length, key, and for a Set a uvarint
//	value length and the value; for a range deletion (kind
//	base.KeyKindRangeDelete) the key is the range's start and the value its
//	end.
//
// Entry i of a batch gets sequence number seq+i, so a later write of the same
// key in a batch wins.
const batchHeaderLen = 20

// Batch is a set of writes applied atomically by DB.Apply (one WAL record).
// Set and Delete copy their arguments. A Batch is not safe for concurrent use.
type Batch struct {
	data  []byte
	count uint32
}

// NewBatch returns an empty batch.
func NewBatch() *Batch { return &Batch{} }

// NewBatch returns an empty batch (a DB method too, as in Pebble).
func (db *DB) NewBatch() *Batch { return NewBatch() }

func (b *Batch) init() {
	if len(b.data) < batchHeaderLen {
		b.data = make([]byte, batchHeaderLen, 256)
	}
}

func checkKey(key []byte) error {
	if len(key) == 0 {
		return ErrEmptyKey
	}
	if len(key) > MaxKeySize {
		return fmt.Errorf("%w: %d bytes > %d", ErrKeyTooLarge, len(key), MaxKeySize)
	}
	return nil
}

// Set adds a write of key -> value.
func (b *Batch) Set(key, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if len(value) > MaxValueSize {
		return fmt.Errorf("%w: %d bytes > %d", ErrValueTooLarge, len(value), MaxValueSize)
	}
	b.appendEntry(base.KeyKindSet, key, value)
	return nil
}

// appendEntry encodes one entry: kind, key, and for all but a point
// deletion the value (a range deletion's end).
func (b *Batch) appendEntry(kind base.KeyKind, key, value []byte) {
	b.init()
	b.data = append(b.data, byte(kind))
	b.data = binary.AppendUvarint(b.data, uint64(len(key)))
	b.data = append(b.data, key...)
	if kind != base.KeyKindDelete {
		b.data = binary.AppendUvarint(b.data, uint64(len(value)))
		b.data = append(b.data, value...)
	}
	b.count++
}

// Delete adds a deletion of key.
func (b *Batch) Delete(key []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	b.appendEntry(base.KeyKindDelete, key, nil)
	return nil
}

// DeleteRange adds a deletion of every key in [start, end) (see
// DB.DeleteRange). Writes added to the batch after it are not deleted.
func (b *Batch) DeleteRange(start, end []byte) error {
	if err := checkKey(start); err != nil {
		return err
	}
	if err := checkKey(end); err != nil {
		return err
	}
	if bytes.Compare(start, end) >= 0 {
		return fmt.Errorf("%w: start %q is not below end %q", ErrInvalidRange, start, end)
	}
	b.appendEntry(base.KeyKindRangeDelete, start, end)
	return nil
}

// Count is the number of writes in the batch.
func (b *Batch) Count() int { return int(b.count) }

// Len is the encoded size of the batch in bytes.
func (b *Batch) Len() int { return len(b.data) }

// memSize bounds the memtable bytes the batch's entries take: their keys
// and values (within the encoding) and BatchEntryOverhead each.
func (b *Batch) memSize() int64 { return int64(len(b.data)) + int64(b.count)*int64(BatchEntryOverhead) }

// Reset empties the batch for reuse.
func (b *Batch) Reset() {
	if len(b.data) >= batchHeaderLen {
		b.data = b.data[:batchHeaderLen]
		clear(b.data)
	}
	b.count = 0
}

func (b *Batch) setSeq(seq uint64) {
	binary.LittleEndian.PutUint64(b.data[8:16], seq)
	binary.LittleEndian.PutUint32(b.data[16:20], b.count)
}

// batchEntry is one decoded write.
type batchEntry struct {
	kind       base.KeyKind
	key, value []byte // a range deletion's start and end
}

// applyTo inserts the entry into mt at sequence number seq.
func (e batchEntry) applyTo(mt *memtable.MemTable, seq uint64) {
	if e.kind == base.KeyKindRangeDelete {
		mt.AddRangeDel(e.key, e.value, seq)
		return
	}
	mt.Add(base.InternalKey{UserKey: e.key, Seq: seq, Kind: e.kind}, e.value)
}

// applyBatch inserts the entries of an encoded batch that the store
// accepted into mt at their sequence numbers: range tombstones one at a
// time, point entries all at once (memtable.AddAll, which overlaps their
// searches' cache misses: a bulk load's large memtable takes a batch of
// 256 entries some 1.6x faster, BenchmarkAddAllLarge). The order does not
// matter: readers see the entries by sequence number, once the batch's
// group is published. es is scratch space; applyBatch returns it, cleared,
// for the next batch (nil after a batch of more than maxScratchEntries).
func applyBatch(mt *memtable.MemTable, data []byte, es []memtable.Entry) []memtable.Entry {
	es = es[:0]
	_, _, _ = decodeBatch(data, func(seq uint64, e batchEntry) error {
		if e.kind == base.KeyKindRangeDelete {
			e.applyTo(mt, seq)
			return nil
		}
		es = append(es, memtable.Entry{Key: base.InternalKey{UserKey: e.key, Seq: seq, Kind: e.kind}, Value: e.value})
		return nil
	})
	if len(es) == 1 {
		mt.Add(es[0].Key, es[0].Value) // no searches to overlap
	} else {
		mt.AddAll(es)
	}
	clear(es) // no hold on the caller's batch
	if cap(es) > maxScratchEntries {
		return nil // a huge batch's scratch is not kept for the next
	}
	return es[:0]
}

// maxScratchEntries is the most entries of scratch space applyBatch keeps
// for the next batch (256 KiB).
const maxScratchEntries = 4096

// decodeBatch walks an encoded batch, calling fn for each entry with its
// sequence number. Key and value alias data. Malformed bytes return an error
// wrapping ErrCorruption.
func decodeBatch(data []byte, fn func(seq uint64, e batchEntry) error) (first uint64, count uint32, err error) {
	if len(data) < batchHeaderLen {
		return 0, 0, fmt.Errorf("%w: batch of %d bytes, header needs %d", ErrCorruption, len(data), batchHeaderLen)
	}
	first = binary.LittleEndian.Uint64(data[8:16])
	count = binary.LittleEndian.Uint32(data[16:20])
	p := data[batchHeaderLen:]
	for i := uint32(0); i < count; i++ {
		if len(p) < 1 {
			return 0, 0, fmt.Errorf("%w: batch truncated at entry %d of %d", ErrCorruption, i, count)
		}
		var e batchEntry
		e.kind = base.KeyKind(p[0])
		p = p[1:]
		if e.kind != base.KeyKindSet && e.kind != base.KeyKindDelete && e.kind != base.KeyKindRangeDelete {
			return 0, 0, fmt.Errorf("%w: batch entry %d has kind %d", ErrCorruption, i, e.kind)
		}
		var ok bool
		if e.key, p, ok = readLenPrefixed(p, MaxKeySize); !ok || len(e.key) == 0 {
			return 0, 0, fmt.Errorf("%w: batch entry %d has a bad key", ErrCorruption, i)
		}
		switch e.kind {
		case base.KeyKindSet:
			if e.value, p, ok = readLenPrefixed(p, MaxValueSize); !ok {
				return 0, 0, fmt.Errorf("%w: batch entry %d has a bad value", ErrCorruption, i)
			}
		case base.KeyKindRangeDelete:
			if e.value, p, ok = readLenPrefixed(p, MaxKeySize); !ok || bytes.Compare(e.key, e.value) >= 0 {
				return 0, 0, fmt.Errorf("%w: batch entry %d has a bad range end", ErrCorruption, i)
			}
		}
		if fn != nil {
			if err := fn(first+uint64(i), e); err != nil {
				return 0, 0, err
			}
		}
	}
	if len(p) != 0 {
		return 0, 0, fmt.Errorf("%w: %d trailing bytes after batch", ErrCorruption, len(p))
	}
	return first, count, nil
}

func readLenPrefixed(p []byte, limit int) (v, rest []byte, ok bool) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(limit) || n > uint64(len(p)-k) {
		return nil, nil, false
	}
	p = p[k:]
	return p[:n:n], p[n:], true
}

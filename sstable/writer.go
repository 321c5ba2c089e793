package sstable

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/rangedel"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage"
	psst "github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Format is the block layout a table is written in (WriterOptions.Format).
// Open reads tables of either.
type Format uint8

const (
	// FormatColumnar writes columnar data blocks (Pebble's
	// TableFormatPebblev5, TableFormat): a lookup of a present key costs
	// less. The default.
	FormatColumnar Format = iota
	// FormatRow writes row blocks (Pebble's TableFormatPebblev4, what a
	// pebble.DB writes by default): a table costs less to write, a lookup
	// of a present key more (docs/BENCHMARKS.md, "Table layout").
	FormatRow
)

// TableFormat is the Pebble table format of FormatColumnar.
const TableFormat = psst.TableFormatPebblev5

// pebbleFormat returns f's Pebble table format.
func (f Format) pebbleFormat() (psst.TableFormat, error) {
	switch f {
	case FormatColumnar:
		return TableFormat, nil
	case FormatRow:
		return psst.TableFormatPebblev4, nil
	}
	return 0, fmt.Errorf("%w: table format %d", ErrInvalidOptions, f)
}

// formatNames are the formats' names, by Format.
var formatNames = [...]string{FormatColumnar: "columnar", FormatRow: "row"}

// Valid reports whether f is one of the formats above.
func (f Format) Valid() bool { return int(f) < len(formatNames) }

// String names the format ("columnar", "row").
func (f Format) String() string {
	if f.Valid() {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// ParseFormat returns the format String names name.
func ParseFormat(name string) (Format, error) {
	for f, n := range formatNames {
		if n == name {
			return Format(f), nil
		}
	}
	return 0, fmt.Errorf("%w: table format %q (want %s)", ErrInvalidOptions, name, strings.Join(formatNames[:], " or "))
}

// MaxSeq is the largest sequence number a key may carry (Pebble's trailer
// holds seq<<8|kind in 64 bits).
const MaxSeq = base.MaxSeq

// WriterOptions configure Create.
type WriterOptions struct {
	// Policy is the filter policy (nil or "none": no filter block).
	Policy filterpolicy.Policy
	// BlockSize is the target data block size (default 4096).
	BlockSize int
	// FilterSeed fixes the filter's seed (0: the policy's seed source).
	FilterSeed uint64
	// KnownNegatives are keys the store found absent and asks often,
	// sorted by key (nil: none). Of those in the table's key range that the
	// table does not hold, a policy that builds around them
	// (Policy.KnownNegatives: stacked) makes them a layer of its filter,
	// and an adaptive policy fixes its false positives among them before
	// the filter block is written (filterpolicy.PreAdaptStats, reported in
	// TableInfo.PreAdapted); static policies ignore them.
	KnownNegatives []filter.KnownNegative
	// Format is the block layout (default FormatColumnar).
	Format Format
}

// TableInfo describes a finished table.
type TableInfo struct {
	// NumEntries counts the point keys, RangeDels the range tombstones
	// (one per fragment and sequence number).
	Size, NumEntries, RangeDels uint64
	// Smallest and Largest bound the point keys and the range tombstones
	// (base.TableMeta).
	Smallest, Largest InternalKey
	// RemoteSize is the part of Size that is the filter block's remote
	// section (0 without one; base.TableMeta.RemoteSize).
	RemoteSize uint64
	// PreAdapted is what the filter's pre-adaptation did (see
	// WriterOptions.KnownNegatives).
	PreAdapted filterpolicy.PreAdaptStats
}

// Writer writes one table. It is not safe for concurrent use.
type Writer struct {
	fs       vfs.FS
	path     string
	w        *abortableWritable
	rw       psst.RawWriter
	wp       *filterpolicy.WriterPolicy
	n        uint64
	smallest InternalKey
	last     InternalKey
	lastBuf  []byte
	closed   bool
	err      error

	// Range tombstones: how many, the first fragment's start (as a bound)
	// and the last one's end.
	nRangeDels uint64
	rdSmallest InternalKey
	rdEnd      []byte
}

// bytesPerSync is how often a table being written is handed to the disk.
const bytesPerSync = 512 << 10

// Create creates the table file path on fs and returns its writer.
func Create(fs vfs.FS, path string, opts WriterOptions) (*Writer, error) {
	if fs == nil {
		return nil, fmt.Errorf("%w: nil vfs.FS", ErrInvalidOptions)
	}
	if path == "" {
		return nil, fmt.Errorf("%w: empty path", ErrInvalidOptions)
	}
	if opts.BlockSize < 0 {
		return nil, fmt.Errorf("%w: BlockSize %d", ErrInvalidOptions, opts.BlockSize)
	}
	if opts.BlockSize == 0 {
		opts.BlockSize = 4096
	}
	format, err := opts.Format.pebbleFormat()
	if err != nil {
		return nil, err
	}
	var wp *filterpolicy.WriterPolicy
	if opts.Policy != nil && opts.Policy.Name() != "none" {
		if wp, err = filterpolicy.ForTable(opts.Policy, opts.FilterSeed, opts.KnownNegatives); err != nil {
			return nil, base.InvalidOptions("", err)
		}
	}
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	// Write back every 512 KiB as the table grows (Pebble's BytesPerSync
	// for tables), so the fsync at the end finds little left to write and
	// a compaction's disk writes overlap its merging.
	f = vfs.NewSyncingFile(f, vfs.SyncingFileOptions{BytesPerSync: bytesPerSync})
	aw := &abortableWritable{Writable: newFileWritable(f)}
	wo := psst.WriterOptions{
		BlockSize:          opts.BlockSize,
		Comparer:           pebble.DefaultComparer,
		Compression:        psst.SnappyCompression,
		TableFormat:        format,
		DisableValueBlocks: true,
	}
	if wp != nil {
		wo.FilterPolicy = wp
		wo.FilterType = psst.TableFilter
	}
	return &Writer{fs: fs, path: path, w: aw, rw: psst.NewWriter(aw, wo).Raw(), wp: wp}, nil
}

// Add appends a key. Keys must arrive in strictly increasing internal-key
// order: user key ascending, then sequence number descending, then kind
// descending. The key and value are copied.
func (w *Writer) Add(key InternalKey, value []byte) error {
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	if key.Seq > MaxSeq {
		return fmt.Errorf("%w: sequence number %d exceeds %d", ErrInvalidKey, key.Seq, uint64(MaxSeq))
	}
	if key.Kind != KeyKindSet && key.Kind != KeyKindDelete {
		return fmt.Errorf("%w: kind %d", ErrInvalidKey, key.Kind)
	}
	if w.n > 0 && CompareInternalKeys(w.last, key) >= 0 {
		return fmt.Errorf("%w: %q#%d,%d after %q#%d,%d", ErrOutOfOrder,
			key.UserKey, key.Seq, key.Kind, w.last.UserKey, w.last.Seq, w.last.Kind)
	}
	if key.Kind == KeyKindDelete {
		value = nil
	}
	ik := pebble.MakeInternalKey(key.UserKey, pebble.SeqNum(key.Seq), pebble.InternalKeyKind(key.Kind))
	if err := w.rw.Add(ik, value, false); err != nil {
		w.err = err
		return err
	}
	if w.n == 0 {
		w.smallest = InternalKey{UserKey: bytes.Clone(key.UserKey), Seq: key.Seq, Kind: key.Kind}
		if w.smallest.UserKey == nil {
			w.smallest.UserKey = []byte{}
		}
	}
	w.lastBuf = append(w.lastBuf[:0], key.UserKey...)
	w.last = InternalKey{UserKey: w.lastBuf, Seq: key.Seq, Kind: key.Kind}
	w.n++
	return nil
}

// AddRangeDels adds range tombstone fragments (a rangedel.Set's Fragments,
// or a Clip of them) to the table's range-deletion block, Pebble's. The
// fragments must be in key order and start at or after the end of those
// added before, each with sequence numbers descending and at most MaxSeq.
// They widen the table's bounds (TableInfo). They may come before, among or
// after the point keys.
func (w *Writer) AddRangeDels(frags []rangedel.Fragment) error {
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	for _, f := range frags {
		if err := w.checkFragment(f); err != nil {
			return err
		}
		span := psst.Span{Start: f.Start, End: f.End}
		for _, seq := range f.Seqs {
			span.Keys = grow(span.Keys)
			span.Keys[len(span.Keys)-1].Trailer = pebble.MakeInternalKeyTrailer(pebble.SeqNum(seq), pebble.InternalKeyKindRangeDelete)
		}
		if err := w.rw.EncodeSpan(span); err != nil {
			w.err = err
			return err
		}
		if w.nRangeDels == 0 {
			w.rdSmallest = InternalKey{UserKey: bytes.Clone(f.Start), Seq: f.Seqs[0], Kind: base.KeyKindRangeDelete}
		}
		w.rdEnd = append(w.rdEnd[:0], f.End...)
		w.nRangeDels += uint64(len(f.Seqs))
	}
	return nil
}

// grow appends a zero element (the span's keys are of a type Pebble keeps
// internal: this names it by inference).
func grow[T any](s []T) []T {
	var zero T
	return append(s, zero)
}

func (w *Writer) checkFragment(f rangedel.Fragment) error {
	if !f.Valid() || f.Seqs[0] > MaxSeq { // Valid: Seqs[0] is the largest
		return fmt.Errorf("%w: range tombstone [%q, %q) with sequence numbers %v (want start below end, sequence numbers descending, at most %d)",
			ErrInvalidKey, f.Start, f.End, f.Seqs, uint64(MaxSeq))
	}
	if w.nRangeDels > 0 && bytes.Compare(w.rdEnd, f.Start) > 0 {
		return fmt.Errorf("%w: range tombstone [%q, %q) after one ending at %q", ErrOutOfOrder, f.Start, f.End, w.rdEnd)
	}
	return nil
}

// EstimatedSize is the approximate size of the table if closed now.
func (w *Writer) EstimatedSize() uint64 {
	if w.closed {
		return 0
	}
	return w.rw.EstimatedSize()
}

// Close finishes the table (data, index, filter block with its remote
// representation), syncs and closes the file. A failed filter build fails
// Close and removes the file.
func (w *Writer) Close() (TableInfo, error) {
	if w.closed {
		return TableInfo{}, ErrClosed
	}
	w.closed = true
	if w.err != nil {
		w.abort()
		return TableInfo{}, w.err
	}
	if err := w.rw.Close(); err != nil {
		_ = w.fs.Remove(w.path)
		return TableInfo{}, err
	}
	if w.wp != nil {
		if err := w.wp.Err(); err != nil {
			_ = w.fs.Remove(w.path)
			return TableInfo{}, err
		}
	}
	md, err := w.rw.Metadata()
	if err != nil {
		return TableInfo{}, err
	}
	info := TableInfo{Size: md.Size, NumEntries: w.n, RangeDels: w.nRangeDels, Smallest: w.smallest}
	if w.wp != nil {
		info.PreAdapted = w.wp.PreAdapted()
		if h := w.wp.Header(); h.HasRemote {
			info.RemoteSize = uint64(h.RemoteSize())
		}
	}
	if w.n > 0 {
		info.Largest = InternalKey{UserKey: bytes.Clone(w.last.UserKey), Seq: w.last.Seq, Kind: w.last.Kind}
		if info.Largest.UserKey == nil {
			info.Largest.UserKey = []byte{}
		}
	}
	if w.nRangeDels > 0 {
		// A tombstone's exclusive end bounds the table as the smallest
		// internal key of its user key (Pebble's range-deletion sentinel).
		end := InternalKey{UserKey: bytes.Clone(w.rdEnd), Seq: MaxSeq, Kind: base.KeyKindRangeDelete}
		if w.n == 0 || CompareInternalKeys(w.rdSmallest, info.Smallest) < 0 {
			info.Smallest = w.rdSmallest
		}
		if w.n == 0 || CompareInternalKeys(end, info.Largest) > 0 {
			info.Largest = end
		}
	}
	return info, nil
}

// Abort abandons the table: it closes and removes the file.
func (w *Writer) Abort() error {
	if w.closed {
		return ErrClosed
	}
	w.closed = true
	w.abort()
	if err := w.fs.Remove(w.path); err != nil && !errors.Is(err, errNotExist) {
		return err
	}
	return nil
}

func (w *Writer) abort() {
	w.w.aborted.Store(true)
	_ = w.rw.Close() // stops Pebble's write goroutine; every write now fails fast
	w.w.abortOnce()
}

var errAborted = errors.New("sstable: writer aborted")

// abortableWritable lets Abort stop a table mid-write: once aborted, writes
// fail and Finish closes the file without syncing.
type abortableWritable struct {
	objstorage.Writable
	aborted atomic.Bool // set by Abort while Pebble's writer goroutine may be writing
	done    bool
}

func (a *abortableWritable) Write(p []byte) error {
	if a.aborted.Load() {
		return errAborted
	}
	return a.Writable.Write(p)
}

func (a *abortableWritable) Finish() error {
	if a.aborted.Load() {
		a.abortOnce()
		return errAborted
	}
	a.done = true
	return a.Writable.Finish()
}

func (a *abortableWritable) Abort() { a.abortOnce() }

func (a *abortableWritable) abortOnce() {
	if !a.done {
		a.done = true
		a.Writable.Abort()
	}
}

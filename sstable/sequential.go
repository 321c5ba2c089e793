package sstable

import (
	"context"

	"github.com/adaptkv/adaptkv/internal/freelist"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Reading and writing whole tables in large pieces. Pebble's reader asks
// for one block at a time (about 4 KiB) and its buffered writable writes
// through a 4 KiB buffer, so a compaction that reads and writes tables end
// to end would pay a system call per block each way; on a 2 MiB table that
// is about a thousand calls, which measured at a fifth of a compaction's
// CPU time (docs/ARCHITECTURE.md, "Compactions").

// readerAt is the part of objstorage.Readable a read handle uses.
type readerAt interface {
	ReadAt(ctx context.Context, p []byte, off int64) error
}

// readaheadSize is what a sequential read handle reads at once.
const readaheadSize = 256 << 10

// readaheadHandle serves the block reads of one iterator that scans a table
// in order (ReaderOptions.Sequential) from a window it refills with one
// read of readaheadSize. A read outside the window (a seek back, the index
// or footer) refills it from that offset; a read larger than the window
// goes straight to the file. Not safe for concurrent use, as Pebble's read
// handles (one per iterator).
type readaheadHandle struct {
	r    readerAt
	size int64  // the table's size
	buf  []byte // the window: the table's bytes [off, off+len(buf))
	off  int64
}

func (h *readaheadHandle) ReadAt(ctx context.Context, p []byte, off int64) error {
	end := off + int64(len(p))
	if off >= h.off && end <= h.off+int64(len(h.buf)) {
		copy(p, h.buf[off-h.off:])
		return nil
	}
	if len(p) >= readaheadSize || end > h.size {
		return h.r.ReadAt(ctx, p, off)
	}
	n := min(int64(readaheadSize), h.size-off)
	if cap(h.buf) < int(n) {
		h.buf = getBigBuf()
	}
	h.buf = h.buf[:n]
	if err := h.r.ReadAt(ctx, h.buf, off); err != nil {
		h.buf = h.buf[:0]
		return err
	}
	h.off = off
	copy(p, h.buf)
	return nil
}

func (h *readaheadHandle) Close() error {
	putBigBuf(h.buf)
	h.buf = nil
	return nil
}

func (h *readaheadHandle) SetupForCompaction() {}

func (h *readaheadHandle) RecordCacheHit(context.Context, int64, int64) {}

// fileWritable is objstorage.Writable over a vfs.File with a buffer of
// bigBufSize: Finish writes what is buffered, fsyncs and closes.
type fileWritable struct {
	f   vfs.File
	buf []byte
}

func newFileWritable(f vfs.File) *fileWritable {
	return &fileWritable{f: f, buf: getBigBuf()[:0]}
}

func (w *fileWritable) Write(p []byte) error {
	if len(w.buf)+len(p) > cap(w.buf) {
		if err := w.flush(); err != nil {
			return err
		}
		if len(p) >= cap(w.buf) {
			_, err := w.f.Write(p)
			return err
		}
	}
	w.buf = append(w.buf, p...)
	return nil
}

func (w *fileWritable) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.f.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

func (w *fileWritable) Finish() error {
	err := w.flush()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.release()
	return err
}

func (w *fileWritable) Abort() {
	_ = w.f.Close()
	w.release()
}

// release hands the buffer back; the writable writes nothing more.
func (w *fileWritable) release() {
	putBigBuf(w.buf)
	w.buf = nil
}

// bigBufSize is the size of both the read-ahead window and the write
// buffer, so one free list serves both.
const bigBufSize = readaheadSize

// bigBufs recycles the read-ahead windows and write buffers: a store that
// flushes and compacts opens a window for every input table and a buffer
// for every output, 256 KiB each, and allocating them was a third of the
// bytes allocated by a NoSync write stream (BenchmarkWriteVsPebble's
// memory profile), each of them zeroed and collected. As adaptive's hash
// slices, a small free list rather than a sync.Pool, which every GC empties:
// at most maxBigBufs (2 MiB), enough for a flush and two compactions with a
// few inputs each.
const maxBigBufs = 8

var bigBufs = freelist.New[[]byte](maxBigBufs)

func getBigBuf() []byte {
	if b, ok := bigBufs.Get(); ok {
		return b
	}
	return make([]byte, bigBufSize)
}

// putBigBuf offers b for reuse (nil or a smaller slice is ignored); the
// caller must not use it again.
func putBigBuf(b []byte) {
	if cap(b) != bigBufSize {
		return
	}
	bigBufs.Put(b[:bigBufSize])
}

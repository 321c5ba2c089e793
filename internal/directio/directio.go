// Package directio reads a store's tables the way cold storage would be
// read: around the operating system's page cache (O_DIRECT), so that every
// read that misses the store's own block cache is a read of the device,
// and it counts those reads.
//
// FS wraps a vfs.FS. Files it opens for reading whose names end in ".sst"
// (tables, for both adaptkv and Pebble) are read through a second
// descriptor opened with O_DIRECT: each ReadAt reads the 4 KiB-aligned
// span around the bytes asked for into an aligned buffer and copies them
// out (RocksDB's use_direct_reads works the same way). Everything else
// (writes, other files, metadata) passes through. With Direct off the FS
// only counts, so the same counters read the same way in both modes.
//
// O_DIRECT is Linux's; elsewhere New fails with an error when asked
// for it. File systems without it (tmpfs) fail at the first Open.
package directio

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Align is the alignment of direct reads: offsets, lengths and buffers
// are multiples of it (the logical block size of common devices is 512 or
// 4096 bytes; 4096 serves both).
const Align = 4096

// errUnsupported is returned by New for direct reads on a system without
// O_DIRECT, and wrapped by Open where the file system refuses it.
var errUnsupported = errors.New("directio: direct reads are not supported here")

// Stats counts the reads of table files: each ReadAt that reached the
// file (a device read in direct mode) and the bytes it read (the aligned
// span in direct mode).
type Stats struct {
	Reads, Bytes atomic.Uint64
}

// FS is a vfs.FS whose table files are read directly (or only counted).
type FS struct {
	vfs.FS
	direct bool
	stats  *Stats
}

// New returns fs with its table reads counted in stats (a new Stats if
// nil) and, with direct, made with O_DIRECT. fs must be a file system of
// the operating system (vfs.Default, possibly wrapped) when direct is set:
// the names it is given are opened again with O_DIRECT.
func New(fs vfs.FS, direct bool, stats *Stats) (*FS, error) {
	if direct && !supported {
		return nil, errUnsupported
	}
	if stats == nil {
		stats = new(Stats)
	}
	return &FS{FS: fs, direct: direct, stats: stats}, nil
}

// Stats returns the counters of the FS's table reads.
func (fs *FS) Stats() *Stats { return fs.stats }

// Direct reports whether table reads bypass the page cache.
func (fs *FS) Direct() bool { return fs.direct }

// IsTable reports whether name is a table file, the files FS reads
// directly.
func IsTable(name string) bool { return strings.HasSuffix(name, ".sst") }

// Open implements vfs.FS.
func (fs *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	if err != nil || !IsTable(name) {
		return f, err
	}
	tf := &file{File: f, stats: fs.stats}
	if fs.direct {
		d, err := openDirect(name)
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("%w: %s: %w", errUnsupported, name, err)
		}
		tf.direct = d
	}
	return tf, nil
}

// file is a table opened for reading.
type file struct {
	vfs.File
	direct directFile // nil: counted reads of File
	stats  *Stats
	mu     sync.Mutex // guards pos
	pos    int64      // Read's offset
}

// directFile is a descriptor opened with O_DIRECT.
type directFile interface {
	pread(p []byte, off int64) (int, error)
	close() error
}

// ReadAt implements io.ReaderAt.
func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if f.direct == nil {
		n, err := f.File.ReadAt(p, off)
		f.stats.Reads.Add(1)
		f.stats.Bytes.Add(uint64(n))
		return n, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off < 0 {
		return 0, fmt.Errorf("directio: negative offset %d", off)
	}
	start := off &^ (Align - 1)
	end := (off + int64(len(p)) + Align - 1) &^ (Align - 1)
	buf := getBuffer(int(end - start))
	defer putBuffer(buf)
	n, err := f.direct.pread(buf.b, start)
	f.stats.Reads.Add(1)
	f.stats.Bytes.Add(uint64(max(n, 0)+Align-1) &^ (Align - 1)) // the device reads whole blocks
	skip := int(off - start)
	if n <= skip {
		if err == nil {
			err = io.EOF
		}
		return 0, err
	}
	c := copy(p, buf.b[skip:n])
	if c < len(p) && err == nil {
		err = io.EOF // the file ends inside p
	}
	return c, err
}

// Read implements io.Reader through ReadAt, so that it is direct too.
func (f *file) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Prefetch implements vfs.File: a direct file has no page cache to
// prefetch into.
func (f *file) Prefetch(offset, length int64) error {
	if f.direct != nil {
		return nil
	}
	return f.File.Prefetch(offset, length)
}

// Close implements io.Closer.
func (f *file) Close() error {
	err := f.File.Close()
	if f.direct != nil {
		err = errors.Join(err, f.direct.close())
	}
	return err
}

// alignedBuffer is an Align-aligned slice of a larger allocation.
type alignedBuffer struct{ b []byte }

// bufferPools hold aligned buffers by size class: Align << i bytes.
var bufferPools [12]sync.Pool // up to 8 MiB; larger spans allocate

func sizeClass(n int) int {
	c := 0
	for Align<<c < n {
		c++
	}
	return c
}

func getBuffer(n int) *alignedBuffer {
	c := sizeClass(n)
	if c < len(bufferPools) {
		if b, ok := bufferPools[c].Get().(*alignedBuffer); ok {
			b.b = b.b[:n]
			return b
		}
		return &alignedBuffer{b: alignedSlice(Align << c)[:n]}
	}
	return &alignedBuffer{b: alignedSlice(n)}
}

func putBuffer(b *alignedBuffer) {
	c := sizeClass(cap(b.b))
	if c < len(bufferPools) && cap(b.b) == Align<<c {
		bufferPools[c].Put(b)
	}
}

// alignedSlice returns n bytes starting at an Align-aligned address.
func alignedSlice(n int) []byte {
	raw := make([]byte, n+Align)
	skip := int((Align - uintptr(unsafe.Pointer(&raw[0]))%Align) % Align)
	return raw[skip : skip+n : skip+n]
}

// Check reports whether the file at path (of the operating system's file
// system) can be opened with O_DIRECT: an error if not (no O_DIRECT here, or a file system without it, such as tmpfs).
func Check(path string) error {
	if !supported {
		return errUnsupported
	}
	d, err := openDirect(path)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errUnsupported, path, err)
	}
	return d.close()
}

package kv

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walMappingSupported: on Linux, pages written through a shared mapping of a
// file are the file's page cache (they survive the process) and fdatasync
// writes them back like pages written with write(2).
const walMappingSupported = true

// mapWAL maps the first size bytes of f, an empty file of the OS file
// system, after allocating them (fallocate, so the file is size bytes of
// zeros with its blocks reserved: a write through the mapping never meets a
// full disk). Writes through the mapping then need no system call. Its pages
// are faulted in up to populate bytes ahead of the writer (populateAhead).
func mapWAL(f vfs.File, size, populate int) (*walMapping, error) {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return nil, errNoWALMapping
	}
	m := &walMapping{f: f, fd: int(fd), step: size, reach: populate}
	if err := m.grow(size); err != nil {
		return nil, err
	}
	return m, nil
}

// grow extends the file and the mapping to at least need bytes, in steps.
func (m *walMapping) grow(need int) error {
	size := len(m.data)
	for size < need {
		size += m.step
	}
	if err := syscall.Fallocate(m.fd, 0, int64(len(m.data)), int64(size-len(m.data))); err != nil {
		return fmt.Errorf("%w: fallocate: %v", errNoWALMapping, err)
	}
	if m.data != nil {
		m.populating.Wait()
		if err := syscall.Munmap(m.data); err != nil {
			return err
		}
		m.data = nil
	}
	data, err := syscall.Mmap(m.fd, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("%w: mmap: %v", errNoWALMapping, err)
	}
	m.data = data
	m.populated = m.off &^ (pageSize - 1) // madvise takes whole pages
	m.populateAhead()
	return nil
}

// madvPopulateWrite is Linux's MADV_POPULATE_WRITE (5.14): fault pages in
// writable, as a write would, without changing what they hold.
const madvPopulateWrite = 23

// pageSize is the granularity madvise works in.
var pageSize = syscall.Getpagesize()

// populateAhead keeps the pages up to reach bytes ahead of the writer
// faulted in, on goroutines of their own (populate): the whole mapping in one
// call, or a window, half of it at a time once the writer is within half of
// it of the populated pages' end.
//
// A first write to a page of a shared file mapping is a page fault (the
// kernel allocates the page-cache page and the file system's page_mkwrite
// runs); on this project's VM it cost about 9 us, paid on the writer's
// path without populating. A microbenchmark writing 140-byte records
// through a fresh 4.4 MB mapping took 663 ns a record without and 300-450
// ns with. Populating also dirties the pages (zeros), which is why a WAL
// whose writers sync gets a window (walWriter.populateReach).
func (m *walMapping) populateAhead() {
	for m.populated < len(m.data) && m.populated-m.off <= m.reach/2 {
		end := len(m.data)
		if m.reach < len(m.data) {
			end = min(m.populated+m.reach/2, end)
		}
		m.populate(m.data[m.populated:end], m.reach == populateWhole)
		m.populated = end
	}
}

// populate faults the pages of free in on a goroutine of its own, and with
// touch then writes to each of them once (touchPages). Populating and
// touching change no byte, so they may run alongside the writer; the
// mapping waits for them before it is unmapped. Where the kernel lacks the
// advice, pages fault on first write. Only a mapping populated whole is
// touched: with a window the WAL's writers sync, an fdatasync cleans (and
// write-protects) the pages ahead of the writer, and a touch after it
// dirties them again for the next fdatasync to write (touching every
// window made the write benchmark's sync-16 p99 1.65 -> 2.24 ms).
func (m *walMapping) populate(free []byte, touch bool) {
	m.populating.Add(1)
	go func() {
		defer m.populating.Done()
		if d := populateDelay.Load(); d > 0 {
			time.Sleep(time.Duration(d)) // tests: a populating that is behind
		}
		_ = syscall.Madvise(free, madvPopulateWrite)
		if touch {
			touchPages(free)
		}
	}()
}

// populateDelay, when set (tests), holds each populating goroutine that long
// before it starts.
var populateDelay atomic.Int64

// touchPages writes to every page of b once, changing nothing: an atomic
// add of zero to its first word. On this project's VM (a Firecracker
// guest) the first write from user space to a page populated by
// MADV_POPULATE_WRITE still cost about 20 us once every 8 pages or so,
// without a page fault (getrusage counted none): a microbenchmark copying
// 150-byte records through a populated 4.4 MB mapping had 142 copies over
// 5 us (p99.9 20 us) before and 0-1 after the pages were touched, and the
// store's NoSync writes paid it on the writer's path. The add is atomic so
// that it loses no byte the writer may be writing to the same word at the
// same time (it writes back whatever the word holds). b starts at a page
// boundary (populateAhead populates whole pages), so each word is aligned.
func touchPages(b []byte) {
	for i := 0; i+4 <= len(b); i += pageSize {
		atomic.AddUint32((*uint32)(unsafe.Pointer(&b[i])), 0)
	}
}

// unmap releases the mapping and cuts the file to the bytes written.
func (m *walMapping) unmap() error {
	if m.data == nil {
		return nil
	}
	m.populating.Wait()
	err := syscall.Munmap(m.data)
	m.data = nil
	if terr := syscall.Ftruncate(m.fd, int64(m.off)); err == nil {
		err = terr
	}
	return err
}

package kv

import (
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// walWriter appends batches to one WAL file with Pebble's record framing
// (32 KiB blocks of checksummed chunks). Every record starts with the offset
// up to which the file was fsynced before the record was written (see
// replayWAL for how recovery uses it). add and flush are called by the
// commit leader only; sync also by the WAL syncer (walSyncLoop),
// concurrently with them.
//
// The framing writes into walBuffer, not the file: pebble's record.Writer
// hands every record to its writer as soon as it is complete, so without the
// buffer each record would cost a write system call, and flush another. With
// it, a commit group costs one write (and one fsync if any of its writes is
// Sync), however many batches it holds.
//
// On the OS file system of Linux the framing writes into a shared memory
// mapping of the file instead (walMapping): a commit group then costs no
// system call at all unless it syncs, and its records are in the page
// cache, where they survive the process, when the copy returns.
type walWriter struct {
	num    uint64
	f      vfs.File
	buf    *walBuffer  // nil when mapped
	mapped *walMapping // nil unless mapped
	w      *record.Writer
	synced atomic.Int64 // file offset known durable (written by the WAL syncer)
	closed bool
	// groups and syncGroups count the commit groups written to this WAL and
	// those of them that synced; the next WAL's mapping is populated by
	// them (populateReach).
	groups, syncGroups int
	// widening: the mapping's window becomes the whole mapping once
	// widenAfterGroups groups have been written and none synced
	// (populateLearn).
	widening bool
}

// createWAL creates WAL file num at path. With mapped (the OS file system,
// Options.DisableWALMapping unset) it tries to map the file, preallocate
// bytes at a time (walMapping), faulting its pages in up to populate bytes
// ahead of the writer (or as populateLearn says); where that is
// impossible, and without mapped, the file grows in preallocated steps of
// preallocate bytes and is synced with fdatasync (vfs's syncing file, as
// Pebble's WAL): appends within preallocated space need no block
// allocation at each sync. Pebble preallocates 110% of the memtable size.
func createWAL(fs vfs.FS, path string, num uint64, preallocate int, mapped bool, populate int) (*walWriter, error) {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	widening := populate == populateLearn
	if widening {
		populate = populateWindow
	}
	if mapped && walMappingSupported {
		m, err := mapWAL(f, preallocate, populate)
		if err == nil {
			return &walWriter{num: num, f: f, mapped: m, w: record.NewWriter(m), widening: widening}, nil
		}
		// Start again with an empty file, written with write(2).
		_ = f.Close()
		if f, err = fs.Create(path, vfs.WriteCategoryUnspecified); err != nil {
			return nil, err
		}
	}
	f = vfs.NewSyncingFile(f, vfs.SyncingFileOptions{PreallocateSize: preallocate})
	buf := &walBuffer{f: f}
	return &walWriter{num: num, f: f, buf: buf, w: record.NewWriter(buf)}, nil
}

// How far ahead of the writer a WAL mapping faults its pages in
// (walMapping.populateAhead): the whole mapping, or a window. populateLearn
// is for a WAL whose writers are not known yet, the first after Open: a
// window, widened to the whole mapping once widenAfterGroups commit groups
// have been written without a sync (countGroup). A whole mapping from the
// start made a store opened under Sync writers pay for it: its first two
// fdatasyncs wrote the 4.4 MB of zero pages populating had dirtied (15-23
// ms each, traced), and the write benchmark's sync-16 p99.9 was 9.5-11.0
// ms against 5.1-7.3 ms with populateLearn (Pebble 4.3-5.2). See
// docs/ARCHITECTURE.md, "Group commit and the WAL".
const (
	populateWhole    = math.MaxInt
	populateWindow   = 256 << 10
	populateLearn    = -1
	widenAfterGroups = 64
)

// countGroup counts a commit group written to the WAL, and widens the
// mapping of a WAL created with populateLearn once it has seen
// widenAfterGroups groups and none of them synced.
func (w *walWriter) countGroup(sync bool) {
	w.groups++
	if sync {
		w.syncGroups++
		w.widening = false
	}
	if w.widening && w.groups >= widenAfterGroups {
		w.widening = false
		w.mapped.widen()
	}
}

// populateReach is how far ahead of the writer the mapping of the WAL after
// w is populated: a window if at least one in eight of w's commit groups
// synced, else the whole mapping. Populating dirties pages (zeros) and an
// fdatasync writes every dirty page of the file, so with the whole mapping
// populated the first Sync commit of a WAL writes all of it; a window
// bounds what a sync writes for nothing, but on a busy machine its
// populating falls behind the writer more often (NoSync writes 14-20%
// slower). See docs/ARCHITECTURE.md, "Group commit and the WAL".
func (w *walWriter) populateReach() int {
	if w.syncGroups > 0 && w.syncGroups*8 >= w.groups {
		return populateWindow
	}
	return populateWhole
}

// errNoWALMapping says the WAL cannot be mapped here; createWAL falls back
// to write(2).
var errNoWALMapping = errors.New("kv: WAL cannot be mapped")

// walMapping is a WAL file written through a shared memory mapping
// (MAP_SHARED): Write copies the framing's bytes into the file's page cache,
// so they have reached the OS, which is all a NoSync write promises, without
// a system call. The file is allocated and mapped step bytes at a time; its
// tail past off is zeros, which recovery reads as the end of the log (a
// zeroed chunk, tolerated like a torn tail in the newest WAL). close cuts
// the file to off. fdatasync on the file writes the mapped pages back, as
// it does pages written with write(2) (Linux keeps a shared mapping's
// dirty pages in the page cache's dirty accounting).
type walMapping struct {
	f    vfs.File
	fd   int
	data []byte // the mapping, len(data) bytes of the file
	off  int    // bytes written
	step int
	// populated is where the pages faulted in ahead of the writer end,
	// reach how far ahead of it they may be; populating counts the
	// goroutines faulting them in (Linux, populateAhead); unmapping waits
	// for them.
	populated, reach int
	populating       sync.WaitGroup
}

// widen has the mapping populated whole from now on.
func (m *walMapping) widen() {
	m.reach = populateWhole
	m.populateAhead()
}

// Write copies p into the mapping at off, growing the file and the mapping
// when p does not fit (io.Writer, for record.Writer).
func (m *walMapping) Write(p []byte) (int, error) {
	if m.off+len(p) > len(m.data) {
		if err := m.grow(m.off + len(p)); err != nil {
			return 0, err
		}
	}
	copy(m.data[m.off:], p)
	m.off += len(p)
	m.populateAhead()
	return len(p), nil
}

// add writes one batch record (its first 8 bytes are overwritten with the
// synced offset) into the buffer; it reaches the OS at flush.
func (w *walWriter) add(data []byte) error {
	binary.LittleEndian.PutUint64(data[0:8], uint64(w.synced.Load()))
	_, err := w.w.WriteRecord(data)
	return err
}

// flush hands the records added so far to the OS and, if sync, fsyncs the
// file.
func (w *walWriter) flush(sync bool) error {
	if err := w.w.Flush(); err != nil { // record.Writer calls w.buf.Flush
		return err
	}
	if sync {
		if err := w.sync(); err != nil {
			return err
		}
		w.synced.Store(w.w.Size())
	}
	return nil
}

// size is the WAL's size in bytes, records added so far included.
func (w *walWriter) size() int64 { return w.w.Size() }

// sync makes the file's data durable: fdatasync (the syncing file's Sync
// is its fdatasync).
func (w *walWriter) sync() error {
	if w.mapped != nil {
		return w.f.SyncData()
	}
	return w.f.Sync()
}

// finishRecords ends the framing's pending record so that what was added is
// in the buffer, without writing it to the OS: the buffered mode
// (Options.WALBufferNoSync) leaves that to writeBack.
func (w *walWriter) finishRecords() error {
	if w.mapped != nil {
		return w.w.Flush() // the copy is all a mapped WAL's write is
	}
	w.buf.deferWrites.Store(true)
	defer w.buf.deferWrites.Store(false)
	return w.w.Flush()
}

// writeBack writes what the buffer holds to the OS. It may run on any
// goroutine, concurrently with the leader's add (see walBuffer).
func (w *walWriter) writeBack() error {
	if w.mapped != nil {
		return nil
	}
	return w.buf.writeBack()
}

// adoptBuffers hands old's write buffers to w (see walBuffer.adopt).
func (w *walWriter) adoptBuffers(old *walWriter) {
	if w.buf != nil && old.buf != nil {
		w.buf.adopt(old.buf)
	}
}

// close flushes, fsyncs and closes the file. Later calls do nothing.
func (w *walWriter) close() error {
	if w.closed {
		return nil
	}
	err := w.seal()
	if cerr := w.finish(); err == nil {
		err = cerr
	}
	return err
}

// seal ends the WAL's records: the framing's last record is complete and,
// unless the WAL is mapped, handed to the OS. Nothing is synced: finish
// does that, and may run on another goroutine once the commit leader has
// moved on to the next WAL (see DB.rotateWAL). A sealed WAL takes no more
// records; its size is where its records end.
func (w *walWriter) seal() error {
	w.closed = true
	err := w.w.Flush() // record.Writer calls w.buf.Flush
	if cerr := w.w.Close(); err == nil {
		err = cerr
	}
	return err
}

// finish makes a sealed WAL durable and closes its file. A mapped WAL is
// synced once, after its zero tail is cut off: syncing before the cut
// would write the tail's pages (dirtied by populate) and convert their
// allocated blocks, only to free them.
func (w *walWriter) finish() error {
	var err error
	if w.mapped != nil {
		// Unmap, cut the zero tail, and make the new size durable.
		err = w.mapped.unmap()
	}
	if cerr := w.f.Sync(); err == nil {
		err = cerr
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// The switch record is the first record of every WAL a memtable switch
// creates: it names the WAL before and the offset where that WAL's records
// end (its size when sealed). The old WAL is fsynced on a goroutine of its
// own while writes go to the new one (DB.rotateWAL), so after a machine
// crash the old WAL may have lost its tail while the new one kept records;
// recovery tells that from corruption by this record (see replayWAL). It
// has a batch's header with no entries and sequence number 0 (no batch
// has either), so replaying it applies nothing.
const switchRecordLen = batchHeaderLen + 8 + 8 + 8

var switchMagic = [8]byte{'W', 'A', 'L', 'S', 'W', 'I', 'T', 'C'}

// switchRecord returns the switch record naming WAL prev, whose records end
// at end.
func switchRecord(prev uint64, end int64) []byte {
	rec := make([]byte, switchRecordLen)
	p := rec[batchHeaderLen:]
	copy(p, switchMagic[:])
	binary.LittleEndian.PutUint64(p[8:], prev)
	binary.LittleEndian.PutUint64(p[16:], uint64(end))
	return rec
}

// parseSwitchRecord reports whether rec is a switch record, and what it
// says.
func parseSwitchRecord(rec []byte) (prev uint64, end int64, ok bool) {
	if len(rec) != switchRecordLen || binary.LittleEndian.Uint64(rec[8:16]) != 0 ||
		binary.LittleEndian.Uint32(rec[16:20]) != 0 {
		return 0, 0, false
	}
	p := rec[batchHeaderLen:]
	if [8]byte(p[:8]) != switchMagic {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(p[8:]), int64(binary.LittleEndian.Uint64(p[16:])), true
}

// maxWALBufferKept is the largest buffer kept for reuse: a huge batch's
// buffer is dropped once written rather than held for the WAL's life. With
// WALBufferNoSync the buffer holds what the leader appended while the
// write-back goroutine waited for a CPU, which on a busy machine reaches
// megabytes: dropping those made a third of a write benchmark's
// allocations (regrowing them by doubling), so a memtable's worth is kept.
const maxWALBufferKept = 4 << 20

// adopt hands the buffers of old, a closed WAL's buffer, to b, which has
// not been written to: a new WAL starts with the capacity the previous one
// grew to instead of growing it again.
func (b *walBuffer) adopt(old *walBuffer) {
	old.writeMu.Lock()
	spare := old.spare
	old.spare = nil
	old.writeMu.Unlock()
	old.mu.Lock()
	cur := old.cur
	old.cur = nil
	old.mu.Unlock()
	b.writeMu.Lock()
	if b.spare == nil && spare != nil {
		b.spare = spare[:0]
	}
	b.writeMu.Unlock()
	b.mu.Lock()
	if len(b.cur) == 0 && cap(cur) > cap(b.cur) && cap(cur) <= maxWALBufferKept {
		b.cur = cur[:0]
	}
	b.mu.Unlock()
}

// walBuffer collects the framed bytes of a WAL until they are written to the
// file. Write (from the framing, on the commit leader) appends under mu;
// writeBack swaps the bytes out under mu and writes them with writeMu held,
// so that writes reach the file in order while the leader keeps appending
// to the other buffer. Flush, which record.Writer.Flush calls, writes back
// unless deferWrites is set.
type walBuffer struct {
	f           vfs.File
	deferWrites atomic.Bool

	mu  sync.Mutex
	cur []byte

	writeMu sync.Mutex
	spare   []byte // under writeMu
	err     error  // first write error, under writeMu: every later write fails
}

// Write appends p to the buffer (io.Writer, for record.Writer).
func (b *walBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.cur = append(b.cur, p...)
	b.mu.Unlock()
	return len(p), nil
}

// Flush writes the buffer back unless writes are deferred.
func (b *walBuffer) Flush() error {
	if b.deferWrites.Load() {
		return nil
	}
	return b.writeBack()
}

func (b *walBuffer) writeBack() error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	if b.err != nil {
		return b.err
	}
	b.mu.Lock()
	out := b.cur
	b.cur = b.spare[:0]
	b.mu.Unlock()
	b.spare = nil // cur owns it now
	if len(out) > 0 {
		_, b.err = b.f.Write(out)
	}
	if cap(out) <= maxWALBufferKept {
		b.spare = out
	}
	return b.err
}

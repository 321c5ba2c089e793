package filterpolicy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/filter"
)

// BlockRemote is a filter.Remote over the remote section of a filter
// block, read on demand with one positioned read of the 64-slot chunks a
// request covers (they are contiguous: one I/O, not one per chunk). Every
// chunk's checksum is verified; a mismatch, a short read or an
// out-of-range request gives an error wrapping filter.ErrRemote. With a
// RemoteCache (SetCache), a request whose chunks are all cached reads no
// file, and the chunks a read verified are cached. It is safe for
// concurrent use.
type BlockRemote struct {
	r     io.ReaderAt
	off   int64 // file offset of the remote section
	slots int
	seed  uint64
	id    uint64
	cache *RemoteCache
	reads atomic.Uint64
	bufs  sync.Pool
}

// NewBlockRemote returns the remote representation described by h, whose
// filter block starts at blockOffset in r.
func NewBlockRemote(r io.ReaderAt, blockOffset int64, h Header) *BlockRemote {
	return &BlockRemote{
		r:     r,
		off:   blockOffset + int64(h.LocalEnd()),
		slots: h.RemoteSlots,
		seed:  h.Seed,
		id:    remoteIDs.Add(1),
	}
}

// SetCache makes br read through c (nil: no cache). Call it before the
// first ReadSlots.
func (br *BlockRemote) SetCache(c *RemoteCache) { br.cache = c }

// Slots returns the number of slots in the remote representation.
func (br *BlockRemote) Slots() int { return br.slots }

// Reads returns the number of file reads issued so far: one per ReadSlots
// that the cache did not serve.
func (br *BlockRemote) Reads() uint64 { return br.reads.Load() }

const chunkBytes = RemoteChunkSlots*8 + 4

// ReadSlots implements filter.Remote.
func (br *BlockRemote) ReadSlots(first int, dst []uint64) error {
	if first < 0 || first > br.slots || len(dst) > br.slots-first {
		return fmt.Errorf("%w: slots [%d,%d) out of range [0,%d)", filter.ErrRemote, first, first+len(dst), br.slots)
	}
	if len(dst) == 0 {
		return nil
	}
	last := first + len(dst) - 1
	c0, c1 := first/RemoteChunkSlots, last/RemoteChunkSlots
	if br.cache != nil && br.fromCache(first, last, c0, c1, dst) {
		return nil
	}
	lastSlots := min(RemoteChunkSlots, br.slots-c1*RemoteChunkSlots) // the last chunk may be short
	size := (c1-c0)*chunkBytes + lastSlots*8 + 4
	bp, _ := br.bufs.Get().(*[]byte)
	if bp == nil || cap(*bp) < size {
		b := make([]byte, size)
		bp = &b
	}
	defer br.bufs.Put(bp)
	buf := (*bp)[:size]
	br.reads.Add(1)
	if _, err := br.r.ReadAt(buf, br.off+int64(c0)*chunkBytes); err != nil {
		return fmt.Errorf("%w: reading remote chunks %d-%d: %w", filter.ErrRemote, c0, c1, err)
	}
	for chunk := c0; chunk <= c1; chunk++ {
		lo := chunk * RemoteChunkSlots
		n := min(RemoteChunkSlots, br.slots-lo)
		b := buf[(chunk-c0)*chunkBytes:][:n*8+4]
		tails := b[:n*8]
		if c := chunkChecksum(uint32(chunk), br.seed, tails); c != binary.LittleEndian.Uint32(b[n*8:]) {
			return fmt.Errorf("%w: checksum mismatch in remote chunk %d", filter.ErrRemote, chunk)
		}
		if br.cache != nil {
			var words [RemoteChunkSlots]uint64
			for i := range n {
				words[i] = binary.LittleEndian.Uint64(tails[i*8:])
			}
			br.cache.put(chunkKey{br.id, uint32(chunk)}, words[:n])
		}
		from := max(first, lo)
		to := min(last+1, lo+n)
		for s := from; s < to; s++ {
			dst[s-first] = binary.LittleEndian.Uint64(tails[(s-lo)*8:])
		}
	}
	return nil
}

// fromCache fills dst with slots [first, last] from the cached chunks
// c0..c1, or reports false when one of them is not cached.
func (br *BlockRemote) fromCache(first, last, c0, c1 int, dst []uint64) bool {
	for chunk := c0; chunk <= c1; chunk++ {
		lo := chunk * RemoteChunkSlots
		from, to := max(first, lo), min(last+1, lo+RemoteChunkSlots)
		if !br.cache.copyOut(chunkKey{br.id, uint32(chunk)}, lo, from, to, first, dst) {
			return false
		}
	}
	return true
}

// inBlockRemote returns a remote over the remote section contained in block
// (a complete block as our sstable writer emits it).
func inBlockRemote(block []byte, h Header) filter.Remote {
	return NewBlockRemote(bytes.NewReader(block), 0, h)
}

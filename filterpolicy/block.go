package filterpolicy

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/adaptkv/adaptkv/filter"
)

// Filter block layout (little-endian), format version 1:
//
//	offset size field
//	0      4    magic "akvf"
//	4      1    format version
//	5      1    filter kind (filter.Code)
//	6      1    flags (bit 0: a remote section follows the local state)
//	7      1    reserved, zero
//	8      8    seed
//	16     4    parameter 1 (bloom bits/key, fuse fingerprint bits, remainder bits)
//	20     4    parameter 2 (load factor in millionths for quotient filters)
//	24     8    distinct keys
//	32     4    length of the local state
//	36     4    crc32c of bytes [0,36) ++ [40,48) ++ local state
//	40     8    remote slots (0 without remote)
//	48     ...  local state
//	...         remote section (optional): ceil(slots/64) chunks, each of
//	            up to 64 little-endian uint64 hash tails followed by a crc32c
//	            of (chunk index u32, seed u64, tails).
//
// The pebble-facing writer never emits the remote section; the writer that
// our sstable package uses does, so the remote lives and dies with the table.
const (
	// HeaderSize is the size of the fixed filter block header.
	HeaderSize = 48
	// FormatVersion is the newest block format this package writes and reads.
	FormatVersion = 1
	// RemoteChunkSlots is the number of slots per checksummed remote chunk.
	RemoteChunkSlots = 64

	flagRemote = 1 << 0
)

var blockMagic = [4]byte{'a', 'k', 'v', 'f'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded fixed header of a filter block.
type Header struct {
	Version     uint8
	Code        filter.Code // the kind's code
	HasRemote   bool
	Seed        uint64
	Param1      uint32
	Param2      uint32
	NumKeys     uint64
	LocalLen    int
	Checksum    uint32
	RemoteSlots int
}

// LocalEnd is the offset just past the local state within the block.
func (h Header) LocalEnd() int { return HeaderSize + h.LocalLen }

// RemoteSize is the size in bytes of the remote section.
func (h Header) RemoteSize() int { return RemoteSectionSize(h.RemoteSlots) }

// RemoteSectionSize is the encoded size of a remote section of n slots.
func RemoteSectionSize(n int) int {
	chunks := (n + RemoteChunkSlots - 1) / RemoteChunkSlots
	return n*8 + chunks*4
}

func (h Header) encode(dst []byte) {
	copy(dst[0:4], blockMagic[:])
	dst[4] = h.Version
	dst[5] = byte(h.Code)
	var flags byte
	if h.HasRemote {
		flags |= flagRemote
	}
	dst[6] = flags
	dst[7] = 0
	binary.LittleEndian.PutUint64(dst[8:], h.Seed)
	binary.LittleEndian.PutUint32(dst[16:], h.Param1)
	binary.LittleEndian.PutUint32(dst[20:], h.Param2)
	binary.LittleEndian.PutUint64(dst[24:], h.NumKeys)
	binary.LittleEndian.PutUint32(dst[32:], uint32(h.LocalLen))
	binary.LittleEndian.PutUint32(dst[36:], h.Checksum)
	binary.LittleEndian.PutUint64(dst[40:], uint64(h.RemoteSlots))
}

// headerChecksum computes the checksum of a block's header and local state.
func headerChecksum(hdr, local []byte) uint32 {
	c := crc32.Update(0, castagnoli, hdr[0:36])
	c = crc32.Update(c, castagnoli, hdr[40:48])
	return crc32.Update(c, castagnoli, local)
}

// ParseHeader decodes and sanity-checks the fixed header at the start of b.
// It does not verify the checksum (see VerifyBlock). Errors wrap
// ErrCorruptBlock; a block of a newer format version also wraps
// ErrUnsupportedVersion.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: block of %d bytes is shorter than the %d-byte header", ErrCorruptBlock, len(b), HeaderSize)
	}
	if [4]byte(b[0:4]) != blockMagic {
		return Header{}, fmt.Errorf("%w: bad magic %q", ErrCorruptBlock, b[0:4])
	}
	h := Header{
		Version:   b[4],
		Code:      filter.Code(b[5]),
		HasRemote: b[6]&flagRemote != 0,
		Seed:      binary.LittleEndian.Uint64(b[8:]),
		Param1:    binary.LittleEndian.Uint32(b[16:]),
		Param2:    binary.LittleEndian.Uint32(b[20:]),
		NumKeys:   binary.LittleEndian.Uint64(b[24:]),
		LocalLen:  int(binary.LittleEndian.Uint32(b[32:])),
		Checksum:  binary.LittleEndian.Uint32(b[36:]),
	}
	if h.Version == 0 || h.Version > FormatVersion {
		return h, fmt.Errorf("%w: %w: format version %d (this build reads up to %d)", ErrCorruptBlock, ErrUnsupportedVersion, h.Version, FormatVersion)
	}
	if _, ok := KindByCode(h.Code); !ok {
		return h, fmt.Errorf("%w: unknown filter kind %d", ErrCorruptBlock, b[5])
	}
	if b[6]&^flagRemote != 0 || b[7] != 0 {
		return h, fmt.Errorf("%w: unknown flags %#x/%#x", ErrCorruptBlock, b[6], b[7])
	}
	slots := binary.LittleEndian.Uint64(b[40:])
	if slots > 1<<40 {
		return h, fmt.Errorf("%w: remote slot count %d out of range", ErrCorruptBlock, slots)
	}
	h.RemoteSlots = int(slots)
	if !h.HasRemote && h.RemoteSlots != 0 {
		return h, fmt.Errorf("%w: remote slot count %d without remote flag", ErrCorruptBlock, slots)
	}
	return h, nil
}

// VerifyBlock parses the header of b and checks that b holds the whole
// local state with a matching checksum. b may end after the local state or
// also contain the remote section (whose length must then be exact); the
// remote section's chunks carry their own checksums and are verified when
// read. It returns the header and the local state.
func VerifyBlock(b []byte) (Header, []byte, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, nil, err
	}
	end := h.LocalEnd()
	if end > len(b) {
		return h, nil, fmt.Errorf("%w: local state of %d bytes truncated (block has %d)", ErrCorruptBlock, h.LocalLen, len(b)-HeaderSize)
	}
	if len(b) != end && len(b) != end+h.RemoteSize() {
		return h, nil, fmt.Errorf("%w: block length %d matches neither local (%d) nor local+remote (%d)", ErrCorruptBlock, len(b), end, end+h.RemoteSize())
	}
	local := b[HeaderSize:end]
	if c := headerChecksum(b, local); c != h.Checksum {
		return h, nil, fmt.Errorf("%w: checksum mismatch (stored %#08x, computed %#08x)", ErrCorruptBlock, h.Checksum, c)
	}
	return h, local, nil
}

// appendBlock appends a complete filter block to dst.
func appendBlock(dst []byte, h Header, local []byte, remote []uint64) []byte {
	h.Version = FormatVersion
	h.LocalLen = len(local)
	h.HasRemote = remote != nil
	h.RemoteSlots = len(remote)
	size := HeaderSize + len(local)
	if remote != nil {
		size += RemoteSectionSize(len(remote))
	}
	// One allocation for the whole block: the remote section is 8 bytes a
	// slot, and growing dst as it is appended cost a twentieth of a table
	// write.
	dst = slices.Grow(dst, size)
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	h.encode(dst[start:])
	dst = append(dst, local...)
	h.Checksum = headerChecksum(dst[start:start+HeaderSize], local)
	binary.LittleEndian.PutUint32(dst[start+36:], h.Checksum)
	if remote != nil {
		dst = appendRemote(dst, h.Seed, remote)
	}
	return dst
}

func appendRemote(dst []byte, seed uint64, remote []uint64) []byte {
	for chunk := 0; chunk*RemoteChunkSlots < len(remote); chunk++ {
		lo := chunk * RemoteChunkSlots
		hi := min(lo+RemoteChunkSlots, len(remote))
		start := len(dst)
		for _, v := range remote[lo:hi] {
			dst = binary.LittleEndian.AppendUint64(dst, v)
		}
		dst = binary.LittleEndian.AppendUint32(dst, chunkChecksum(uint32(chunk), seed, dst[start:]))
	}
	return dst
}

func chunkChecksum(chunk uint32, seed uint64, tails []byte) uint32 {
	var pre [12]byte
	binary.LittleEndian.PutUint32(pre[0:], chunk)
	binary.LittleEndian.PutUint64(pre[4:], seed)
	c := crc32.Update(0, castagnoli, pre[:])
	return crc32.Update(c, castagnoli, tails)
}

// BlockID tells filter blocks apart without a pass over their bytes: the
// kind's code, the seed and the stored checksum.
type BlockID struct {
	Seed     uint64
	Checksum uint32
	Code     filter.Code
}

// PeekBlockID reads b's BlockID from its header and verifies nothing; ok
// is false for a block shorter than the header.
func PeekBlockID(b []byte) (id BlockID, ok bool) {
	if len(b) < HeaderSize {
		return BlockID{}, false
	}
	return BlockID{
		Seed:     binary.LittleEndian.Uint64(b[8:]),
		Checksum: binary.LittleEndian.Uint32(b[36:]),
		Code:     filter.Code(b[5]),
	}, true
}

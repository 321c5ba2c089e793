package prefix

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Encoding (all integers little-endian):
//
//	offset  size
//	0       4      magic "PFXF"
//	4       1      version (1)
//	5       3      zero
//	8       8      seed
//	16      8      n: keys the filter was built from (duplicates included)
//	24      8      m: bins, must equal ceil(n/(0.95·25)), at least 1
//	32      8      spare blocks, must equal spareBlocksFor(n, spare entries)
//	40      8      spare entries: distinct fingerprints forwarded to the spare
//	48      16     zero
//	64      32·m   bin table (32-byte aligned when the buffer is)
//	...     64·b   spare (split-block Bloom filter)
//	end-4   4      CRC-32C (Castagnoli) of everything before it
const (
	headerSize    = 64
	checksumSize  = 4
	formatVersion = 1
	magic         = "PFXF"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodedSize is the size of the encoding of a filter with m bins and the
// given spare blocks.
func encodedSize(m, blocks uint64) uint64 {
	return headerSize + m*binBytes + blocks*spareBlockBytes + checksumSize
}

// writeHeader fills in the header and the checksum of data, whose bins and
// spare are already in place.
func writeHeader(data []byte, seed, n, m, blocks, entries uint64) {
	copy(data[0:4], magic)
	data[4] = formatVersion
	binary.LittleEndian.PutUint64(data[8:], seed)
	binary.LittleEndian.PutUint64(data[16:], n)
	binary.LittleEndian.PutUint64(data[24:], m)
	binary.LittleEndian.PutUint64(data[32:], blocks)
	binary.LittleEndian.PutUint64(data[40:], entries)
	end := len(data) - checksumSize
	binary.LittleEndian.PutUint32(data[end:], crc32.Checksum(data[:end], castagnoli))
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// encodedLen returns the length of the filter encoding that starts data,
// read from its header (0 when data is too short to hold a header or the
// sizes it states overflow). Decode checks the sizes against each other.
func encodedLen(data []byte) uint64 {
	if len(data) < headerSize {
		return 0
	}
	m := binary.LittleEndian.Uint64(data[24:])
	blocks := binary.LittleEndian.Uint64(data[32:])
	if m > binsFor(MaxKeys) || blocks > spareBlocksFor(MaxKeys, MaxKeys) {
		return 0
	}
	return encodedSize(m, blocks)
}

// Decode returns the filter encoded in data (as produced by MarshalBinary or
// AppendBinary). The filter answers queries directly over data, which must
// not be modified afterwards; queries are fastest when data[64], the first
// bin, starts a cache line (filter.AlignedBytes), since no bin then
// straddles two lines. Every error wraps ErrCorrupt. Decode checks the
// checksum and the full structure of every bin, so queries on a decoded
// filter cannot fail.
func Decode(data []byte) (*Filter, error) {
	if len(data) < headerSize+binBytes+checksumSize {
		return nil, corrupt("%d bytes is shorter than the smallest filter", len(data))
	}
	if string(data[0:4]) != magic {
		return nil, corrupt("bad magic %q", data[0:4])
	}
	if data[4] != formatVersion {
		return nil, corrupt("unsupported version %d", data[4])
	}
	end := len(data) - checksumSize
	if got, want := crc32.Checksum(data[:end], castagnoli), binary.LittleEndian.Uint32(data[end:]); got != want {
		return nil, corrupt("checksum mismatch: computed %08x, stored %08x", got, want)
	}
	for _, b := range data[5:8] {
		if b != 0 {
			return nil, corrupt("reserved header bytes are not zero")
		}
	}
	for _, b := range data[48:64] {
		if b != 0 {
			return nil, corrupt("reserved header bytes are not zero")
		}
	}
	seed := binary.LittleEndian.Uint64(data[8:])
	n := binary.LittleEndian.Uint64(data[16:])
	m := binary.LittleEndian.Uint64(data[24:])
	blocks := binary.LittleEndian.Uint64(data[32:])
	entries := binary.LittleEndian.Uint64(data[40:])
	if n > MaxKeys {
		return nil, corrupt("key count %d exceeds %d", n, uint64(MaxKeys))
	}
	if want := binsFor(n); m != want {
		return nil, corrupt("%d bins for %d keys, want %d", m, n, want)
	}
	if entries > n {
		return nil, corrupt("%d spare entries for %d keys", entries, n)
	}
	if want := spareBlocksFor(n, entries); blocks != want {
		return nil, corrupt("%d spare blocks, want %d", blocks, want)
	}
	// n <= MaxKeys bounds m and blocks, so this cannot overflow.
	if size := encodedSize(m, blocks); uint64(len(data)) != size {
		return nil, corrupt("length %d, want %d", len(data), size)
	}
	bins := data[headerSize : headerSize+m*binBytes]
	var stored, overflowed uint64
	for b := uint64(0); b < m; b++ {
		count, over, ok := validatePD(bins[b*binBytes : b*binBytes+binBytes])
		if !ok {
			return nil, corrupt("bin %d is malformed", b)
		}
		stored += uint64(count)
		if over {
			overflowed++
		}
	}
	// Each overflowed bin forwarded at least one fingerprint; every stored or
	// forwarded fingerprint came from at least one key.
	if overflowed > entries || (overflowed == 0) != (entries == 0) {
		return nil, corrupt("%d overflowed bins but %d spare entries", overflowed, entries)
	}
	if stored+entries > n {
		return nil, corrupt("%d fingerprints for %d keys", stored+entries, n)
	}
	return newFilter(data, seed, n, m, blocks), nil
}

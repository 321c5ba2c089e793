package filterpolicy

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/FastFilter/xorfilter"
	"github.com/spaolacci/murmur3"
)

// The fuse kind is a binary fuse filter with 8-bit fingerprints
// (package xorfilter) over seeded murmur3 64-bit key hashes, deduplicated
// before the build. Local state layout: seed u64, segment length u32,
// segment length mask u32, segment count u32, segment count length u32, then
// the fingerprints; it is queried in place.

const fuseHeader = 24

func keyHash64(key []byte, seed uint64) uint64 {
	h1, _ := murmur3.Sum128WithSeed(key, uint32(seed)^uint32(seed>>32))
	return h1
}

type fuseBuilder struct {
	seed   uint64
	hashes []uint64
}

func newFuseBuilder(seed uint64) *fuseBuilder { return &fuseBuilder{seed: seed} }

func (b *fuseBuilder) add(key []byte) { b.hashes = append(b.hashes, keyHash64(key, b.seed)) }

func (b *fuseBuilder) finish() ([]byte, []uint64, error) {
	hs := b.hashes
	b.hashes = nil
	if len(hs) == 0 {
		return nil, nil, nil
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	f, err := xorfilter.NewBinaryFuse[uint8](hs)
	if err != nil {
		return nil, nil, err
	}
	out := make([]byte, fuseHeader, fuseHeader+len(f.Fingerprints))
	binary.LittleEndian.PutUint64(out[0:], f.Seed)
	binary.LittleEndian.PutUint32(out[8:], f.SegmentLength)
	binary.LittleEndian.PutUint32(out[12:], f.SegmentLengthMask)
	binary.LittleEndian.PutUint32(out[16:], f.SegmentCount)
	binary.LittleEndian.PutUint32(out[20:], f.SegmentCountLength)
	out = append(out, f.Fingerprints...)
	return out, nil, nil
}

type fuseFilter struct {
	bf   xorfilter.BinaryFuse[uint8]
	seed uint64
	n    uint64
	size int
}

func openFuse(h Header, local []byte) (Filter, error) {
	f := &fuseFilter{seed: h.Seed, n: h.NumKeys, size: len(local)}
	if len(local) == 0 {
		if h.NumKeys != 0 {
			return nil, fmt.Errorf("%w: empty fuse filter for %d keys", ErrCorruptBlock, h.NumKeys)
		}
		return f, nil
	}
	if len(local) < fuseHeader {
		return nil, fmt.Errorf("%w: fuse filter of %d bytes", ErrCorruptBlock, len(local))
	}
	bf := xorfilter.BinaryFuse[uint8]{
		Seed:               binary.LittleEndian.Uint64(local[0:]),
		SegmentLength:      binary.LittleEndian.Uint32(local[8:]),
		SegmentLengthMask:  binary.LittleEndian.Uint32(local[12:]),
		SegmentCount:       binary.LittleEndian.Uint32(local[16:]),
		SegmentCountLength: binary.LittleEndian.Uint32(local[20:]),
		Fingerprints:       local[fuseHeader:],
	}
	sl := uint64(bf.SegmentLength)
	if sl == 0 || bits.OnesCount32(bf.SegmentLength) != 1 || bf.SegmentLengthMask != bf.SegmentLength-1 ||
		bf.SegmentCount == 0 || uint64(bf.SegmentCountLength) != uint64(bf.SegmentCount)*sl ||
		uint64(len(bf.Fingerprints)) != (uint64(bf.SegmentCount)+2)*sl {
		return nil, fmt.Errorf("%w: fuse filter geometry", ErrCorruptBlock)
	}
	f.bf = bf
	return f, nil
}

func (f *fuseFilter) MayContain(key []byte) bool {
	if f.bf.Fingerprints == nil {
		return false
	}
	return f.bf.Contains(keyHash64(key, f.seed))
}

func (f *fuseFilter) BitsPerKey() float64 { return bitsPerKey(f.size, f.n) }
func (f *fuseFilter) SizeBytes() int      { return f.size }

// Package fuse is the binary fuse filter kind: 8-bit fingerprints
// (github.com/FastFilter/xorfilter) over seeded murmur3 64-bit key hashes,
// deduplicated before the build. Local state layout: seed u64, segment
// length u32, segment length mask u32, segment count u32, segment count
// length u32, then the fingerprints; it is queried in place.
package fuse

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/FastFilter/xorfilter"
	"github.com/adaptkv/adaptkv/filter"
	"github.com/spaolacci/murmur3"
)

const fuseHeader = 24

// Kind is the fuse kind (filter.Kind); it has no options.
type Kind struct{}

var _ filter.Kind = Kind{}

// Name implements filter.Kind.
func (Kind) Name() string { return "fuse" }

// Code implements filter.Kind.
func (Kind) Code() filter.Code { return filter.CodeFuse }

// Adaptive implements filter.Kind.
func (Kind) Adaptive() bool { return false }

// Configure implements filter.Kind: the fuse kind reads no option.
func (k Kind) Configure(filter.Options) (filter.Kind, error) { return k, nil }

// Params implements filter.Kind: P1 is the fingerprint width.
func (Kind) Params() filter.Params { return filter.Params{P1: 8} }

// NewBuilder implements filter.Kind.
func (Kind) NewBuilder(o filter.BuildOptions) filter.Builder {
	return &builder{seed: o.Seed, hashes: make([]uint64, 0, o.SizeHint)}
}

func keyHash64(key []byte, seed uint64) uint64 {
	h1, _ := murmur3.Sum128WithSeed(key, uint32(seed)^uint32(seed>>32))
	return h1
}

type builder struct {
	seed   uint64
	hashes []uint64
}

func (b *builder) Add(key []byte) { b.hashes = append(b.hashes, keyHash64(key, b.seed)) }

func (b *builder) Finish() ([]byte, []uint64, error) {
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

// Decode implements filter.Kind: the geometry is checked; errors wrap
// filter.ErrCorrupt.
func (Kind) Decode(p filter.Params, seed uint64, local []byte, _ filter.Remote) (filter.Filter, error) {
	f := &fuseFilter{seed: seed, n: p.Keys, size: len(local)}
	if len(local) == 0 {
		if p.Keys != 0 {
			return nil, fmt.Errorf("%w: empty fuse filter for %d keys", filter.ErrCorrupt, p.Keys)
		}
		return f, nil
	}
	if len(local) < fuseHeader {
		return nil, fmt.Errorf("%w: fuse filter of %d bytes", filter.ErrCorrupt, len(local))
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
		return nil, fmt.Errorf("%w: fuse filter geometry", filter.ErrCorrupt)
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

func (f *fuseFilter) BitsPerKey() float64 { return filter.BitsPerKey(f.size, f.n) }
func (f *fuseFilter) SizeBytes() int      { return f.size }

// Package bloom is the bloom filter kind: Pebble's RocksDB-compatible,
// cache-line blocked bloom filter (pebble/v2/bloom) over a seeded 8-byte
// murmur3 digest of each key, so that every table's filter makes
// different mistakes. The local state is Pebble's filter block, queried
// in place.
package bloom

import (
	"encoding/binary"
	"fmt"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/cockroachdb/pebble/v2"
	pbloom "github.com/cockroachdb/pebble/v2/bloom"
	"github.com/spaolacci/murmur3"
)

// DefaultBitsPerKey is the bits per key of a Kind configured with 0.
const DefaultBitsPerKey = 10

// Kind is the bloom kind (filter.Kind). The zero value has the defaults.
type Kind struct{ bitsPerKey int }

var _ filter.Kind = Kind{}

// Name implements filter.Kind.
func (Kind) Name() string { return "bloom" }

// Code implements filter.Kind.
func (Kind) Code() filter.Code { return filter.CodeBloom }

// Adaptive implements filter.Kind.
func (Kind) Adaptive() bool { return false }

func (k Kind) bits() int {
	if k.bitsPerKey == 0 {
		return DefaultBitsPerKey
	}
	return k.bitsPerKey
}

// Configure implements filter.Kind: BitsPerKey in [1,64] (0: 10).
func (k Kind) Configure(o filter.Options) (filter.Kind, error) {
	if o.BitsPerKey < 0 || o.BitsPerKey > 64 {
		return nil, fmt.Errorf("%w: bloom BitsPerKey %d not in [1,64]", filter.ErrInvalidOptions, o.BitsPerKey)
	}
	k.bitsPerKey = o.BitsPerKey
	return k, nil
}

// Params implements filter.Kind: P1 is the bits per key.
func (k Kind) Params() filter.Params { return filter.Params{P1: uint32(k.bits())} }

// NewBuilder implements filter.Kind.
func (k Kind) NewBuilder(o filter.BuildOptions) filter.Builder {
	return &builder{seed: o.Seed, w: pbloom.FilterPolicy(k.bits()).NewWriter(pebble.TableFilter)}
}

func digest(key []byte, seed uint64) [8]byte {
	h1, _ := murmur3.Sum128WithSeed(key, uint32(seed)^uint32(seed>>32))
	var d [8]byte
	binary.LittleEndian.PutUint64(d[:], h1)
	return d
}

type builder struct {
	seed uint64
	w    pebble.FilterWriter
	buf  [8]byte
}

func (b *builder) Add(key []byte) {
	b.buf = digest(key, b.seed)
	b.w.AddKey(b.buf[:])
}

func (b *builder) Finish() ([]byte, []uint64, error) { return b.w.Finish(nil), nil, nil }

// Decode implements filter.Kind: the geometry in Pebble's trailer (probes,
// cache lines) is checked; errors wrap filter.ErrCorrupt.
func (Kind) Decode(p filter.Params, seed uint64, local []byte, _ filter.Remote) (filter.Filter, error) {
	if len(local) < 5 {
		return nil, fmt.Errorf("%w: bloom filter of %d bytes", filter.ErrCorrupt, len(local))
	}
	n := len(local) - 5
	if n > 0 {
		probes := local[n]
		lines := binary.LittleEndian.Uint32(local[n+1:])
		if probes < 1 || probes > 30 || lines == 0 || n%int(lines) != 0 || n/int(lines) != 64 {
			return nil, fmt.Errorf("%w: bloom filter geometry (%d bytes, %d lines, %d probes)", filter.ErrCorrupt, n, lines, probes)
		}
	}
	return &bloomFilter{data: local, seed: seed, n: p.Keys}, nil
}

type bloomFilter struct {
	data []byte
	seed uint64
	n    uint64
}

var query = pbloom.FilterPolicy(DefaultBitsPerKey)

func (f *bloomFilter) MayContain(key []byte) bool {
	d := digest(key, f.seed)
	return query.MayContain(pebble.TableFilter, f.data, d[:])
}

func (f *bloomFilter) BitsPerKey() float64 { return filter.BitsPerKey(len(f.data), f.n) }
func (f *bloomFilter) SizeBytes() int      { return len(f.data) }

package filterpolicy

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/spaolacci/murmur3"
)

// The bloom kind is Pebble's RocksDB-compatible cache-line blocked bloom
// filter (package bloom) over a seeded 8-byte murmur3 digest of each key, so
// that every table's filter makes different mistakes.

func keyDigest(key []byte, seed uint64) [8]byte {
	h1, _ := murmur3.Sum128WithSeed(key, uint32(seed)^uint32(seed>>32))
	var d [8]byte
	binary.LittleEndian.PutUint64(d[:], h1)
	return d
}

type bloomBuilder struct {
	seed uint64
	w    pebble.FilterWriter
	buf  [8]byte
}

func newBloomBuilder(seed uint64, bitsPerKey int) *bloomBuilder {
	return &bloomBuilder{seed: seed, w: bloom.FilterPolicy(bitsPerKey).NewWriter(pebble.TableFilter)}
}

func (b *bloomBuilder) add(key []byte) {
	b.buf = keyDigest(key, b.seed)
	b.w.AddKey(b.buf[:])
}

func (b *bloomBuilder) finish() ([]byte, []uint64, error) {
	return b.w.Finish(nil), nil, nil
}

type bloomFilter struct {
	data []byte
	seed uint64
	n    uint64
}

func openBloom(h Header, local []byte) (Filter, error) {
	if len(local) < 5 {
		return nil, fmt.Errorf("%w: bloom filter of %d bytes", ErrCorruptBlock, len(local))
	}
	n := len(local) - 5
	if n > 0 {
		probes := local[n]
		lines := binary.LittleEndian.Uint32(local[n+1:])
		if probes < 1 || probes > 30 || lines == 0 || n%int(lines) != 0 || n/int(lines) != 64 {
			return nil, fmt.Errorf("%w: bloom filter geometry (%d bytes, %d lines, %d probes)", ErrCorruptBlock, n, lines, probes)
		}
	}
	return &bloomFilter{data: local, seed: h.Seed, n: h.NumKeys}, nil
}

var bloomQuery = bloom.FilterPolicy(10)

func (f *bloomFilter) MayContain(key []byte) bool {
	d := keyDigest(key, f.seed)
	return bloomQuery.MayContain(pebble.TableFilter, f.data, d[:])
}

func (f *bloomFilter) BitsPerKey() float64 { return bitsPerKey(len(f.data), f.n) }
func (f *bloomFilter) SizeBytes() int      { return len(f.data) }

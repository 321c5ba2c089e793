package prefix

import (
	"fmt"
	"slices"
	"sync"

	"github.com/adaptkv/adaptkv/filter"
)

// Kind is the prefix filter as a filter kind (filter.Kind): static, no
// options; its local state is the filter's encoding (MarshalBinary),
// queried in place.
type Kind struct{}

var _ filter.Kind = Kind{}

// Name implements filter.Kind.
func (Kind) Name() string { return "prefix" }

// Code implements filter.Kind.
func (Kind) Code() filter.Code { return filter.CodePrefix }

// Adaptive implements filter.Kind.
func (Kind) Adaptive() bool { return false }

// Configure implements filter.Kind: the prefix filter reads no option.
func (k Kind) Configure(filter.Options) (filter.Kind, error) { return k, nil }

// Params implements filter.Kind: none.
func (Kind) Params() filter.Params { return filter.Params{} }

// NewBuilder implements filter.Kind.
func (Kind) NewBuilder(o filter.BuildOptions) filter.Builder {
	return kindBuilder{NewBuilder(o.Seed, o.SizeHint)}
}

type kindBuilder struct{ b *Builder }

func (k kindBuilder) Add(key []byte) { k.b.Add(key) }

func (k kindBuilder) Finish() ([]byte, []uint64, error) {
	f, err := k.b.Finish()
	if err != nil {
		return nil, nil, err
	}
	local, err := f.MarshalBinary()
	return local, nil, err
}

// Decode implements filter.Kind; errors wrap filter.ErrCorrupt.
func (Kind) Decode(_ filter.Params, _ uint64, local []byte, _ filter.Remote) (filter.Filter, error) {
	f, err := Decode(local)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", filter.ErrCorrupt, err)
	}
	return f, nil
}

// APrefixKind is the adaptive prefix filter as a filter kind ("aprefix"):
// the static filter's bins and spare plus fix information (see
// AdaptiveFilter). Its one option, BitsPerKey, caps the local state, fixes
// included (12 to 64; 0: DefaultMaxBitsPerKey = 12.5): more room keeps more
// fixes under heavy adaptation. Its local state is the encoding
// DecodeAdaptive reads, its remote representation every key's hash word in
// bin order.
type APrefixKind struct {
	maxBitsPerKey uint32 // 0: DefaultMaxBitsPerKey
}

var _ filter.Kind = APrefixKind{}

// DefaultMaxBitsPerKey is aprefix's default cap on its local state.
const DefaultMaxBitsPerKey = maxCentiBitsPerKey / 100.0

// Name implements filter.Kind.
func (APrefixKind) Name() string { return "aprefix" }

// Code implements filter.Kind.
func (APrefixKind) Code() filter.Code { return filter.CodeAPrefix }

// Adaptive implements filter.Kind.
func (APrefixKind) Adaptive() bool { return true }

// Configure implements filter.Kind: BitsPerKey, the cap on the local state
// (12 to 64 bits per key; 0: DefaultMaxBitsPerKey).
func (k APrefixKind) Configure(o filter.Options) (filter.Kind, error) {
	if o.BitsPerKey != 0 && (o.BitsPerKey < 12 || o.BitsPerKey > 64) {
		return nil, fmt.Errorf("%w: aprefix: BitsPerKey %d not in [12, 64] (the cap on the local state; the static part alone takes 11.5)",
			filter.ErrInvalidOptions, o.BitsPerKey)
	}
	k.maxBitsPerKey = uint32(o.BitsPerKey)
	return k, nil
}

// Params implements filter.Kind: P1 is the cap on the local state in bits
// per key (0: the default).
func (k APrefixKind) Params() filter.Params { return filter.Params{P1: k.maxBitsPerKey} }

// NewBuilder implements filter.Kind.
func (APrefixKind) NewBuilder(o filter.BuildOptions) filter.Builder {
	return &adaptiveBuilder{hashes: *NewBuilder(o.Seed, 0), withRemote: o.WithRemote}
}

// adaptiveBuilder keeps each key's packed hash in a static Builder (its
// pooled blocks) and its extension bits in pooled blocks beside them: a
// store builds a filter per table it writes, and slices grown from nothing
// for every table were most of a build's allocations and a third of its
// time.
type adaptiveBuilder struct {
	hashes     Builder
	ext        []*extBlock // block i holds the extension bits of hashes' block i
	withRemote bool
}

// extBlock holds the extension bits of hashBlockLen keys.
type extBlock [hashBlockLen]uint32

var extBlockPool = sync.Pool{New: func() any { return new(extBlock) }}

func (b *adaptiveBuilder) Add(key []byte) {
	h := &b.hashes
	packed, h2 := hashKey(key, h.hashSeed)
	i := h.n % hashBlockLen
	if i == 0 {
		h.newBlock()
		b.ext = append(b.ext, extBlockPool.Get().(*extBlock))
	}
	h.blocks[len(h.blocks)-1][i] = packed
	b.ext[len(b.ext)-1][i] = uint32(extOf(h2))
	h.n++
}

func (b *adaptiveBuilder) Finish() ([]byte, []uint64, error) {
	var remote []uint64
	if n := uint64(b.hashes.n); b.withRemote && n <= MaxKeys {
		// Before the static build, which returns the hash blocks to their
		// pool; it makes binsFor(n) bins.
		remote = b.remoteWords(binsFor(n))
	}
	for i, blk := range b.ext {
		extBlockPool.Put(blk)
		b.ext[i] = nil
	}
	b.ext = b.ext[:0]
	f, err := b.hashes.Finish()
	if err != nil {
		return nil, nil, err
	}
	return emptyFixSection(slices.Clip(f.data)), remote, nil
}

// remoteWords lays out the remote representation of the keys added to a
// filter of m bins: every key's word (bin·6400 + fingerprint)<<24 |
// extension, sorted (a counting sort by bin, then an insertion sort of
// each bin's ~24 words), then m+1 words giving where each bin's words
// start (the last is n).
func (b *adaptiveBuilder) remoteWords(m uint64) []uint64 {
	n := b.hashes.n
	out := make([]uint64, uint64(n)+m+1)
	words, index := out[:n], out[n:]
	for i, blk := range b.hashes.blocks {
		for _, h := range filled(blk, i, n) {
			index[binOf(h, m)+1]++
		}
	}
	for bin := uint64(1); bin <= m; bin++ {
		index[bin] += index[bin-1]
	}
	// index[bin] is now the bin's start; filling advances it to its end.
	for i, blk := range b.hashes.blocks {
		ext := b.ext[i]
		for j, h := range filled(blk, i, n) {
			bin := binOf(h, m)
			words[index[bin]] = (bin*fingerprintRange+h&qrMask)<<(64-extShift) | uint64(ext[j])
			index[bin]++
		}
	}
	copy(index[1:], index[:m])
	index[0] = 0
	for bin := uint64(0); bin < m; bin++ {
		sortSmall(words[index[bin]:index[bin+1]])
	}
	return out
}

// sortSmall sorts s ascending: an insertion sort for the short runs of a
// bin (Poisson with mean 23.75; measured 25% faster than slices.Sort on
// them), slices.Sort beyond maxInsertionSort.
func sortSmall(s []uint64) {
	const maxInsertionSort = 64
	if len(s) > maxInsertionSort {
		slices.Sort(s)
		return
	}
	for i := 1; i < len(s); i++ {
		x := s[i]
		j := i
		for ; j > 0 && s[j-1] > x; j-- {
			s[j] = s[j-1]
		}
		s[j] = x
	}
}

// Decode implements filter.Kind; errors wrap filter.ErrCorrupt.
func (APrefixKind) Decode(p filter.Params, _ uint64, local []byte, remote filter.Remote) (filter.Filter, error) {
	centi := uint64(maxCentiBitsPerKey)
	if p.P1 != 0 {
		if p.P1 < 12 || p.P1 > 64 {
			return nil, fmt.Errorf("%w: aprefix: cap of %d bits per key", filter.ErrCorrupt, p.P1)
		}
		centi = 100 * uint64(p.P1)
	}
	f, err := decodeAdaptive(local, remote, centi)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", filter.ErrCorrupt, err)
	}
	return f, nil
}

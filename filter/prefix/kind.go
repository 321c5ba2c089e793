package prefix

import (
	"fmt"
	"slices"

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
	hint := max(o.SizeHint, 0)
	return &adaptiveBuilder{
		seed:       o.Seed,
		hashSeed:   hashSeedOf(o.Seed),
		packed:     make([]uint64, 0, hint),
		ext:        make([]uint32, 0, hint),
		withRemote: o.WithRemote,
	}
}

// adaptiveBuilder keeps each key's packed hash and extension bits.
type adaptiveBuilder struct {
	seed       uint64
	hashSeed   uint32
	packed     []uint64
	ext        []uint32
	withRemote bool
}

func (b *adaptiveBuilder) Add(key []byte) {
	packed, h2 := hashKey(key, b.hashSeed)
	b.packed = append(b.packed, packed)
	b.ext = append(b.ext, uint32(extOf(h2)))
}

func (b *adaptiveBuilder) Finish() ([]byte, []uint64, error) {
	n := uint64(len(b.packed))
	if n > MaxKeys {
		return nil, nil, fmt.Errorf("%w: %d > %d", ErrTooManyKeys, n, uint64(MaxKeys))
	}
	f := build(b.packed, b.seed)
	local := emptyFixSection(slices.Clip(f.data))
	var remote []uint64
	if b.withRemote {
		remote = remoteWords(b.packed, b.ext, f.numBins)
	}
	b.packed, b.ext = b.packed[:0], b.ext[:0]
	return local, remote, nil
}

// remoteWords lays out the remote representation: every key's word
// (bin·6400 + fingerprint)<<24 | extension, sorted (a counting sort by bin,
// then an insertion sort of each bin's ~24 words), then m+1 words giving
// where each bin's words start (the last is n).
func remoteWords(packed []uint64, ext []uint32, m uint64) []uint64 {
	n := uint64(len(packed))
	out := make([]uint64, n+m+1)
	words, index := out[:n], out[n:]
	for _, h := range packed {
		index[binOf(h, m)+1]++
	}
	for b := uint64(1); b <= m; b++ {
		index[b] += index[b-1]
	}
	// index[b] is now bin b's start; fill advances it to bin b's end.
	for i, h := range packed {
		b := binOf(h, m)
		words[index[b]] = (b*fingerprintRange+h&qrMask)<<(64-extShift) | uint64(ext[i])
		index[b]++
	}
	copy(index[1:], index[:m])
	index[0] = 0
	for b := uint64(0); b < m; b++ {
		slices.Sort(words[index[b]:index[b+1]])
	}
	return out
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

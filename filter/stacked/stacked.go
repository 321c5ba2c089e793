// Package stacked is the Stacked Filter of Deeds, Hentschel and Idreos
// ("Stacked Filters: Learning to Filter by Structure", VLDB 2021): a
// stack of filters that alternately hold the table's keys and the store's
// known negatives (section 3), so that a frequently asked absent key is a
// false positive only if it fools every positive layer, while an unknown
// key sees about the first layer's rate.
//
// A query walks the layers and stops at the first that says "no": a
// positive layer's no means absent, a negative layer's no means present
// (the key may be stored); a key that passes every layer gets the last
// layer's side. Layer 1 holds every key, layer 2 the known negatives that
// layer 1 lets through, layer 3 the keys that layer 2 lets through, and so
// on, so a stored key is never answered absent.
//
// The number of layers (1, 3 or 5), how many of the most counted known
// negatives to use and each layer's rate come from the equations of
// section 4 for the configured bits per key (plan.go). A table written
// without known negatives is a one-layer filter.
//
// Layers are Bloom filters of this package (bloom.go), not the project's
// prefix or fuse filters: the planner asks for arbitrary rates, often high
// (inner layers of 5-20%) and for small sets, which a Bloom filter meets
// at s(alpha) = log2(1/alpha)/ln 2 bits per element exactly, while a
// fingerprint filter rounds the rate to a power of two and pays a fixed
// overhead per layer.
package stacked

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/adaptkv/adaptkv/filter"
)

// DefaultBitsPerKey is the default budget per stored key, layers included
// (about the 11.6 bits/key of taf and the prefix filter).
const DefaultBitsPerKey = 12

// Kind is the stacked filter kind. The zero value has the defaults;
// configure it with Configure.
type Kind struct {
	bitsPerKey int
	layers     int // forces the number of layers (tests); 0: the planner's choice
}

var _ filter.Kind = Kind{}

// Name implements filter.Kind.
func (Kind) Name() string { return "stacked" }

// Code implements filter.Kind.
func (Kind) Code() filter.Code { return filter.CodeStacked }

// Adaptive implements filter.Kind: a stacked filter is static, built for
// the known negatives of its table's write.
func (Kind) Adaptive() bool { return false }

func (k Kind) bits() int {
	if k.bitsPerKey == 0 {
		return DefaultBitsPerKey
	}
	return k.bitsPerKey
}

// Configure implements filter.Kind: it reads BitsPerKey (4..64, 0:
// DefaultBitsPerKey).
func (k Kind) Configure(o filter.Options) (filter.Kind, error) {
	if o.BitsPerKey != 0 && (o.BitsPerKey < 4 || o.BitsPerKey > 64) {
		return nil, fmt.Errorf("%w: stacked BitsPerKey %d not in [4,64]", filter.ErrInvalidOptions, o.BitsPerKey)
	}
	k.bitsPerKey = o.BitsPerKey
	return k, nil
}

// Params implements filter.Kind: P1 is the bits per key.
func (k Kind) Params() filter.Params { return filter.Params{P1: uint32(k.bits())} }

// NewBuilder implements filter.Kind.
func (k Kind) NewBuilder(o filter.BuildOptions) filter.Builder {
	return &Builder{kind: k, seed: o.Seed, negs: filter.NewAbsentInRange(o.KnownNegatives), hashes: make([]uint64, 0, o.SizeHint)}
}

// Builder builds one stacked filter; see filter.Builder.
type Builder struct {
	kind   Kind
	seed   uint64
	hashes []uint64              // of the keys added
	negs   *filter.AbsentInRange // the known negatives in range and not stored
}

// Add implements filter.Builder. Keys arrive sorted and distinct.
func (b *Builder) Add(key []byte) {
	b.negs.Add(key)
	b.hashes = append(b.hashes, filter.Hash64(b.seed, key))
}

// Finish implements filter.Builder. The remote representation is nil: a
// stacked filter does not adapt.
func (b *Builder) Finish() ([]byte, []uint64, error) {
	kept := b.negs.Kept()
	counts := make([]uint64, len(kept))
	order := filter.MostCounted(kept)
	for i, j := range order {
		counts[i] = kept[j].Count
	}
	p := planFor(len(b.hashes), float64(b.kind.bits()), counts, b.kind.layers)
	negs := make([]uint64, p.negatives)
	for i := range negs {
		negs[i] = filter.Hash64(b.seed, kept[order[i]].Key)
	}
	f := build(b.hashes, negs, p.alphas, b.seed)
	return f.appendTo(nil), nil, nil
}

// build stacks the layers of plan rates alphas over positives pos and
// known negatives neg (hashes). A layer's set is what passed the previous
// layer of the other side; the stack ends early when the side that would
// be tested next has nothing left (see Filter.MayContain for why that is
// still exact).
func build(pos, neg []uint64, alphas []float64, seed uint64) *Filter {
	f := &Filter{n: uint64(len(pos)), seed: seed}
	for i, a := range alphas {
		set, other := pos, neg
		if i%2 == 1 {
			set, other = neg, pos
		}
		if i > 0 && len(set) == 0 {
			break
		}
		l := newLayer(len(set), a, filter.Mix64(seed+uint64(i+1)*0x9E3779B97F4A7C15))
		for _, h := range set {
			l.add(h)
		}
		f.layers = append(f.layers, l)
		// What this layer lets through of the other side goes on.
		var passed []uint64
		for _, h := range other {
			if l.contains(h) {
				passed = append(passed, h)
			}
		}
		if i%2 == 0 {
			neg = passed
		} else {
			pos = passed
		}
	}
	return f
}

// Filter is a decoded stacked filter. It is immutable: safe for
// concurrent use.
type Filter struct {
	n      uint64
	layers []*layer
	seed   uint64
}

// MayContain implements filter.Filter: the first layer that says no
// decides (a positive layer: absent; a negative layer: present); a key
// that passes every layer gets the last layer's side. A stored key passes
// every positive layer it reaches (they hold every stored key that reaches
// them) and is stopped by a negative layer or reaches the end on a
// positive one: the stack ends on a negative layer only when no stored key
// passed it.
func (f *Filter) MayContain(key []byte) bool {
	h := filter.Hash64(f.seed, key)
	for i, l := range f.layers {
		if !l.contains(h) {
			return i%2 == 1
		}
	}
	return len(f.layers)%2 == 1
}

// Layers is the number of layers.
func (f *Filter) Layers() int { return len(f.layers) }

// BitsPerKey implements filter.Filter.
func (f *Filter) BitsPerKey() float64 {
	if f.n == 0 {
		return 0
	}
	return float64(f.SizeBytes()) * 8 / float64(f.n)
}

// SizeBytes implements filter.Filter: the layers' bits.
func (f *Filter) SizeBytes() int {
	n := 0
	for _, l := range f.layers {
		n += len(l.words) * 8
	}
	return n
}

// Local state layout, version 1 (little-endian):
//
//	version u8 | layers u8 | keys u64 | layers x (m u64, k u8, salt u64, m/64 words u64)
const formatVersion = 1

const maxLayers = 5

func (f *Filter) appendTo(b []byte) []byte {
	b = append(b, formatVersion, byte(len(f.layers)))
	b = binary.LittleEndian.AppendUint64(b, f.n)
	for _, l := range f.layers {
		b = l.appendTo(b)
	}
	return b
}

var errShort = errors.New("truncated")

// Decode implements filter.Kind. Errors wrap filter.ErrCorrupt.
func (k Kind) Decode(_ filter.Params, seed uint64, local []byte, _ filter.Remote) (filter.Filter, error) {
	f, err := decode(seed, local)
	if err != nil {
		return nil, fmt.Errorf("%w: stacked: %w", filter.ErrCorrupt, err)
	}
	return f, nil
}

func decode(seed uint64, b []byte) (*Filter, error) {
	if len(b) < 10 {
		return nil, errShort
	}
	if b[0] != formatVersion {
		return nil, fmt.Errorf("unsupported version %d", b[0])
	}
	nl := int(b[1])
	if nl < 1 || nl > maxLayers {
		return nil, fmt.Errorf("%d layers", nl)
	}
	f := &Filter{n: binary.LittleEndian.Uint64(b[2:]), seed: seed}
	b = b[10:]
	for i := range nl {
		if len(b) < layerHeader {
			return nil, errShort
		}
		m := binary.LittleEndian.Uint64(b)
		k := int(b[8])
		salt := binary.LittleEndian.Uint64(b[9:])
		b = b[layerHeader:]
		if m == 0 || m%64 != 0 || k < 1 || k > maxProbes {
			return nil, fmt.Errorf("layer %d: %d bits, %d probes", i+1, m, k)
		}
		if m/8 > uint64(len(b)) {
			return nil, errShort
		}
		l := &layer{words: make([]uint64, m/64), m: m, k: k, salt: salt}
		for j := range l.words {
			l.words[j] = binary.LittleEndian.Uint64(b[8*j:])
		}
		b = b[m/8:]
		f.layers = append(f.layers, l)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d trailing bytes", len(b))
	}
	return f, nil
}

package adaptive

import (
	"errors"
	"fmt"
	"math"

	"github.com/adaptkv/adaptkv/filterpolicy/filter"
	"github.com/adaptkv/adaptkv/internal/base"
)

// The four variants as filter kinds (filter.Kind). A kind owns its options
// (remainder bits, load factor, validated by Configure, the same rules as
// NewBuilder's) and its encoding (MarshalBinary; Decode checks that the
// state holds this variant).
var (
	RSQFKind = FilterKind{variant: KindRSQF, code: filter.CodeRSQF}
	UTAFKind = FilterKind{variant: KindUTAF, code: filter.CodeUTAF}
	TAFKind  = FilterKind{variant: KindTAF, code: filter.CodeTAF}
	ExAFKind = FilterKind{variant: KindExAF, code: filter.CodeExAF}
	CAFKind  = FilterKind{variant: KindCAF, code: filter.CodeCAF}
)

// FilterKind is one variant as a filter kind; use RSQFKind, UTAFKind,
// TAFKind, ExAFKind or CAFKind.
type FilterKind struct {
	variant       Kind
	code          filter.Code
	remainderBits int
	loadFactor    float64
}

var _ filter.Kind = FilterKind{}

// Name implements filter.Kind.
func (k FilterKind) Name() string { return k.variant.String() }

// Code implements filter.Kind.
func (k FilterKind) Code() filter.Code { return k.code }

// Adaptive implements filter.Kind. An rsqf filter is decoded as an
// adaptive.Filter too (its Adapt returns ErrNotAdaptive), so tables count
// its false positives the same way.
func (k FilterKind) Adaptive() bool { return true }

// Configure implements filter.Kind: RemainderBits and LoadFactor, with
// NewBuilder's defaults and ranges. Errors wrap filter.ErrInvalidOptions.
func (k FilterKind) Configure(o filter.Options) (filter.Kind, error) {
	n, err := Options{RemainderBits: o.RemainderBits, LoadFactor: o.LoadFactor, Seed: 1}.normalize()
	if err != nil {
		return nil, base.InvalidOptions(k.Name(), err)
	}
	k.remainderBits, k.loadFactor = n.RemainderBits, n.LoadFactor
	return k, nil
}

func (k FilterKind) options(seed uint64) Options {
	if k.remainderBits == 0 { // not configured: the defaults
		k.remainderBits, k.loadFactor = DefaultRemainderBits, DefaultLoadFactor
	}
	return Options{RemainderBits: k.remainderBits, LoadFactor: k.loadFactor, Seed: seed}
}

// Params implements filter.Kind: P1 is the remainder bits, P2 the load
// factor in millionths.
func (k FilterKind) Params() filter.Params {
	o := k.options(1)
	return filter.Params{P1: uint32(o.RemainderBits), P2: uint32(math.Round(o.LoadFactor * 1e6))}
}

// NewBuilder implements filter.Kind. The remote representation is the
// builder's hash tails in slot order.
func (k FilterKind) NewBuilder(o filter.BuildOptions) filter.Builder {
	return kindBuilder{NewBuilder(k.variant, k.options(o.Seed), o.SizeHint)}
}

type kindBuilder struct{ b *Builder }

func (k kindBuilder) Add(key []byte) { k.b.Add(key) }

func (k kindBuilder) Finish() ([]byte, []uint64, error) {
	f, remote, err := k.b.Finish()
	if err != nil {
		return nil, nil, err
	}
	local, err := f.MarshalBinary()
	if err != nil {
		return nil, nil, err
	}
	if len(remote) != f.Slots() {
		return nil, nil, fmt.Errorf("remote has %d tails for %d slots", len(remote), f.Slots())
	}
	if remote == nil {
		remote = []uint64{}
	}
	return local, remote, nil
}

var errWrongVariant = errors.New("wrong variant")

// Decode implements filter.Kind; errors wrap filter.ErrCorrupt.
func (k FilterKind) Decode(_ filter.Params, _ uint64, local []byte, remote filter.Remote) (filter.Filter, error) {
	f, err := Decode(local, remote)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", filter.ErrCorrupt, err)
	}
	if f.Kind() != k.variant {
		return nil, fmt.Errorf("%w: %w: local state holds a %s filter, header says %s", filter.ErrCorrupt, errWrongVariant, f.Kind(), k.variant)
	}
	return f, nil
}

package quotient

import (
	"errors"
	"fmt"
	"math"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/internal/base"
)

// The four variants as filter kinds (filter.Kind). A kind owns its options
// (remainder bits, load factor, validated by Configure, the same rules as
// NewBuilder's) and its encoding (MarshalBinary; Decode checks that the
// state holds this variant).
var (
	RSQFKind = Kind{variant: RSQF, code: filter.CodeRSQF}
	UTAFKind = Kind{variant: UTAF, code: filter.CodeUTAF}
	TAFKind  = Kind{variant: TAF, code: filter.CodeTAF}
	ExAFKind = Kind{variant: ExAF, code: filter.CodeExAF}
	CAFKind  = Kind{variant: CAF, code: filter.CodeCAF}
)

// Kind is one variant as a filter kind; use RSQFKind, UTAFKind,
// TAFKind, ExAFKind or CAFKind.
type Kind struct {
	variant       Variant
	code          filter.Code
	remainderBits int
	loadFactor    float64
}

var _ filter.Kind = Kind{}

// Name implements filter.Kind.
func (k Kind) Name() string { return k.variant.String() }

// Code implements filter.Kind.
func (k Kind) Code() filter.Code { return k.code }

// Adaptive implements filter.Kind. An rsqf filter is decoded as an
// Adaptive filter too (its Adapt returns filter.ErrNotAdaptive), so tables count
// its false positives the same way.
func (k Kind) Adaptive() bool { return true }

// Configure implements filter.Kind: RemainderBits and LoadFactor, with
// NewBuilder's defaults and ranges. Errors wrap filter.ErrInvalidOptions.
func (k Kind) Configure(o filter.Options) (filter.Kind, error) {
	n, err := Options{RemainderBits: o.RemainderBits, LoadFactor: o.LoadFactor, Seed: 1}.normalize()
	if err != nil {
		return nil, base.InvalidOptions(k.Name(), err)
	}
	k.remainderBits, k.loadFactor = n.RemainderBits, n.LoadFactor
	return k, nil
}

func (k Kind) options(seed uint64) Options {
	if k.remainderBits == 0 { // not configured: the defaults
		k.remainderBits, k.loadFactor = DefaultRemainderBits, DefaultLoadFactor
	}
	return Options{RemainderBits: k.remainderBits, LoadFactor: k.loadFactor, Seed: seed}
}

// Params implements filter.Kind: P1 is the remainder bits, P2 the load
// factor in millionths.
func (k Kind) Params() filter.Params {
	o := k.options(1)
	return filter.Params{P1: uint32(o.RemainderBits), P2: uint32(math.Round(o.LoadFactor * 1e6))}
}

// NewBuilder implements filter.Kind. The remote representation is the
// builder's hash tails in slot order.
func (k Kind) NewBuilder(o filter.BuildOptions) filter.Builder {
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
func (k Kind) Decode(_ filter.Params, _ uint64, local []byte, remote filter.Remote) (filter.Filter, error) {
	f, err := Decode(local, remote)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", filter.ErrCorrupt, err)
	}
	if f.Variant() != k.variant {
		return nil, fmt.Errorf("%w: %w: local state holds a %s filter, header says %s", filter.ErrCorrupt, errWrongVariant, f.Variant(), k.variant)
	}
	return f, nil
}

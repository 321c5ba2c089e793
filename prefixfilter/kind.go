package prefixfilter

import (
	"fmt"

	"github.com/adaptkv/adaptkv/filterpolicy/filter"
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

package filterpolicy

import (
	"fmt"

	"github.com/adaptkv/adaptkv/prefixfilter"
)

// The prefix kind is the static Prefix Filter (package prefixfilter); its
// encoding is the local state and is queried in place.

type prefixBuilder struct{ b *prefixfilter.Builder }

func newPrefixBuilder(seed uint64) keyBuilder {
	return &prefixBuilder{b: prefixfilter.NewBuilder(seed, 0)}
}

func (p *prefixBuilder) add(key []byte) { p.b.Add(key) }

func (p *prefixBuilder) finish() ([]byte, []uint64, error) {
	f, err := p.b.Finish()
	if err != nil {
		return nil, nil, err
	}
	local, err := f.MarshalBinary()
	return local, nil, err
}

func openPrefix(h Header, local []byte) (Filter, error) {
	f, err := prefixfilter.Decode(local)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptBlock, err)
	}
	return f, nil
}

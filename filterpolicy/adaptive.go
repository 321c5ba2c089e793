package filterpolicy

import (
	"fmt"

	"github.com/adaptkv/adaptkv/adaptive"
)

// The rsqf, utaf, taf and exaf kinds are the quotient-filter based filters
// of package adaptive. The block's local state is the filter's
// MarshalBinary; our sstable writer appends the remote representation (the
// builder's hash tails, slot order) after it.

func adaptiveKind(k KindCode) adaptive.Kind {
	switch k {
	case KindRSQF:
		return adaptive.KindRSQF
	case KindUTAF:
		return adaptive.KindUTAF
	case KindTAF:
		return adaptive.KindTAF
	case KindExAF:
		return adaptive.KindExAF
	}
	return 0
}

type adaptiveBuilder struct {
	kind adaptive.Kind
	opts adaptive.Options
	b    *adaptive.Builder
}

func newAdaptiveBuilder(k KindCode, seed uint64, o Options) keyBuilder {
	ao := adaptive.Options{RemainderBits: o.RemainderBits, LoadFactor: o.LoadFactor, Seed: seed}
	return &adaptiveBuilder{kind: adaptiveKind(k), opts: ao, b: adaptive.NewBuilder(adaptiveKind(k), ao, 0)}
}

func (a *adaptiveBuilder) add(key []byte) { a.b.Add(key) }

func (a *adaptiveBuilder) finish() ([]byte, []uint64, error) {
	f, remote, err := a.b.Finish()
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

func openAdaptive(h Header, local []byte, remote adaptive.Remote) (Filter, error) {
	f, err := adaptive.Decode(local, remote)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptBlock, err)
	}
	if f.Kind() != adaptiveKind(h.Kind) {
		return nil, fmt.Errorf("%w: local state holds a %s filter, header says %s", ErrCorruptBlock, f.Kind(), h.Kind)
	}
	if h.HasRemote && h.RemoteSlots != f.Slots() {
		return nil, fmt.Errorf("%w: remote has %d slots, filter %d", ErrCorruptBlock, h.RemoteSlots, f.Slots())
	}
	return f, nil
}

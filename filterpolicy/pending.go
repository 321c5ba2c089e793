package filterpolicy

import (
	"errors"
	"fmt"

	"github.com/adaptkv/adaptkv/adaptive"
)

var errPending = errors.New("filter kind not available in this build yet")

type pendingBuilder struct{ err error }

func (b pendingBuilder) add([]byte)                        {}
func (b pendingBuilder) finish() ([]byte, []uint64, error) { return nil, nil, b.err }

func newPrefixBuilder(seed uint64) keyBuilder { return pendingBuilder{errPending} }
func newAdaptiveBuilder(k KindCode, seed uint64, o Options) keyBuilder {
	return pendingBuilder{errPending}
}
func openPrefix(h Header, local []byte) (Filter, error) {
	return nil, fmt.Errorf("%w: %w", ErrCorruptBlock, errPending)
}
func openAdaptive(h Header, local []byte, r adaptive.Remote) (Filter, error) {
	return nil, fmt.Errorf("%w: %w", ErrCorruptBlock, errPending)
}

// Package pebblefilter makes a filterpolicy.Policy a Pebble FilterPolicy,
// so a pebble.DB can guard its tables with any adaptkv filter kind:
//
//	p, _ := filterpolicy.ByName("taf")
//	fp, err := pebblefilter.New(p)
//	opts.Levels[i].FilterPolicy = fp
//
// The blocks it writes are filterpolicy's self-describing blocks without a
// remote section, so inside Pebble an adaptive filter answers as its
// static self and never adapts (Pebble tells a filter nothing of its false
// positives). A block that is not a valid block of the policy's kind
// (another kind, a newer format, a bad checksum) answers "maybe", never a
// false negative.
//
// Pebble hands MayContain the raw block on every query. Verifying it each
// time is a pass over its bytes, so each adapter keeps the verified view of
// every block it was asked about, keyed by the block's address, length,
// seed and checksum (Policy's doc says how it is bounded).
package pebblefilter

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/cockroachdb/pebble/v2"
)

// Policy is a filterpolicy.Policy as a pebble.FilterPolicy. Make one with
// New; it is safe for concurrent use, and the pebble.DBs that share one
// share its views.
//
// A view of a static filter reads the bytes at the block's address (a
// block at the same address with the same seed and checksum is the same
// filter); an adaptive filter's view is a decoded copy. Views keep their
// memory reachable, so the views are dropped together when they number
// more than 4096 blocks or 128 MiB.
type Policy struct {
	p    filterpolicy.Policy
	code filter.Code // p's kind's

	views        sync.Map // viewKey -> *view
	count, bytes atomic.Int64
	last         atomic.Pointer[view] // the block asked about last
}

var _ pebble.FilterPolicy = (*Policy)(nil)

// New returns p as a Pebble FilterPolicy with views of its own. A nil
// policy, or one without a kind, is an error wrapping
// filterpolicy.ErrInvalidOptions.
func New(p filterpolicy.Policy) (*Policy, error) {
	if p == nil || p.Kind() == nil {
		return nil, fmt.Errorf("%w: pebblefilter: a policy with a filter kind is needed", filterpolicy.ErrInvalidOptions)
	}
	return &Policy{p: p, code: p.Kind().Code()}, nil
}

const (
	maxViews     = 4096
	maxViewBytes = 128 << 20
)

type viewKey struct {
	ptr uintptr
	n   int
	id  filterpolicy.BlockID
}

// view is a verified block: f is nil for a block that is not a valid
// block of the policy's kind (queries answer "maybe").
type view struct {
	key viewKey
	f   filter.Filter
}

// Name implements pebble.FilterPolicy: the name under which Pebble stores
// the block ("fullfilter." + Name()), filterpolicy.PebbleName of the
// policy's name.
func (a *Policy) Name() string { return filterpolicy.PebbleName(a.p.Name()) }

// NewWriter implements pebble.FilterPolicy (filterpolicy.BlockWriter).
func (a *Policy) NewWriter(pebble.FilterType) pebble.FilterWriter {
	return filterpolicy.BlockWriter(a.p)
}

// MayContain implements pebble.FilterPolicy. A block that is not a valid
// block of the policy's kind answers true: never a false negative.
func (a *Policy) MayContain(_ pebble.FilterType, block, key []byte) bool {
	f := a.view(block)
	if f == nil {
		return true
	}
	return f.MayContain(key)
}

// view returns the filter of a block Pebble passed, verified and decoded
// once per block; nil for a block not of the policy's kind.
func (a *Policy) view(block []byte) filter.Filter {
	id, ok := filterpolicy.PeekBlockID(block)
	if !ok || id.Code != a.code {
		return nil
	}
	key := viewKey{ptr: uintptr(unsafe.Pointer(unsafe.SliceData(block))), n: len(block), id: id}
	// Fast path: the block asked about last (one table's filter queried
	// repeatedly).
	if last := a.last.Load(); last != nil && last.key == key {
		return last.f
	}
	var v *view
	if e, ok := a.views.Load(key); ok {
		v = e.(*view)
	} else {
		// Full verification (header, lengths, checksum) and decoding.
		f, err := a.p.Open(block, filter.NoRemote{})
		if err != nil {
			f = nil
		}
		v = &view{key: key, f: f}
		size := int64(len(block))
		if f != nil && a.p.Adaptive() {
			size = int64(f.SizeBytes())
		}
		if a.count.Add(1) > maxViews || a.bytes.Add(size) > maxViewBytes {
			a.views.Clear()
			a.count.Store(1)
			a.bytes.Store(size)
		}
		a.views.Store(key, v)
	}
	a.last.Store(v)
	return v.f
}

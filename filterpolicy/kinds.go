package filterpolicy

import (
	"github.com/adaptkv/adaptkv/filterpolicy/filter"
	"github.com/adaptkv/adaptkv/filterpolicy/stacked"
)

// filterKinds are the kinds implemented against package filter's contract
// (filter.Kind): their builds, decoding and parameters go through it. The
// older kinds are still switch cases of this package; issue 11 moves them
// here one by one.
var filterKinds = map[KindCode]filter.Kind{
	KindStacked: stacked.Kind{},
}

// kindBuilder adapts a filter.Builder to the package's keyBuilder.
type kindBuilder struct{ b filter.Builder }

func (k kindBuilder) add(key []byte)                    { k.b.Add(key) }
func (k kindBuilder) finish() ([]byte, []uint64, error) { return k.b.Finish() }

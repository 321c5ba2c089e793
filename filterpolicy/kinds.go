package filterpolicy

import (
	"fmt"
	"slices"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/filter/bloom"
	"github.com/adaptkv/adaptkv/filter/cuckoo"
	"github.com/adaptkv/adaptkv/filter/fuse"
	"github.com/adaptkv/adaptkv/filter/prefix"
	"github.com/adaptkv/adaptkv/filter/quotient"
	"github.com/adaptkv/adaptkv/filter/stacked"
)

// kinds is the registry: every filter kind, one line each. Names, codes,
// parameters, builds and decoding all come from the kind (filter.Kind);
// nothing else in the module lists kinds. To add one, see
// docs/ARCHITECTURE.md, "Filter kinds".
var kinds = []filter.Kind{
	noneKind{},
	bloom.Kind{},
	fuse.Kind{},
	prefix.Kind{},
	prefix.APrefixKind{},
	quotient.RSQFKind,
	quotient.TAFKind,
	quotient.ExAFKind,
	quotient.UTAFKind,
	quotient.CAFKind,
	stacked.Kind{},
	cuckoo.CuckooingKind,
	cuckoo.CyclicKind,
	cuckoo.SwappingKind,
}

// KindByName returns the registered kind named name (unconfigured).
func KindByName(name string) (filter.Kind, bool) {
	i := slices.IndexFunc(kinds, func(k filter.Kind) bool { return k.Name() == name })
	if i < 0 {
		return nil, false
	}
	return kinds[i], true
}

// KindByCode returns the registered kind with block-header code c.
func KindByCode(c filter.Code) (filter.Kind, bool) {
	i := slices.IndexFunc(kinds, func(k filter.Kind) bool { return k.Code() == c })
	if i < 0 {
		return nil, false
	}
	return kinds[i], true
}

// MetaBlockPrefix starts the metaindex name of every filter block this
// module writes ("fullfilter." + "adaptkv." + kind name).
const MetaBlockPrefix = "fullfilter.adaptkv."

// KindOfMetaBlock returns the kind whose filter block is stored under the
// metaindex name name, if any.
func KindOfMetaBlock(name string) (filter.Kind, bool) {
	if len(name) <= len(MetaBlockPrefix) || name[:len(MetaBlockPrefix)] != MetaBlockPrefix {
		return nil, false
	}
	return KindByName(name[len(MetaBlockPrefix):])
}

// noneKind is the "no filter" kind: every query answers "maybe".
type noneKind struct{}

func (noneKind) Name() string                                    { return "none" }
func (noneKind) Code() filter.Code                               { return filter.CodeNone }
func (noneKind) Adaptive() bool                                  { return false }
func (k noneKind) Configure(filter.Options) (filter.Kind, error) { return k, nil }
func (noneKind) Params() filter.Params                           { return filter.Params{} }
func (noneKind) NewBuilder(filter.BuildOptions) filter.Builder   { return noneBuilder{} }
func (noneKind) Decode(filter.Params, uint64, []byte, filter.Remote) (filter.Filter, error) {
	return noneFilter{}, nil
}

// noneFilter answers "maybe" for every key.
type noneFilter struct{}

func (noneFilter) MayContain([]byte) bool { return true }
func (noneFilter) BitsPerKey() float64    { return 0 }
func (noneFilter) SizeBytes() int         { return 0 }

type noneBuilder struct{}

func (noneBuilder) Add([]byte)                        {}
func (noneBuilder) Finish() ([]byte, []uint64, error) { return nil, nil, nil }

// checkRegistry verifies the registry's invariants: distinct names and
// codes. Run by a test.
func checkRegistry() error {
	names, codes := map[string]bool{}, map[filter.Code]bool{}
	for _, k := range kinds {
		if names[k.Name()] || codes[k.Code()] {
			return fmt.Errorf("filterpolicy: kind %s (code %d) registered twice", k.Name(), k.Code())
		}
		names[k.Name()], codes[k.Code()] = true, true
	}
	return nil
}

// KindName is the registry name of the kind with code c ("kind(N)" for a
// code no kind has).
func KindName(c filter.Code) string {
	if k, ok := KindByCode(c); ok {
		return k.Name()
	}
	return fmt.Sprintf("kind(%d)", uint8(c))
}

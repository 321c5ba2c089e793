package quotient

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/internal/base"
)

// Variant selects the filter variant.
type Variant uint8

// The filter kinds.
const (
	// RSQF is the non-adaptive rank-and-select quotient filter.
	RSQF Variant = iota + 1
	// UTAF is the telescoping adaptive filter with uncompressed selectors.
	UTAF
	// TAF is the telescoping adaptive filter (arithmetic-coded selectors).
	TAF
	// ExAF is the extension adaptive filter (broom filter).
	ExAF
	// CAF is the cache-augmented filter: a static RSQF whose blocks
	// cache recent false positives in the code word (see caf.go).
	CAF
)

// String returns the registry-style name of the kind.
func (k Variant) String() string {
	switch k {
	case RSQF:
		return "rsqf"
	case UTAF:
		return "utaf"
	case TAF:
		return "taf"
	case ExAF:
		return "exaf"
	case CAF:
		return "caf"
	}
	return fmt.Sprintf("Variant(%d)", uint8(k))
}

func (k Variant) valid() bool { return k >= RSQF && k <= CAF }

// Default parameters.
const (
	DefaultRemainderBits = 8
	DefaultLoadFactor    = 0.95
	MinRemainderBits     = 4
	MaxRemainderBits     = 16
	MaxLoadFactor        = 0.99
)

// Options configures a filter. The zero value means the defaults.
type Options struct {
	// RemainderBits is r, the bits stored per slot (4..16; 0 = 8). The
	// false-positive rate of a first-time query is about LoadFactor * 2^-r.
	RemainderBits int
	// LoadFactor is keys per home slot at build, in (0, 0.99] (0 = 0.95).
	LoadFactor float64
	// Seed seeds the hash (0 = random). It is stored in the encoding.
	// MurmurHash3 takes a 32-bit seed: the filter uses uint32(Seed) ^
	// uint32(Seed>>32).
	Seed uint64
}

// Filter is a filter of this family over a fixed key set: a filter.Adaptive
// (an RSQF's Adapt returns filter.ErrNotAdaptive) that also tells its
// variant and sizes.
type Filter interface {
	filter.Adaptive
	// Variant returns the variant.
	Variant() Variant
	// Len is the number of distinct elements (distinct hashes).
	Len() int
	// Slots is the slot count, the length of the remote representation.
	Slots() int
}

// Errors.
var (
	// ErrCorrupt is wrapped by Decode errors on bad bytes. It also matches
	// the module's one corruption error (kv.ErrCorruption).
	ErrCorrupt = base.CorruptionKind("quotient: corrupt filter encoding")
	// ErrInvalidOptions is wrapped by errors about bad Options or Variant (the
	// module's one invalid-options error, kv.ErrInvalidOptions).
	ErrInvalidOptions = base.ErrInvalidOptions
)

// normalize fills defaults and validates.
func (o Options) normalize() (Options, error) {
	if o.RemainderBits == 0 {
		o.RemainderBits = DefaultRemainderBits
	}
	if o.RemainderBits < MinRemainderBits || o.RemainderBits > MaxRemainderBits {
		return o, fmt.Errorf("%w: RemainderBits %d outside [%d, %d]", ErrInvalidOptions,
			o.RemainderBits, MinRemainderBits, MaxRemainderBits)
	}
	if o.LoadFactor == 0 {
		o.LoadFactor = DefaultLoadFactor
	}
	if math.IsNaN(o.LoadFactor) || o.LoadFactor <= 0 || o.LoadFactor > MaxLoadFactor {
		return o, fmt.Errorf("%w: LoadFactor %v outside (0, %v]", ErrInvalidOptions, o.LoadFactor, MaxLoadFactor)
	}
	if o.Seed == 0 {
		var b [8]byte
		for o.Seed == 0 {
			if _, err := crand.Read(b[:]); err != nil {
				return o, fmt.Errorf("adaptive: random seed: %w", err)
			}
			o.Seed = binary.LittleEndian.Uint64(b[:])
		}
	}
	return o, nil
}

// New builds a filter of the given kind over keys (duplicates allowed) with
// an in-memory remote representation.
func New(kind Variant, keys [][]byte, opts Options) (Filter, error) {
	b := NewBuilder(kind, opts, len(keys))
	for _, k := range keys {
		b.Add(k)
	}
	f, _, err := b.Finish()
	return f, err
}

// NewRSQF builds a non-adaptive RSQF with default options.
func NewRSQF(keys [][]byte) (Filter, error) { return New(RSQF, keys, Options{}) }

// NewUTAF builds an uncompressed-selector TAF with default options.
func NewUTAF(keys [][]byte) (Filter, error) { return New(UTAF, keys, Options{}) }

// NewTAF builds a telescoping adaptive filter with default options.
func NewTAF(keys [][]byte) (Filter, error) { return New(TAF, keys, Options{}) }

// NewExAF builds an extension adaptive filter with default options.
func NewExAF(keys [][]byte) (Filter, error) { return New(ExAF, keys, Options{}) }

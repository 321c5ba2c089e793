package adaptive

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/adaptkv/adaptkv/filterpolicy/filter"
	"github.com/adaptkv/adaptkv/internal/base"
)

// Kind selects the filter variant.
type Kind uint8

// The filter kinds.
const (
	// KindRSQF is the non-adaptive rank-and-select quotient filter.
	KindRSQF Kind = iota + 1
	// KindUTAF is the telescoping adaptive filter with uncompressed selectors.
	KindUTAF
	// KindTAF is the telescoping adaptive filter (arithmetic-coded selectors).
	KindTAF
	// KindExAF is the extension adaptive filter (broom filter).
	KindExAF
	// KindCAF is the cache-augmented filter: a static RSQF whose blocks
	// cache recent false positives in the code word (see caf.go).
	KindCAF
)

// String returns the registry-style name of the kind.
func (k Kind) String() string {
	switch k {
	case KindRSQF:
		return "rsqf"
	case KindUTAF:
		return "utaf"
	case KindTAF:
		return "taf"
	case KindExAF:
		return "exaf"
	case KindCAF:
		return "caf"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k >= KindRSQF && k <= KindCAF }

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

// Stats counts the adaptive work a filter has done (filter.Stats): for
// these kinds Rebuilds counts blocks reset because their code overflowed,
// and RemoteReads counts one read per fixed false positive (the colliding
// run), one more per rebuilt TAF/uTAF block (its 64 tails), and one per
// block read by Verify.
type Stats = filter.Stats

// Filter is an approximate-membership filter over a fixed key set.
type Filter interface {
	// MayContain reports whether key may be in the set; false means it is
	// certainly not. Lock-free, safe concurrently with Adapt.
	MayContain(key []byte) bool
	// Adapt tells the filter key was a false positive so it can fix it.
	// KindRSQF returns ErrNotAdaptive. Remote failures return an error
	// wrapping ErrRemote and leave the filter unchanged.
	Adapt(key []byte) error
	// BitsPerKey is the local state in bits per distinct key.
	BitsPerKey() float64
	// SizeBytes is the local state in bytes.
	SizeBytes() int
	// MarshalBinary encodes the local state (see Decode).
	MarshalBinary() ([]byte, error)
	// Stats returns the adaptation counters.
	Stats() Stats
	// Kind returns the variant.
	Kind() Kind
	// Len is the number of distinct elements (distinct hashes).
	Len() int
	// Slots is the slot count, the length of the remote representation.
	Slots() int
}

// Errors.
var (
	// ErrNotAdaptive is returned by Adapt on a non-adaptive filter
	// (filter.ErrNotAdaptive).
	ErrNotAdaptive = filter.ErrNotAdaptive
	// ErrCorrupt is wrapped by Decode errors on bad bytes. It also matches
	// the module's one corruption error (kv.ErrCorruption).
	ErrCorrupt = base.CorruptionKind("adaptive: corrupt filter encoding")
	// ErrInvalidOptions is wrapped by errors about bad Options or Kind (the
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
func New(kind Kind, keys [][]byte, opts Options) (Filter, error) {
	b := NewBuilder(kind, opts, len(keys))
	for _, k := range keys {
		b.Add(k)
	}
	f, _, err := b.Finish()
	return f, err
}

// NewRSQF builds a non-adaptive RSQF with default options.
func NewRSQF(keys [][]byte) (Filter, error) { return New(KindRSQF, keys, Options{}) }

// NewUTAF builds an uncompressed-selector TAF with default options.
func NewUTAF(keys [][]byte) (Filter, error) { return New(KindUTAF, keys, Options{}) }

// NewTAF builds a telescoping adaptive filter with default options.
func NewTAF(keys [][]byte) (Filter, error) { return New(KindTAF, keys, Options{}) }

// NewExAF builds an extension adaptive filter with default options.
func NewExAF(keys [][]byte) (Filter, error) { return New(KindExAF, keys, Options{}) }

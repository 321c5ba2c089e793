// Package filter is the contract every filter kind of adaptkv implements:
// build from a table's keys, query, adapt (adaptive kinds), encode and
// decode, and validate its own parameters. A kind is one type (see Kind),
// registered once in package filterpolicy; filterpolicy frames the kind's
// local state in a self-describing block and the sstable package stores it
// in a table. See docs/ARCHITECTURE.md, "Filter kinds".
//
// The package sits at the bottom of the filter tree and imports nothing of
// the store: each family is a package under it (bloom, fuse, stacked,
// quotient, cuckoo, prefix) that implements Kind without depending on
// storage code or on the registry.
package filter

import (
	"errors"

	"github.com/adaptkv/adaptkv/internal/base"
)

// Sentinel errors shared by every kind.
var (
	// ErrInvalidOptions is wrapped by Kind.Configure for out-of-range or
	// unsupported options (the module's one invalid-options error,
	// kv.ErrInvalidOptions).
	ErrInvalidOptions = base.ErrInvalidOptions
	// ErrCorrupt is wrapped by Kind.Decode for bytes that are not a valid
	// local state of the kind. It also matches the module's one corruption
	// error (kv.ErrCorruption).
	ErrCorrupt = base.CorruptionKind("filter: corrupt filter encoding")
	// ErrRemote is wrapped by every error that comes from reading the
	// remote representation: an unreadable, truncated or inconsistent
	// entry. Adapt returns it and leaves the filter unchanged.
	ErrRemote = errors.New("filter: remote representation unreadable or inconsistent")
	// ErrNotAdaptive is returned by Adapt of a kind that does not adapt.
	ErrNotAdaptive = errors.New("filter: filter kind does not adapt")
)

// Code identifies a kind in a filter block header. Values are part of the
// on-disk format and never reused.
type Code uint8

// The assigned kind codes. A new kind takes the next free value here.
const (
	CodeNone      Code = 1
	CodeBloom     Code = 2
	CodeFuse      Code = 3
	CodePrefix    Code = 4
	CodeRSQF      Code = 5
	CodeTAF       Code = 6
	CodeExAF      Code = 7
	CodeUTAF      Code = 8
	CodeACF       Code = 9  // Cuckooing adaptive cuckoo filter
	CodeACFCyclic Code = 10 // cyclic adaptive cuckoo filter
	CodeACFSwap   Code = 11 // swapping adaptive cuckoo filter
	CodeCAF       Code = 12 // static RSQF plus a cache of false positives
	CodeAPrefix   Code = 13 // adaptive prefix filter
	CodeStacked   Code = 14 // stacked filter over known negatives
)

// Options are the user-facing parameters of a policy. A kind reads the
// fields it uses (zero means its default) and ignores the others;
// Configure rejects out-of-range values of the fields it uses.
type Options struct {
	// BitsPerKey of bloom-like kinds, and the space budget of kinds that
	// size themselves by it (stacked).
	BitsPerKey int
	// RemainderBits of quotient-filter kinds (rsqf, taf, exaf, utaf, caf).
	RemainderBits int
	// LoadFactor of quotient-filter and cuckoo kinds.
	LoadFactor float64
	// FingerprintBits of cuckoo kinds (8, 12 or 16).
	FingerprintBits int
	// SelectorBits of the cyclic adaptive cuckoo filter (1..3).
	SelectorBits int
}

// Params are a configured kind's parameters as stored in the block header:
// with the seed, enough to decode the local state and to tell two
// configurations of one kind apart.
type Params struct {
	P1, P2 uint32
	// Keys is the number of distinct keys the filter was built over, as
	// the block header records it (Decode reads it; Kind.Params leaves it
	// zero: a configured kind knows no table).
	Keys uint64
}

// BuildOptions are the per-table inputs of a build.
type BuildOptions struct {
	// Seed of the table's hash functions (non-zero; stored in the block).
	Seed uint64
	// SizeHint is the expected number of distinct keys (0: unknown).
	SizeHint int
	// KnownNegatives are frequently queried keys the store found absent,
	// sorted by key, each with its estimated query count (may be nil). The
	// list may hold keys outside the table's key range and keys the table
	// now holds: a kind that builds around them (stacked) uses only those
	// within [first key, last key] that were never added. Others ignore it.
	KnownNegatives []KnownNegative
	// WithRemote asks for the remote representation (adaptive kinds).
	WithRemote bool
}

// KnownNegative is a key the store found absent, with how often it was
// asked (an estimate: a heavy-hitter count).
type KnownNegative struct {
	Key   []byte
	Count uint64
}

// Kind is one filter kind, configured. Implementations are immutable
// values, safe for concurrent use.
type Kind interface {
	// Name is the registry name ("taf"); the Pebble policy name is derived
	// from it, so it is part of the on-disk format.
	Name() string
	// Code is the block-header code.
	Code() Code
	// Adaptive reports whether Decode returns an Adaptive filter.
	Adaptive() bool
	// Configure validates opts (defaults filled in) and returns the kind
	// so configured. Errors wrap ErrInvalidOptions.
	Configure(opts Options) (Kind, error)
	// Params are the parameters stored in the block header.
	Params() Params
	// NewBuilder starts a filter over one table's keys.
	NewBuilder(o BuildOptions) Builder
	// Decode decodes a local state written by a Builder of this kind with
	// header parameters p and seed, reading the remote representation
	// through remote when it adapts (remote is never nil: a filter opened
	// without one gets a Remote whose reads fail). It may alias local.
	// Errors wrap ErrCorrupt.
	Decode(p Params, seed uint64, local []byte, remote Remote) (Filter, error)
}

// Builder accumulates the distinct keys of one filter. Keys arrive sorted
// and distinct; the key slice is only valid during Add.
type Builder interface {
	Add(key []byte)
	// Finish returns the encoded local state and, when the build asked for
	// it and the kind adapts, the remote representation in slot order (an
	// empty, non-nil slice for an adaptive filter with no slots).
	Finish() (local []byte, remote []uint64, err error)
}

// Filter is a decoded, in-memory filter of one key set.
type Filter interface {
	// MayContain reports whether key may be in the set (false: certainly
	// absent). Lock-free, safe concurrently with Adapt.
	MayContain(key []byte) bool
	// BitsPerKey is the local state (what stays in memory and is consulted
	// on the query path) in bits per distinct key.
	BitsPerKey() float64
	// SizeBytes is the local state in bytes.
	SizeBytes() int
}

// Adaptive is a Filter that fixes its false positives.
type Adaptive interface {
	Filter
	// Adapt tells the filter key was a false positive so it can fix it,
	// reading the remote representation. Remote failures return an error
	// wrapping ErrRemote and leave the filter unchanged. Adaptations are
	// serialized by the filter; queries stay lock-free.
	Adapt(key []byte) error
	// MarshalBinary encodes the current state, adaptations included, in
	// the form Kind.Decode reads (the adaptive state file holds it).
	MarshalBinary() ([]byte, error)
	// Stats returns the adaptation counters.
	Stats() Stats
}

// Auxiliary is implemented by adaptive filters that keep state outside the
// query path (the adaptive cuckoo filters' record of moved elements). It is
// persisted with the adaptive state and reported apart from BitsPerKey.
type Auxiliary interface {
	// AuxBytes is the size of that state in memory.
	AuxBytes() int
}

// Stats counts the adaptive work a filter has done.
type Stats struct {
	// Adaptations is the number of Adapt calls that changed the filter.
	Adaptations uint64
	// Rebuilds is the number of blocks (or whole filters) rebuilt from the
	// remote representation because their fix information overflowed.
	Rebuilds uint64
	// RemoteReads is the number of Remote.ReadSlots calls.
	RemoteReads uint64
}

// Remote is the remote representation of an adaptive filter: for every slot
// of the filter, the 64-bit hash word of the element stored there, in the
// slot order the builder produced. A filter reads it only when it fixes a
// false positive or rebuilds, so it may live on disk with the table.
// Implementations are safe for concurrent use.
type Remote interface {
	// ReadSlots fills dst with the words of slots [first, first+len(dst)).
	// Errors wrap ErrRemote.
	ReadSlots(first int, dst []uint64) error
}

// MemRemote is an in-memory Remote: element i is the word of slot i.
type MemRemote []uint64

// ReadSlots implements Remote.
func (m MemRemote) ReadSlots(first int, dst []uint64) error {
	if first < 0 || first > len(m) || len(dst) > len(m)-first {
		return errors.Join(ErrRemote, errors.New("slot range out of bounds"))
	}
	copy(dst, m[first:])
	return nil
}

// NoRemote is the Remote of a filter opened without its remote
// representation: every read fails, so adaptations fail cleanly and the
// filter keeps answering as it did.
type NoRemote struct{}

var errNoRemote = errors.New("no remote representation available")

// ReadSlots implements Remote.
func (NoRemote) ReadSlots(int, []uint64) error { return errors.Join(ErrRemote, errNoRemote) }

// BitsPerKey is size bytes over n keys in bits per key (0 for no keys), the
// figure every Filter reports.
func BitsPerKey(size int, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return float64(size) * 8 / float64(n)
}

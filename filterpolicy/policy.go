package filterpolicy

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"

	"github.com/adaptkv/adaptkv/internal/base"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/cockroachdb/pebble/v2"
)

// Sentinel errors.
var (
	// ErrUnknownPolicy is wrapped by ByName and New for a name not in the registry.
	ErrUnknownPolicy = errors.New("filterpolicy: unknown filter policy")
	// ErrCorruptBlock is wrapped by every error about an unreadable filter
	// block. It also matches the module's one corruption error
	// (kv.ErrCorruption).
	ErrCorruptBlock = base.CorruptionKind("filterpolicy: corrupt filter block")
	// ErrUnsupportedVersion is wrapped (with ErrCorruptBlock) for a block of a
	// newer format version than this build reads.
	ErrUnsupportedVersion = errors.New("filterpolicy: unsupported filter block version")
	// ErrInvalidOptions is wrapped by New for out-of-range options (the
	// module's one invalid-options error, kv.ErrInvalidOptions).
	ErrInvalidOptions = base.ErrInvalidOptions
	// ErrBuild is wrapped by errors from building a filter.
	ErrBuild = errors.New("filterpolicy: filter build failed")
)

// Policy is a configured filter kind: it writes the filter blocks of tables
// (ForTable) and decodes them into in-memory filters (Open). Package
// pebblefilter makes one a Pebble FilterPolicy.
type Policy interface {
	// Name is the registry name (Names): none, bloom, fuse, prefix, rsqf,
	// taf, exaf, utaf, stacked, ...; the Pebble policy name is derived from
	// it (PebbleName), so it is part of the on-disk format.
	Name() string
	// Kind is the configured kind the policy builds (ForTable writes
	// tables with it, so a Policy from outside this package works too).
	Kind() filter.Kind
	// Adaptive reports whether Open returns a filter.Adaptive.
	Adaptive() bool
	// KnownNegatives reports whether the policy builds its filters around
	// the known negatives a table is written with (ForTable): the stacked
	// filter does.
	KnownNegatives() bool
	// NewSeed returns the seed of a new filter (non-zero).
	NewSeed() uint64
	// Open decodes a filter block written by this policy into an in-memory
	// filter. remote is the table's remote representation (nil for static
	// policies or when there is none: a block that carries its remote section
	// then uses it, otherwise adaptations fail with filter.ErrRemote).
	// Errors wrap ErrCorruptBlock.
	Open(block []byte, remote filter.Remote) (filter.Filter, error)
}

// Options configure a policy built with New. Zero values mean defaults.
type Options struct {
	// BitsPerKey of the bloom filter (default 10, 1..64).
	BitsPerKey int
	// RemainderBits of quotient-filter based policies (default 8, 4..16).
	RemainderBits int
	// LoadFactor of quotient-filter based policies (default 0.95).
	LoadFactor float64
	// SeedSource gives the seed of each new filter block (default: random,
	// non-zero). Tests fix it to get reproducible tables.
	SeedSource func() uint64
}

// FixedSeed returns a SeedSource that always gives seed (tests, golden files).
func FixedSeed(seed uint64) func() uint64 { return func() uint64 { return seed } }

func randomSeed() uint64 {
	for {
		if s := rand.Uint64(); s != 0 {
			return s
		}
	}
}

// Names lists the registered policy names, sorted.
func Names() []string {
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
		names = append(names, k.Name())
	}
	sort.Strings(names)
	return names
}

// ByName returns the policy registered under name with default options.
func ByName(name string) (Policy, error) { return New(name, Options{}) }

// New returns the policy registered under name with the given options.
// Every option is validated here, once, by the kind (filter.Kind.Configure)
// after the ranges common to all kinds: an Options that New accepts writes
// tables.
func New(name string, opts Options) (Policy, error) {
	kind, ok := KindByName(name)
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownPolicy, name, strings.Join(Names(), ", "))
	}
	switch {
	case opts.BitsPerKey < 0 || opts.BitsPerKey > 64:
		return nil, fmt.Errorf("%w: BitsPerKey %d not in [1,64]", ErrInvalidOptions, opts.BitsPerKey)
	case opts.RemainderBits != 0 && (opts.RemainderBits < 4 || opts.RemainderBits > 16):
		return nil, fmt.Errorf("%w: RemainderBits %d not in [4,16]", ErrInvalidOptions, opts.RemainderBits)
	case opts.RemainderBits < 0:
		return nil, fmt.Errorf("%w: RemainderBits %d not in [4,16]", ErrInvalidOptions, opts.RemainderBits)
	case opts.LoadFactor != 0 && !(opts.LoadFactor > 0 && opts.LoadFactor <= 1):
		return nil, fmt.Errorf("%w: LoadFactor %v not in (0,1]", ErrInvalidOptions, opts.LoadFactor)
	}
	fk, err := kind.Configure(filter.Options{BitsPerKey: opts.BitsPerKey, RemainderBits: opts.RemainderBits, LoadFactor: opts.LoadFactor})
	if err != nil {
		return nil, base.InvalidOptions("", err)
	}
	if opts.SeedSource == nil {
		opts.SeedSource = randomSeed
	}
	return &policy{code: fk.Code(), name: name, opts: opts, fk: fk}, nil
}

// NewBloom returns the bloom policy with bitsPerKey bits per key (values
// outside [1,64] fall back to the default 10).
func NewBloom(bitsPerKey int) Policy {
	if bitsPerKey < 1 || bitsPerKey > 64 {
		bitsPerKey = 10
	}
	p, _ := New("bloom", Options{BitsPerKey: bitsPerKey})
	return p
}

// policy implements Policy for every registered kind.
type policy struct {
	code filter.Code
	name string
	opts Options
	fk   filter.Kind // the configured kind
}

var _ Policy = (*policy)(nil)

// Name implements Policy.
func (p *policy) Name() string { return p.name }

// PebbleName is the Pebble FilterPolicy name of the registry name kind: a
// table stores its filter block under "fullfilter." + PebbleName(kind).
// Bloom variants share one name: the bits per key live in the block header.
func PebbleName(kind string) string { return "adaptkv." + kind }

// MetaBlockName is the metaindex name of a filter block of the registry name kind.
func MetaBlockName(kind string) string { return "fullfilter." + PebbleName(kind) }

// Kind implements Policy.
func (p *policy) Kind() filter.Kind { return p.fk }

// KnownNegatives implements Policy.
func (p *policy) KnownNegatives() bool { return p.code == filter.CodeStacked }

// Adaptive implements Policy.
func (p *policy) Adaptive() bool { return p.fk.Adaptive() }

// Adapts reports whether p's filters fix their false positives: p is
// Adaptive and its filters' Adapt does not answer ErrNotAdaptive (rsqf's
// filters are adaptive filters, so tables count their false positives
// alike, but never adapt). It decodes a filter of one key to ask it.
func Adapts(p Policy) bool {
	if p == nil || !p.Adaptive() || p.Kind() == nil {
		return false
	}
	w := BlockWriter(p)
	w.AddKey([]byte("k"))
	f, err := p.Open(w.Finish(nil), nil)
	if err != nil {
		return false
	}
	af, ok := f.(filter.Adaptive)
	return ok && !errors.Is(af.Adapt([]byte("absent")), filter.ErrNotAdaptive)
}

// NewSeed implements Policy.
func (p *policy) NewSeed() uint64 { return p.opts.SeedSource() }

// BlockWriter returns a writer of one filter block of p's kind over the
// keys added to it (sorted; consecutive duplicates dropped), seeded by
// p.NewSeed, without a remote section: the block a pebble.DB writes
// through package pebblefilter. A failed build yields a block of kind
// none. p must have a kind (pebblefilter.New checks it, as ForTable does).
func BlockWriter(p Policy) pebble.FilterWriter {
	return newBlockWriter(p.Kind(), p.Name(), p.NewSeed(), false, nil)
}

// Open implements Policy.
func (p *policy) Open(block []byte, remote filter.Remote) (filter.Filter, error) {
	h, local, err := VerifyBlock(block)
	if err != nil {
		return nil, err
	}
	if h.Code != p.code {
		return nil, fmt.Errorf("%w: block holds a %s filter, policy is %s", ErrCorruptBlock, KindName(h.Code), p.name)
	}
	return openBlock(h, block, local, remote)
}

// OpenBlock decodes a filter block of any registered kind.
func OpenBlock(block []byte, remote filter.Remote) (filter.Filter, Header, error) {
	h, local, err := VerifyBlock(block)
	if err != nil {
		return nil, h, err
	}
	f, err := openBlock(h, block, local, remote)
	return f, h, err
}

func openBlock(h Header, block, local []byte, remote filter.Remote) (filter.Filter, error) {
	if remote == nil {
		if h.HasRemote && len(block) == h.LocalEnd()+h.RemoteSize() {
			remote = inBlockRemote(block, h)
		} else {
			remote = filter.NoRemote{}
		}
	}
	f, err := decodeLocal(h, local, remote)
	if err != nil {
		if errors.Is(err, ErrCorruptBlock) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s filter: %w", ErrCorruptBlock, KindName(h.Code), err)
	}
	return f, nil
}

// DecodeLocal decodes a local state of the kind and parameters in h (for
// instance an adaptive filter's saved state) with the given remote (nil:
// none, adaptations fail). Errors wrap ErrCorruptBlock.
func DecodeLocal(h Header, local []byte, remote filter.Remote) (filter.Filter, error) {
	if remote == nil {
		remote = filter.NoRemote{}
	}
	f, err := decodeLocal(h, local, remote)
	if err != nil && !errors.Is(err, ErrCorruptBlock) {
		err = fmt.Errorf("%w: %s filter: %w", ErrCorruptBlock, KindName(h.Code), err)
	}
	return f, err
}

// decodeLocal decodes the local state of a verified block with its kind
// and the header's parameters.
func decodeLocal(h Header, local []byte, remote filter.Remote) (filter.Filter, error) {
	kind, ok := KindByCode(h.Code)
	if !ok {
		return nil, fmt.Errorf("%w: unknown kind %d", ErrCorruptBlock, h.Code)
	}
	f, err := kind.Decode(filter.Params{P1: h.Param1, P2: h.Param2, Keys: h.NumKeys}, h.Seed, local, remote)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptBlock, err)
	}
	if s, ok := f.(interface{ Slots() int }); ok && h.HasRemote && h.RemoteSlots != s.Slots() {
		return nil, fmt.Errorf("%w: remote has %d slots, filter %d", ErrCorruptBlock, h.RemoteSlots, s.Slots())
	}
	return f, nil
}

// WriterPolicy is the pebble.FilterPolicy our own sstable writer hands to
// Pebble: same name as the policy, but its blocks carry the remote section
// (for adaptive kinds) and use a fixed seed. Err reports a failed build.
type WriterPolicy struct {
	p     Policy
	kind  filter.Kind
	seed  uint64
	kn    []filter.KnownNegative
	mu    sync.Mutex
	err   error
	hdr   Header
	stats PreAdaptStats
}

// ForTable returns the WriterPolicy of p for one table with the given seed
// (0: from p's seed source) and known negatives (sorted by key, possibly
// nil): a kind that builds around them (stacked, see filter.BuildOptions)
// gets them, and an adaptive kind fixes its false positives among them
// before the block is written (pre-adaptation, see PreAdaptStats); other
// kinds ignore them. p must come from this package.
func ForTable(p Policy, seed uint64, kn []filter.KnownNegative) (*WriterPolicy, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil policy", ErrInvalidOptions)
	}
	kind := p.Kind()
	if kind == nil {
		return nil, fmt.Errorf("%w: policy %s has no filter kind", ErrInvalidOptions, p.Name())
	}
	if reg, ok := KindByCode(kind.Code()); !ok || reg.Name() != kind.Name() || kind.Name() != p.Name() {
		return nil, fmt.Errorf("%w: policy %s writes kind %s (code %d), not a registered kind under its name",
			ErrInvalidOptions, p.Name(), kind.Name(), kind.Code())
	}
	if seed == 0 {
		seed = p.NewSeed()
	}
	return &WriterPolicy{p: p, kind: kind, seed: seed, kn: kn}, nil
}

// Name implements pebble.FilterPolicy: PebbleName of the policy's name.
func (w *WriterPolicy) Name() string { return PebbleName(w.p.Name()) }

// MayContain implements pebble.FilterPolicy (Pebble's writer never calls
// it): a block that does not open answers "maybe".
func (w *WriterPolicy) MayContain(_ pebble.FilterType, block, key []byte) bool {
	f, err := w.p.Open(block, filter.NoRemote{})
	return err != nil || f.MayContain(key)
}

// NewWriter implements pebble.FilterPolicy.
func (w *WriterPolicy) NewWriter(ftype pebble.FilterType) pebble.FilterWriter {
	bw := newBlockWriter(w.kind, w.kind.Name(), w.seed, true, w.kn)
	bw.done = func(h Header, st PreAdaptStats, err error) {
		w.mu.Lock()
		w.err, w.hdr, w.stats = err, h, st
		w.mu.Unlock()
	}
	return bw
}

// PreAdapted returns what the last block build's pre-adaptation did.
func (w *WriterPolicy) PreAdapted() PreAdaptStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Err returns the error of the last block build (nil if it succeeded).
func (w *WriterPolicy) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Header returns the header of the last block built.
func (w *WriterPolicy) Header() Header {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hdr
}

// blockWriter implements pebble.FilterWriter. Keys arrive in sorted order,
// possibly repeated (several versions of one user key): consecutive
// duplicates are dropped. The key buffer is never retained.
type blockWriter struct {
	kind       filter.Kind
	name       string
	seed       uint64
	withRemote bool
	last       []byte
	hasLast    bool
	n          uint64
	b          filter.Builder // nil until the first key after a Finish
	kn         []filter.KnownNegative
	fixIn      *filter.AbsentInRange // adaptive kinds: the negatives to fix at Finish
	done       func(Header, PreAdaptStats, error)
}

func newBlockWriter(kind filter.Kind, name string, seed uint64, withRemote bool, kn []filter.KnownNegative) *blockWriter {
	return &blockWriter{kind: kind, name: name, seed: seed, withRemote: withRemote, kn: kn}
}

func (w *blockWriter) newBuilder() filter.Builder {
	if w.withRemote && w.kind.Adaptive() && len(w.kn) > 0 {
		w.fixIn = filter.NewAbsentInRange(w.kn)
	}
	return w.kind.NewBuilder(filter.BuildOptions{Seed: w.seed, KnownNegatives: w.kn, WithRemote: w.withRemote})
}

// AddKey implements pebble.FilterWriter.
func (w *blockWriter) AddKey(key []byte) {
	if w.hasLast && bytes.Equal(w.last, key) {
		return
	}
	w.last = append(w.last[:0], key...)
	w.hasLast = true
	w.n++
	if w.b == nil {
		w.b = w.newBuilder()
	}
	w.b.Add(key)
	if w.fixIn != nil {
		w.fixIn.Add(key)
	}
}

// Finish implements pebble.FilterWriter. A failed build yields a block of
// kind none (every query "maybe") so Pebble's table stays correct; our
// sstable writer learns the error through WriterPolicy.Err.
func (w *blockWriter) Finish(dst []byte) []byte {
	pp := w.kind.Params()
	h := Header{Code: w.kind.Code(), Seed: w.seed, Param1: pp.P1, Param2: pp.P2, NumKeys: w.n}
	if w.b == nil {
		w.b = w.newBuilder()
	}
	local, remote, err := w.b.Finish()
	if err != nil {
		err = fmt.Errorf("%w: %s over %d keys: %w", ErrBuild, w.name, w.n, err)
		h = Header{Code: filter.CodeNone, Seed: w.seed, NumKeys: w.n}
		local, remote = nil, nil
	}
	if !w.withRemote {
		remote = nil
	} else if remote == nil && w.kind.Adaptive() && err == nil {
		remote = []uint64{}
	}
	var st PreAdaptStats
	if w.fixIn != nil && err == nil {
		local, st = preAdapt(h, local, remote, w.fixIn.Kept())
	}
	w.fixIn = nil
	start := len(dst)
	dst = appendBlock(dst, h, local, remote)
	if w.done != nil {
		hh, _ := ParseHeader(dst[start:])
		w.done(hh, st, err)
	}
	// The next builder is made by the next key, not here: a table's writer
	// finishes once, and a builder made now would hold a buffer that
	// builders recycle (adaptive's hash slices) until the writer is
	// collected, so the next table's builder would grow its own from
	// nothing.
	w.b = nil
	w.hasLast, w.n = false, 0
	return dst
}

package cuckoo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/filter"
)

// DefaultFingerprintBits is the slot width of a kind configured with 0:
// 11 bits at 95% load is 11.58 bits per key, taf's.
const DefaultFingerprintBits = 11

// Kind is one adaptive cuckoo filter kind (filter.Kind): CuckooingKind,
// CyclicKind or SwappingKind, configured with Configure.
type Kind struct {
	variant Variant
	f, s    int
}

// The three kinds, with their defaults.
var (
	CuckooingKind = Kind{variant: Cuckooing}
	CyclicKind    = Kind{variant: Cyclic}
	SwappingKind  = Kind{variant: Swapping}
)

var _ filter.Kind = Kind{}

// Name implements filter.Kind.
func (k Kind) Name() string { return k.variant.String() }

// Code implements filter.Kind.
func (k Kind) Code() filter.Code {
	switch k.variant {
	case Cyclic:
		return filter.CodeACFCyclic
	case Swapping:
		return filter.CodeACFSwap
	}
	return filter.CodeACF
}

// Adaptive implements filter.Kind.
func (Kind) Adaptive() bool { return true }

func (k Kind) params() (f, s int) {
	f, s = k.f, k.s
	if f == 0 {
		f = DefaultFingerprintBits
	}
	if k.variant == Cyclic && s == 0 {
		s = 1
	}
	if k.variant != Cyclic {
		s = 0
	}
	return f, s
}

// Configure implements filter.Kind: FingerprintBits (the slot width, 4..16,
// 0: 11; the paper's experiments use 8, 12 and 16) and, for acf-cyclic,
// SelectorBits (1..3, 0: 1) taken from the slot, so space is equal. The
// load factor is the paper's 95%: LoadFactor must be 0 or 0.95.
func (k Kind) Configure(o filter.Options) (filter.Kind, error) {
	if o.FingerprintBits != 0 && (o.FingerprintBits < 4 || o.FingerprintBits > 16) {
		return nil, fmt.Errorf("%w: %s FingerprintBits %d not in [4,16]", filter.ErrInvalidOptions, k.Name(), o.FingerprintBits)
	}
	if o.SelectorBits != 0 && (k.variant != Cyclic || o.SelectorBits < 1 || o.SelectorBits > 3) {
		return nil, fmt.Errorf("%w: %s SelectorBits %d (only acf-cyclic, 1..3)", filter.ErrInvalidOptions, k.Name(), o.SelectorBits)
	}
	if o.LoadFactor != 0 && o.LoadFactor != loadFactor {
		return nil, fmt.Errorf("%w: %s runs at load factor %v", filter.ErrInvalidOptions, k.Name(), loadFactor)
	}
	k.f, k.s = o.FingerprintBits, o.SelectorBits
	if f, s := k.params(); f-s < 2 {
		return nil, fmt.Errorf("%w: %s leaves %d fingerprint bits", filter.ErrInvalidOptions, k.Name(), f-s)
	}
	return k, nil
}

// Params implements filter.Kind: P1 the slot width, P2 the selector bits.
func (k Kind) Params() filter.Params {
	f, s := k.params()
	return filter.Params{P1: uint32(f), P2: uint32(s)}
}

// NewBuilder implements filter.Kind.
func (k Kind) NewBuilder(o filter.BuildOptions) filter.Builder {
	return &Builder{kind: k, seed: o.Seed, hashes: make([]uint64, 0, o.SizeHint)}
}

func (k Kind) paramsFor(n int) params {
	f, s := k.params()
	kk, b := k.variant.geometry()
	slots := int(math.Ceil(float64(n) / loadFactor))
	bins := max(1, (slots+kk*b-1)/(kk*b))
	return params{variant: k.variant, f: f, s: s, k: kk, b: b, bins: bins}
}

// Builder builds one filter; see filter.Builder.
type Builder struct {
	kind   Kind
	seed   uint64
	hashes []uint64
}

// Add implements filter.Builder.
func (b *Builder) Add(key []byte) { b.hashes = append(b.hashes, elementHash(b.seed, key)) }

// Finish implements filter.Builder: the local state and the element hash
// of every slot (0: empty), the remote representation.
func (b *Builder) Finish() ([]byte, []uint64, error) {
	slices.Sort(b.hashes)
	hashes := slices.Compact(b.hashes)
	p := b.kind.paramsFor(len(hashes))
	for attempt := uint64(0); attempt < 64; attempt++ {
		st, slots, ok := place(p, hashes, filter.Mix64(b.seed+attempt))
		if ok {
			f := &Filter{p: p, n: uint64(len(hashes)), seed: b.seed, overlay: map[uint32]uint64{}}
			f.st.Store(st)
			local, err := f.MarshalBinary()
			return local, slots, err
		}
	}
	return nil, nil, fmt.Errorf("acf: %d keys could not be placed at load %v", len(hashes), loadFactor)
}

// Local state layout, version 1 (little-endian):
//
//	version u8 | variant u8 | f u8 | s u8 | bins u32 | elements u64 | salt u64 |
//	slot words (ceil(slots*f/64) u64) | overlay entries u32 | entries x (slot u32, hash u64), by slot
const formatVersion = 1

const headerSize = 1 + 1 + 1 + 1 + 4 + 8 + 8

// MarshalBinary implements filter.Adaptive: the slots and the overlay.
func (f *Filter) MarshalBinary() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st.Load()
	b := make([]byte, 0, headerSize+len(st.words)*8+4+len(f.overlay)*12)
	b = append(b, formatVersion, byte(f.p.variant), byte(f.p.f), byte(f.p.s))
	b = binary.LittleEndian.AppendUint32(b, uint32(f.p.bins))
	b = binary.LittleEndian.AppendUint64(b, f.n)
	b = binary.LittleEndian.AppendUint64(b, st.salt)
	for i := range st.words {
		b = binary.LittleEndian.AppendUint64(b, st.words[i].Load())
	}
	keys := make([]uint32, 0, len(f.overlay))
	for k := range f.overlay {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(keys)))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint32(b, k)
		b = binary.LittleEndian.AppendUint64(b, f.overlay[k])
	}
	return b, nil
}

var errTruncated = errors.New("truncated")

// Decode implements filter.Kind; errors wrap filter.ErrCorrupt. The
// filter reads remote for fixes (never nil; filter.NoRemote makes fixes
// fail cleanly).
func (k Kind) Decode(_ filter.Params, seed uint64, local []byte, remote filter.Remote) (filter.Filter, error) {
	f, err := decode(k, seed, local, remote)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", filter.ErrCorrupt, k.Name(), err)
	}
	return f, nil
}

func decode(k Kind, seed uint64, b []byte, remote filter.Remote) (*Filter, error) {
	if len(b) < headerSize+4 {
		return nil, errTruncated
	}
	if b[0] != formatVersion {
		return nil, fmt.Errorf("unsupported version %d", b[0])
	}
	if Variant(b[1]) != k.variant {
		return nil, fmt.Errorf("holds a %s filter", Variant(b[1]))
	}
	fbits, sbits := int(b[2]), int(b[3])
	if fbits < 4 || fbits > 16 || sbits < 0 || sbits > 3 || (k.variant == Cyclic) != (sbits > 0) || fbits-sbits < 2 {
		return nil, fmt.Errorf("slot width %d, selector bits %d", fbits, sbits)
	}
	kk, bb := k.variant.geometry()
	p := params{variant: k.variant, f: fbits, s: sbits, k: kk, b: bb, bins: int(binary.LittleEndian.Uint32(b[4:]))}
	n := binary.LittleEndian.Uint64(b[8:])
	if p.bins < 1 || p.bins > 1<<28 || n > uint64(p.slots()) {
		return nil, fmt.Errorf("%d bins for %d elements", p.bins, n)
	}
	st := &state{words: make([]atomic.Uint64, wordsFor(p)), salt: binary.LittleEndian.Uint64(b[16:])}
	b = b[headerSize:]
	if len(b) < len(st.words)*8+4 {
		return nil, errTruncated
	}
	for i := range st.words {
		st.words[i].Store(binary.LittleEndian.Uint64(b[8*i:]))
	}
	b = b[len(st.words)*8:]
	m := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	if m > p.slots() || len(b) != m*12 {
		return nil, fmt.Errorf("overlay of %d entries in %d bytes", m, len(b))
	}
	f := &Filter{p: p, n: n, seed: seed, remote: remote, overlay: make(map[uint32]uint64, m)}
	for i := range m {
		slot := binary.LittleEndian.Uint32(b[12*i:])
		if int(slot) >= p.slots() {
			return nil, fmt.Errorf("overlay slot %d of %d", slot, p.slots())
		}
		f.overlay[slot] = binary.LittleEndian.Uint64(b[12*i+4:])
	}
	f.st.Store(st)
	return f, nil
}

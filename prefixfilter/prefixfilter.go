package prefixfilter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"unsafe"
)

// MaxKeys is the largest number of keys (duplicates included) one filter
// accepts.
const MaxKeys = math.MaxUint32

var (
	// ErrCorrupt is wrapped by every error Decode returns for bytes that are
	// not a valid encoding (truncated, bit-flipped, wrong version, hostile).
	ErrCorrupt = errors.New("prefixfilter: corrupt filter encoding")
	// ErrTooManyKeys is returned when more than MaxKeys keys are added.
	ErrTooManyKeys = errors.New("prefixfilter: too many keys")
)

// qrBits is the number of low bits of a packed hash that hold the
// fingerprint; the bin comes from the remaining high bits.
const (
	qrBits = 13
	qrMask = 1<<qrBits - 1
)

// Filter is an immutable Prefix Filter. It is safe for concurrent use.
// A Filter returned by Decode reads the bytes it was decoded from; they must
// not be modified while the filter is in use.
type Filter struct {
	data        []byte // the whole encoding
	bins        []byte // numBins pocket dictionaries of 32 bytes
	spare       []byte // spareBlocks blocks of 64 bytes
	numBins     uint64
	spareBlocks uint64
	numKeys     uint64
	seed        uint64
	spareSeed   uint64
	hashSeed    uint32
}

// hashSeedOf folds the 64-bit filter seed into MurmurHash3's 32-bit seed.
func hashSeedOf(seed uint64) uint32 { return uint32(seed) ^ uint32(seed>>32) }

// spareSeedOf derives the spare's hash seed from the filter seed.
func spareSeedOf(seed uint64) uint64 { return mix64(seed ^ 0x5bd1e9955bd1e995) }

// packedHash hashes a key (128-bit MurmurHash3) into one word: the high 51 bits choose the bin by
// multiply-shift range reduction, the low 13 bits hold the mini-fingerprint
// fp = q<<8 | r in [0, 25·256), obtained from the second hash half by the
// same reduction.
func packedHash(key []byte, hashSeed uint32) uint64 {
	h1, h2 := murmur128(key, hashSeed)
	return h1&^qrMask | (uint64(uint32(h2))*fingerprintRange)>>32
}

// binOf maps a packed hash onto [0, numBins) (Lemire's multiply-shift).
func binOf(packed, numBins uint64) uint64 {
	b, _ := bits.Mul64(packed&^qrMask, numBins)
	return b
}

// binsFor returns the bin count for n keys: ceil(n / (0.95·25)), at least 1
// (load factor 0.95, paper section 4.2.2).
func binsFor(n uint64) uint64 {
	return max(1, (4*n+94)/95)
}

// MayContain reports whether key may be in the set. A false answer is
// always right; a true answer is wrong with probability about 0.37%.
func (f *Filter) MayContain(key []byte) bool {
	h1, h2 := murmur128(key, f.hashSeed)
	fp := (uint64(uint32(h2)) * fingerprintRange) >> 32
	b, _ := bits.Mul64(h1&^qrMask, f.numBins)
	pd := f.bins[b*binBytes : b*binBytes+binBytes : b*binBytes+binBytes]
	w0 := binary.LittleEndian.Uint64(pd[0:8])
	w3 := binary.LittleEndian.Uint64(pd[24:32])
	if fp > (w0&fieldMask)<<8|w3>>56 {
		// The bin overflowed and fp exceeds everything it kept: by the
		// prefix invariant only the spare can hold fp (section 4.1).
		return spareContains(f.spare, f.spareBlocks, b*fingerprintRange+fp, f.spareSeed)
	}
	// pdContains, with its cutoff inlined: about 90% of negative queries
	// end at the first return (section 5.2.2).
	w1 := binary.LittleEndian.Uint64(pd[8:16])
	w2 := binary.LittleEndian.Uint64(pd[16:24])
	rep := (fp & 0xff) * byteOnes
	z0 := zeroBytes(w0^rep) & w0BodyMask
	z1 := zeroBytes(w1 ^ rep)
	z2 := zeroBytes(w2 ^ rep)
	z3 := zeroBytes(w3 ^ rep)
	if z0|z1|z2|z3 == 0 {
		return false
	}
	return pdMatches(w0, z0, z1, z2, z3, fp>>8)
}

// BitsPerKey returns the filter's size in bits divided by the number of keys
// it was built from (duplicates included); 0 for an empty filter.
func (f *Filter) BitsPerKey() float64 {
	if f.numKeys == 0 {
		return 0
	}
	return float64(len(f.data)) * 8 / float64(f.numKeys)
}

// SizeBytes returns the size of the filter in memory, which is also the size
// of its encoding.
func (f *Filter) SizeBytes() int { return len(f.data) }

// Len returns the number of keys the filter was built from (duplicates
// included).
func (f *Filter) Len() int { return int(f.numKeys) }

// Seed returns the filter's hash seed.
func (f *Filter) Seed() uint64 { return f.seed }

// MarshalBinary returns a copy of the filter's encoding.
func (f *Filter) MarshalBinary() ([]byte, error) {
	return slices.Clone(f.data), nil
}

// AppendBinary appends the filter's encoding to dst.
func (f *Filter) AppendBinary(dst []byte) ([]byte, error) {
	return append(dst, f.data...), nil
}

// Build builds a filter over keys with a random seed. Duplicate keys are
// allowed; the keys are not retained.
func Build(keys [][]byte) (*Filter, error) {
	return BuildWithSeed(keys, rand.Uint64())
}

// BuildWithSeed builds a filter over keys with the given seed. The same keys
// and seed always give the same encoding (also through a Builder).
func BuildWithSeed(keys [][]byte, seed uint64) (*Filter, error) {
	n := uint64(len(keys))
	if n > MaxKeys {
		return nil, fmt.Errorf("%w: %d > %d", ErrTooManyKeys, n, uint64(MaxKeys))
	}
	m := binsFor(n)
	if m > 1<<(32-qrBits) {
		b := NewBuilder(seed, len(keys))
		for _, k := range keys {
			b.Add(k)
		}
		return b.Finish()
	}
	// The bin count is known up front, so hash, pick the bin and count in
	// one pass, keeping bin<<13|fp in 32 bits per key.
	hashSeed := hashSeedOf(seed)
	sc := getScratch()
	defer scratchPool.Put(sc)
	binned := grow(&sc.binned, n)
	ends := grow(&sc.ends, m)
	clear(ends)
	for i, k := range keys {
		h := packedHash(k, hashSeed)
		b := binOf(h, m)
		binned[i] = uint32(b<<qrBits | h&qrMask)
		ends[b]++
	}
	startsFromCounts(ends)
	fps := grow(&sc.fps, n)
	for _, h := range binned {
		b := h >> qrBits
		fps[ends[b]] = uint16(h & qrMask)
		ends[b]++
	}
	return layout(fps, ends, n, m, seed, sc), nil
}

// Builder accumulates keys one at a time. It keeps one 64-bit hash per key,
// not the keys. A Builder is not safe for concurrent use.
type Builder struct {
	seed     uint64
	hashSeed uint32
	hashes   []uint64
}

// NewBuilder returns a builder for a filter with the given seed; sizeHint is
// the expected number of keys (0 if unknown).
func NewBuilder(seed uint64, sizeHint int) *Builder {
	return &Builder{
		seed:     seed,
		hashSeed: hashSeedOf(seed),
		hashes:   make([]uint64, 0, max(sizeHint, 0)),
	}
}

// Add adds key to the set; it keeps only the key's hash.
func (b *Builder) Add(key []byte) {
	b.hashes = append(b.hashes, packedHash(key, b.hashSeed))
}

// Len returns the number of keys added since the builder was created or last
// finished.
func (b *Builder) Len() int { return len(b.hashes) }

// Finish builds the filter over the keys added so far and resets the builder
// (same seed) for another set.
func (b *Builder) Finish() (*Filter, error) {
	hashes := b.hashes
	b.hashes = hashes[:0]
	if uint64(len(hashes)) > MaxKeys {
		return nil, fmt.Errorf("%w: %d > %d", ErrTooManyKeys, len(hashes), uint64(MaxKeys))
	}
	return build(hashes, b.seed), nil
}

// build builds the filter from the packed hashes of a Builder.
func build(hashes []uint64, seed uint64) *Filter {
	n := uint64(len(hashes))
	m := binsFor(n)
	sc := getScratch()
	defer scratchPool.Put(sc)
	// Counting sort of the fingerprints by bin.
	ends := grow(&sc.ends, m)
	clear(ends)
	for _, h := range hashes {
		ends[binOf(h, m)]++
	}
	startsFromCounts(ends)
	fps := grow(&sc.fps, n)
	for _, h := range hashes {
		b := binOf(h, m)
		fps[ends[b]] = uint16(h & qrMask)
		ends[b]++
	}
	return layout(fps, ends, n, m, seed, sc)
}

// buildScratch holds a build's temporary arrays; builds reuse them through
// scratchPool (as Pebble's bloom writer pools its hash blocks), so that
// repeated builds do not churn the garbage collector.
type buildScratch struct {
	binned    []uint32
	fps       []uint16
	ends      []uint32
	forwarded []uint64
}

var scratchPool sync.Pool

func getScratch() *buildScratch {
	if sc, ok := scratchPool.Get().(*buildScratch); ok {
		return sc
	}
	return new(buildScratch)
}

// grow returns (*buf)[:n], reallocating *buf when it is too small. The
// contents are unspecified.
func grow[T any](buf *[]T, n uint64) []T {
	if uint64(cap(*buf)) < n {
		*buf = make([]T, n)
	}
	*buf = (*buf)[:n]
	return *buf
}

// startsFromCounts turns per-bin counts into run starts. The scatter pass
// that follows advances each to its run's end, which is the next run's start.
func startsFromCounts(counts []uint32) {
	var sum uint32
	for i, c := range counts {
		counts[i] = sum
		sum += c
	}
}

// layout lays the filter out directly in its encoding from the fingerprints
// grouped by bin (bin b's run ends at ends[b]).
//
// Instead of inserting keys one by one (Algorithm 1), it sorts each bin's
// fingerprints and keeps the smallest distinct 25 in the bin; the rest go to
// the spare. The result is what Algorithm 1 produces for any insertion order:
// every bin holds a maximal prefix of its sorted fingerprints (the prefix
// invariant of section 4.1). Equal fingerprints are stored once, so no
// fingerprint reaches the spare twice (the duplicate handling of section 4.4,
// made exact by the sort instead of a spare lookup).
func layout(fps []uint16, ends []uint32, n, m, seed uint64, sc *buildScratch) *Filter {
	spareCap := spareBlocksFor(n, spareCapacity(n))
	data := newEncoding(m, spareCap)
	bins := data[headerSize : headerSize+m*binBytes]
	forwarded := grow(&sc.forwarded, spareCapacity(n))[:0]
	var set fingerprintSet
	start := uint32(0)
	for b := uint64(0); b < m; b++ {
		end := ends[b]
		run := fps[start:end]
		start = end
		if len(run) > 1 {
			run = set.sortUnique(run)
		}
		pd := bins[b*binBytes : b*binBytes+binBytes]
		if len(run) <= binCapacity {
			writePD(pd, run, false)
			continue
		}
		writePD(pd, run[:binCapacity], true)
		for _, fp := range run[binCapacity:] {
			forwarded = append(forwarded, b*fingerprintRange+uint64(fp))
		}
	}

	blocks := spareBlocksFor(n, uint64(len(forwarded)))
	if blocks != spareCap {
		bigger := newEncoding(m, blocks)
		copy(bigger[headerSize:], bins)
		data = bigger
	}
	spareSeed := spareSeedOf(seed)
	spare := data[headerSize+m*binBytes : headerSize+m*binBytes+blocks*spareBlockBytes]
	for _, id := range forwarded {
		spareInsert(spare, blocks, id, spareSeed)
	}
	sc.forwarded = forwarded[:0]
	writeHeader(data, seed, n, m, blocks, uint64(len(forwarded)))
	return newFilter(data, seed, n, m, blocks)
}

func newFilter(data []byte, seed, n, m, blocks uint64) *Filter {
	binsEnd := headerSize + m*binBytes
	return &Filter{
		data:        data,
		bins:        data[headerSize:binsEnd:binsEnd],
		spare:       data[binsEnd : binsEnd+blocks*spareBlockBytes : binsEnd+blocks*spareBlockBytes],
		numBins:     m,
		spareBlocks: blocks,
		numKeys:     n,
		seed:        seed,
		spareSeed:   spareSeedOf(seed),
		hashSeed:    hashSeedOf(seed),
	}
}

// newEncoding allocates a zeroed encoding buffer for m bins and the given
// spare blocks, placed so that the bin table starts on a 32-byte boundary
// (every bin then lies within one 64-byte cache line).
func newEncoding(m, blocks uint64) []byte {
	size := encodedSize(m, blocks)
	buf := make([]byte, size+binBytes)
	off := (binBytes - int(uintptr(unsafe.Pointer(&buf[0]))%binBytes)) % binBytes
	return buf[off : off+int(size) : off+int(size)]
}

// fingerprintSet sorts and deduplicates one bin's fingerprints through a
// bitmap of the 6400 possible values (100 words, padded to 128) with a
// two-word summary of its non-zero words: linear in the run length, few
// unpredictable branches, and it leaves the bitmap zeroed for the next bin.
type fingerprintSet struct {
	words   [128]uint64
	summary [2]uint64
}

// sortUnique rewrites run as its sorted distinct values and returns them.
func (s *fingerprintSet) sortUnique(run []uint16) []uint16 {
	for _, fp := range run {
		w := fp >> 6 & 127
		s.words[w] |= 1 << (fp & 63)
		s.summary[w>>6&1] |= 1 << (w & 63)
	}
	k := 0
	for half := 0; half < 2; half++ {
		sm := s.summary[half]
		s.summary[half] = 0
		for ; sm != 0; sm &= sm - 1 {
			w := half<<6 | bits.TrailingZeros64(sm)
			x := s.words[w&127]
			s.words[w&127] = 0
			for ; x != 0; x &= x - 1 {
				run[k] = uint16(w<<6 | bits.TrailingZeros64(x))
				k++
			}
		}
	}
	return run[:k]
}

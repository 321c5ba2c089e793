package prefix

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

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/internal/base"
)

// MaxKeys is the largest number of keys (duplicates included) one filter
// accepts.
const MaxKeys = math.MaxUint32

var (
	// ErrCorrupt is wrapped by every error Decode returns for bytes that are
	// not a valid encoding (truncated, bit-flipped, wrong version, hostile).
	// It also matches the module's one corruption error (kv.ErrCorruption).
	ErrCorrupt = base.CorruptionKind("prefix: corrupt filter encoding")
	// ErrTooManyKeys is returned when more than MaxKeys keys are added.
	ErrTooManyKeys = errors.New("prefix: too many keys")
)

// qrBits is the number of low bits of a packed hash that hold the
// fingerprint; the bin comes from the remaining high bits.
const (
	qrBits = 13
	qrMask = 1<<qrBits - 1
)

// Filter is an immutable Prefix Filter, made by Build, BuildWithSeed,
// Builder.Finish or Decode (the zero Filter is not usable). It is safe for
// concurrent use. A Filter returned by Decode reads the bytes it was decoded
// from; they must not be modified while the filter is in use.
type Filter struct {
	// What a query reads comes first, on one cache line of a Filter that
	// starts one (its 128-byte size class does; AdaptiveFilter pads to
	// 256): with hundreds of tables a query's filter header is often out
	// of the CPU caches, and each line of it a miss (kvbench -direct).
	bins        []byte // numBins pocket dictionaries of 32 bytes
	numBins     uint64
	hashSeed    uint32
	spareBlocks uint64
	spareSeed   uint64
	spare       []byte // spareBlocks blocks of 64 bytes
	data        []byte // the whole encoding
	numKeys     uint64
	seed        uint64
}

// hashSeedOf folds the 64-bit filter seed into MurmurHash3's 32-bit seed.
func hashSeedOf(seed uint64) uint32 { return uint32(seed) ^ uint32(seed>>32) }

// spareSeedOf derives the spare's hash seed from the filter seed.
func spareSeedOf(seed uint64) uint64 { return mix64(seed ^ 0x5bd1e9955bd1e995) }

// packedHash hashes a key (128-bit MurmurHash3) into one word: the high 51
// bits of the first half choose the bin by multiply-shift range reduction;
// the low 13 bits hold the mini-fingerprint fp = q<<8 | r in [0, 25·256),
// the low 32 bits of the second half reduced the same way.
func packedHash(key []byte, hashSeed uint32) uint64 {
	packed, _ := hashKey(key, hashSeed)
	return packed
}

// hashKey returns packedHash of key and the second MurmurHash3 half, whose
// top bits the adaptive filter keeps as extension bits (extOf).
func hashKey(key []byte, hashSeed uint32) (packed, h2 uint64) {
	h1, h2 := murmur128(key, hashSeed)
	return h1&^qrMask | (uint64(uint32(h2))*fingerprintRange)>>32, h2
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
// always right; a true answer is wrong with probability about 0.39%. It does
// not allocate.
func (f *Filter) MayContain(key []byte) bool {
	h1, h2 := murmur128(key, f.hashSeed)
	fp := (uint64(uint32(h2)) * fingerprintRange) >> 32
	b, _ := bits.Mul64(h1&^qrMask, f.numBins)
	return f.contains(b, fp)
}

// contains reports whether fingerprint fp (quotient fp>>8, remainder
// fp&0xff) may be stored for bin b.
func (f *Filter) contains(b, fp uint64) bool {
	pd := f.bins[b*binBytes : b*binBytes+binBytes : b*binBytes+binBytes]
	w0 := binary.LittleEndian.Uint64(pd[0:8])
	w3 := binary.LittleEndian.Uint64(pd[24:32])
	if fp > (w0&fieldMask)<<8|w3>>56 {
		// The bin overflowed and fp exceeds everything it kept: by the
		// prefix invariant only the spare can hold fp (section 4.1).
		return spareContains(f.spare, f.spareBlocks, b*fingerprintRange+fp, f.spareSeed)
	}
	// The query cutoff of section 5.2.2 (Algorithm 3): the remainder is
	// compared with all 25 body bytes at once, eight per 64-bit lane (SWAR
	// instead of AVX). No match answers "no" (about 90% of negative queries).
	w1 := binary.LittleEndian.Uint64(pd[8:16])
	w2 := binary.LittleEndian.Uint64(pd[16:24])
	r := fp & 0xff
	rep := r * byteOnes
	// hasZeroByte is exact about whether some byte is zero (its borrow
	// only disturbs bytes above a zero byte); body[0] is the top byte of w0.
	if hasZeroByte(w1^rep)|hasZeroByte(w2^rep)|hasZeroByte(w3^rep) == 0 && w0>>56 != r {
		return false
	}
	z0 := zeroBytes(w0^rep) & w0BodyMask
	z1 := zeroBytes(w1 ^ rep)
	z2 := zeroBytes(w2 ^ rep)
	z3 := zeroBytes(w3 ^ rep)
	// v: bit i set when body[i] matched.
	v := (byteMask(z0) | byteMask(z1)<<8 | byteMask(z2)<<16 | byteMask(z3)<<24) >> 7
	header := (w0 >> headerShift) & headerMask
	q := fp >> 8
	if v&(v-1) == 0 {
		// One match at body index i: it belongs to list q iff the header
		// holds exactly q ones before position q+i and a zero at q+i. One
		// popcount, no select.
		w := v << q
		return uint64(bits.OnesCount64(header&(w-1))) == q && header&w == 0
	}
	// Several matches (about 5% of the matching queries): select.
	return listContains(header, q, v)
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
	hashSeed := hashSeedOf(seed)
	sc := getScratch()
	defer scratchPool.Put(sc)
	g := sc.grouping(m)
	if m <= fusedGroupingBins {
		// The slots fit in the L2 cache: hash and group in one pass.
		for _, k := range keys {
			g.add(packedHash(k, hashSeed))
		}
		return layout(g, n, m, seed, sc), nil
	}
	// Larger slot arrays miss the cache on most adds; grouping from a
	// separate sequential pass of hashes lets those misses overlap.
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), hashBlockLen)]
		keys = keys[len(chunk):]
		hashes := sc.hashes[:len(chunk)]
		for i, k := range chunk {
			hashes[i] = packedHash(k, hashSeed)
		}
		for _, h := range hashes {
			g.add(h)
		}
	}
	return layout(g, n, m, seed, sc), nil
}

// fusedGroupingBins is the largest bin count whose grouping slots (64 bytes
// per bin, 4 MiB) BuildWithSeed fills while hashing.
const fusedGroupingBins = 1 << 16

// Builder accumulates keys one at a time. It keeps one 64-bit hash per key,
// not the keys, in pooled blocks (no copying as it grows). A Builder is not
// safe for concurrent use.
type Builder struct {
	seed     uint64
	hashSeed uint32
	blocks   []*hashBlock
	n        int
}

// hashBlockLen is the number of hashes per Builder block (64 KiB).
const hashBlockLen = 1 << 13

type hashBlock [hashBlockLen]uint64

var hashBlockPool = sync.Pool{New: func() any { return new(hashBlock) }}

// NewBuilder returns a builder for a filter with the given seed; sizeHint is
// the expected number of keys (0 if unknown).
func NewBuilder(seed uint64, sizeHint int) *Builder {
	return &Builder{
		seed:     seed,
		hashSeed: hashSeedOf(seed),
		blocks:   make([]*hashBlock, 0, (max(sizeHint, 0)+hashBlockLen-1)/hashBlockLen),
	}
}

// Add adds key to the set; it keeps only the key's hash.
func (b *Builder) Add(key []byte) {
	i := b.n % hashBlockLen
	if i == 0 {
		b.newBlock()
	}
	b.blocks[len(b.blocks)-1][i] = packedHash(key, b.hashSeed)
	b.n++
}

// newBlock appends a block from the pool for the next hashBlockLen keys.
func (b *Builder) newBlock() { b.blocks = append(b.blocks, hashBlockPool.Get().(*hashBlock)) }

// Len returns the number of keys added since the builder was created or last
// finished.
func (b *Builder) Len() int { return b.n }

// Finish builds the filter over the keys added so far and resets the builder
// (same seed) for another set.
func (b *Builder) Finish() (*Filter, error) {
	blocks, n := b.blocks, b.n
	b.blocks, b.n = blocks[:0], 0
	defer func() {
		for i, blk := range blocks {
			hashBlockPool.Put(blk)
			blocks[i] = nil
		}
	}()
	if uint64(n) > MaxKeys {
		return nil, fmt.Errorf("%w: %d > %d", ErrTooManyKeys, n, uint64(MaxKeys))
	}
	return buildGrouped(uint64(n), b.seed, func(g *grouping) {
		for i, blk := range blocks {
			for _, h := range filled(blk, i, n) {
				g.add(h)
			}
		}
	}), nil
}

// filled returns the hashes block i of a builder of n keys holds.
func filled(blk *hashBlock, i, n int) []uint64 {
	return blk[:min(hashBlockLen, n-i*hashBlockLen)]
}

// buildGrouped builds a filter of n keys whose packed hashes fill feeds to
// the grouping.
func buildGrouped(n, seed uint64, fill func(g *grouping)) *Filter {
	m := binsFor(n)
	sc := getScratch()
	defer scratchPool.Put(sc)
	g := sc.grouping(m)
	fill(g)
	return layout(g, n, m, seed, sc)
}

// slotsPerBin is the room for fingerprints per bin while grouping: 32
// two-byte slots, one 64-byte cache line. A bin receives more than 32 keys
// with probability about 4% (Poisson with mean 23.75); the excess goes to a
// spill list.
const slotsPerBin = 32

// grouping collects each bin's fingerprints in one pass over the keys
// (instead of a counting sort's two).
type grouping struct {
	numBins uint64
	slots   []uint16 // slotsPerBin per bin
	counts  []uint8  // used slots per bin
	spill   []uint64 // bin<<qrBits | fp beyond a bin's slots
}

// add records the fingerprint of a packed hash in its bin.
func (g *grouping) add(h uint64) {
	b := binOf(h, g.numBins)
	c := g.counts[b]
	if c < slotsPerBin {
		g.slots[b*slotsPerBin+uint64(c)] = uint16(h & qrMask)
		g.counts[b] = c + 1
		return
	}
	g.spill = append(g.spill, b<<qrBits|h&qrMask)
}

// buildScratch holds a build's temporary arrays; builds reuse them through
// scratchPool (as Pebble's bloom writer pools its hash blocks), so that
// repeated builds do not churn the garbage collector.
type buildScratch struct {
	hashes    hashBlock
	slots     []uint16
	counts    []uint8
	spill     []uint64
	run       []uint16
	forwarded []uint64
	g         grouping
}

var scratchPool sync.Pool

func getScratch() *buildScratch {
	if sc, ok := scratchPool.Get().(*buildScratch); ok {
		return sc
	}
	return new(buildScratch)
}

// grouping returns the scratch's grouping, emptied and sized for m bins.
// The slot array is aligned so that every bin's slots are one cache line.
func (sc *buildScratch) grouping(m uint64) *grouping {
	raw := grow(&sc.slots, m*slotsPerBin+slotsPerBin)
	off := (filter.CacheLine - uintptr(unsafe.Pointer(&raw[0]))%filter.CacheLine) % filter.CacheLine / 2
	counts := grow(&sc.counts, m)
	clear(counts)
	sc.g = grouping{
		numBins: m,
		slots:   raw[off : off+uintptr(m*slotsPerBin)],
		counts:  counts,
		spill:   sc.spill[:0],
	}
	return &sc.g
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

// layout lays the filter out directly in its encoding from the fingerprints
// grouped by bin.
//
// Instead of inserting keys one by one (Algorithm 1), it sorts each bin's
// fingerprints and keeps the smallest distinct 25 in the bin; the rest go to
// the spare. The result is what Algorithm 1 produces for any insertion order:
// every bin holds a maximal prefix of its sorted fingerprints (the prefix
// invariant of section 4.1). Equal fingerprints are stored once, so no
// fingerprint reaches the spare twice (the duplicate handling of section 4.4,
// made exact by the sort instead of a spare lookup).
func layout(g *grouping, n, m, seed uint64, sc *buildScratch) *Filter {
	spareCap := spareBlocksFor(n, spareCapacity(n))
	data := newEncoding(m, spareCap)
	bins := data[headerSize : headerSize+m*binBytes]
	forwarded := grow(&sc.forwarded, spareCapacity(n))[:0]
	spill := g.spill
	slices.Sort(spill)
	sc.spill = spill[:0]
	var set fingerprintSet
	for b := uint64(0); b < m; b++ {
		run := g.slots[b*slotsPerBin : b*slotsPerBin+uint64(g.counts[b])]
		if len(spill) > 0 && spill[0]>>qrBits == b {
			// A bin with more than slotsPerBin keys: gather its spill.
			sc.run = append(sc.run[:0], run...)
			for len(spill) > 0 && spill[0]>>qrBits == b {
				sc.run = append(sc.run, uint16(spill[0]&qrMask))
				spill = spill[1:]
			}
			run = sc.run
		}
		forwarded = set.layoutBin(bins[b*binBytes:b*binBytes+binBytes], run, b, forwarded)
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
// spare blocks, placed so that the bin table starts a cache line (every
// bin then lies within one line).
func newEncoding(m, blocks uint64) []byte {
	return filter.AlignedBytes(int(encodedSize(m, blocks)), headerSize)
}

// fingerprintSet sorts and deduplicates one bin's fingerprints through a
// bitmap of the 6400 possible values (100 words, padded to 128) with a
// two-word summary of its non-zero words: linear in the run length, few
// unpredictable branches, and it leaves the bitmap zeroed for the next bin.
type fingerprintSet struct {
	words [128]uint64
}

// fill sets the bits of run's fingerprints and returns the summary words.
func (s *fingerprintSet) fill(run []uint16) (lo, hi uint64) {
	for _, fp := range run {
		w := fp >> 6 & 127
		s.words[w] |= 1 << (fp & 63)
		bit := uint64(1) << (w & 63)
		upper := -uint64(w >> 6) // all ones when w >= 64
		hi |= bit & upper
		lo |= bit &^ upper
	}
	return lo, hi
}

// layoutBin writes bin b into pd, which must be zeroed, from its
// fingerprints run (any order, repeats allowed) and appends the fingerprints
// that do not fit, as spare ids, to forwarded. It produces exactly
// writePD(pd, prefix, overflowed) of the sorted distinct run, fusing the sort
// with the encoding.
func (s *fingerprintSet) layoutBin(pd []byte, run []uint16, b uint64, forwarded []uint64) []uint64 {
	pd = pd[:binBytes:binBytes]
	lo, hi := s.fill(run)
	var zeros uint64
	i := uint(0)
	last := uint(0)
	// Words 0-63 (summary lo), then 64-127 (summary hi; only 64-99 occur).
	for base, sm := uint(0), lo; ; base, sm = 64, hi {
		for ; sm != 0; sm &= sm - 1 {
			w := base | uint(bits.TrailingZeros64(sm))
			x := s.words[w&127]
			s.words[w&127] = 0
			for ; x != 0; x &= x - 1 {
				fp := w<<6 | uint(bits.TrailingZeros64(x))
				if i < binCapacity {
					zeros |= 1 << (fp>>8 + i)
					pd[(7+i)&(binBytes-1)] = byte(fp)
					last = fp
				} else {
					forwarded = append(forwarded, b*fingerprintRange+uint64(fp))
				}
				i++
			}
		}
		if base != 0 {
			break
		}
	}
	field := uint64(binNotOverflowed)
	if i > binCapacity {
		field = uint64(last >> 8)
		i = binCapacity
	}
	header := (uint64(1)<<(numQuotients+i) - 1) &^ zeros
	binary.LittleEndian.PutUint64(pd[0:8], field|header<<headerShift|uint64(pd[7])<<56)
	return forwarded
}

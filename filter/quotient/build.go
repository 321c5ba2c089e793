package quotient

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/adaptkv/adaptkv/filter"
)

// Builder collects keys (as hashes) and builds a filter from all of them at
// once. It is not safe for concurrent use.
type Builder struct {
	variant Variant
	opts    Options
	err     error
	hs      []hashPair
}

type hashPair struct{ h1, h2 uint64 }

// hashBufs recycles the hash slices of builds: a store builds a filter
// per table it writes, and each build needs two slices of 16 bytes a key
// (the builder's hashes and their copy sorted by home slot). Growing them
// from nothing for every table was a third of a table write's allocations.
// A sync.Pool loses its contents at every GC, which a store that writes
// tables runs often, so this is a small free list: it keeps at most
// maxPooledBufs slices of at most maxPooledHashes pairs (16 MiB in all).
var hashBufs struct {
	mu   sync.Mutex
	free [][]hashPair
}

const (
	maxPooledBufs   = 4
	maxPooledHashes = 1 << 18
)

// getHashBuf returns an empty slice with room for n pairs: the largest free
// one if it is large enough (a builder that does not know its key count
// asks for 0 and grows least from the largest), else a new one.
func getHashBuf(n int) []hashPair {
	hashBufs.mu.Lock()
	defer hashBufs.mu.Unlock()
	free := hashBufs.free
	largest := -1
	for i, b := range free {
		if largest < 0 || cap(b) > cap(free[largest]) {
			largest = i
		}
	}
	if largest < 0 || cap(free[largest]) < n {
		return make([]hashPair, 0, n)
	}
	b := free[largest]
	free[largest] = free[len(free)-1]
	free[len(free)-1] = nil
	hashBufs.free = free[:len(free)-1]
	return b[:0]
}

// putHashBuf offers b for reuse; the caller must not use it again. A full
// list keeps the larger slices.
func putHashBuf(b []hashPair) {
	if cap(b) == 0 || cap(b) > maxPooledHashes {
		return
	}
	hashBufs.mu.Lock()
	defer hashBufs.mu.Unlock()
	if len(hashBufs.free) < maxPooledBufs {
		hashBufs.free = append(hashBufs.free, b[:0])
		return
	}
	smallest := 0
	for i, f := range hashBufs.free {
		if cap(f) < cap(hashBufs.free[smallest]) {
			smallest = i
		}
	}
	if cap(b) > cap(hashBufs.free[smallest]) {
		hashBufs.free[smallest] = b[:0]
	}
}

// NewBuilder starts a filter of the given variant; sizeHint preallocates.
// Invalid variants or options are reported by Finish.
func NewBuilder(variant Variant, opts Options, sizeHint int) *Builder {
	b := &Builder{variant: variant}
	if !variant.valid() {
		b.err = fmt.Errorf("%w: unknown variant %d", ErrInvalidOptions, uint8(variant))
	}
	if b.err == nil {
		b.opts, b.err = opts.normalize()
	}
	if b.err != nil {
		return b
	}
	b.hs = getHashBuf(sizeHint)
	return b
}

// Add adds a key (only its hash is kept). Duplicates are allowed.
func (b *Builder) Add(key []byte) {
	if b.err != nil {
		return
	}
	h1, h2 := murmur3Sum(key, hashSeed(b.opts.Seed))
	b.hs = append(b.hs, hashPair{h1, h2})
}

// maxKeys bounds the element count (slot positions fit in int comfortably).
const maxKeys = 1 << 31

// Finish builds the filter and returns it with its remote representation:
// the tail h2 of the element in each slot, in slot order (0 for empty slots).
// It empties the builder, which may then collect a new key set.
func (b *Builder) Finish() (Filter, filter.MemRemote, error) {
	if b.err != nil {
		return nil, nil, b.err
	}
	if len(b.hs) > maxKeys {
		return nil, nil, fmt.Errorf("%w: %d keys is more than %d", ErrInvalidOptions, len(b.hs), maxKeys)
	}
	f, tails := build(b.variant, b.opts, b.hs)
	putHashBuf(b.hs)
	b.hs = nil
	f.remote = tails
	return f, tails, nil
}

// sortRun orders the hash pairs of one home slot by (h1, h2). A slot
// holds one or two pairs on average, so an insertion sort beats a general
// sort, which cost a tenth of a build; a long run (only repeats of one key
// make one, and they cost the insertion sort nothing) still gets the
// general sort.
func sortRun(hs []hashPair) {
	if len(hs) > 32 {
		slices.SortFunc(hs, comparePairs)
		return
	}
	for i := 1; i < len(hs); i++ {
		x := hs[i]
		j := i
		for ; j > 0 && (hs[j-1].h1 > x.h1 || hs[j-1].h1 == x.h1 && hs[j-1].h2 > x.h2); j-- {
			hs[j] = hs[j-1]
		}
		hs[j] = x
	}
}

// comparePairs orders hash pairs by h1, then h2.
func comparePairs(a, b hashPair) int {
	if c := cmp.Compare(a.h1, b.h1); c != 0 {
		return c
	}
	return cmp.Compare(a.h2, b.h2)
}

// groupByHome orders hs by home slot among nq (a counting sort into buf,
// which holds len(hs) pairs), sorts each slot's pairs and drops duplicates:
// slot q's pairs are pairs[counts[q]:counts[q+1]].
func groupByHome(hs []hashPair, nq uint64, buf []hashPair) (pairs []hashPair, counts []uint32) {
	// Counting sort by home slot.
	counts = make([]uint32, nq+1)
	for _, h := range hs {
		counts[quotient(h.h1, nq)+1]++
	}
	for i := uint64(1); i <= nq; i++ {
		counts[i] += counts[i-1]
	}
	sorted := buf
	// counts[q] is the next free place of slot q's pairs; afterwards it
	// is where slot q+1's begin, and one shift puts the starts back.
	for _, h := range hs {
		q := quotient(h.h1, nq)
		sorted[counts[q]] = h
		counts[q]++
	}
	copy(counts[1:], counts[:nq])
	counts[0] = 0

	// Dedupe identical hashes within each home slot; keep per-slot counts.
	n := 0
	for q := uint64(0); q < nq; q++ {
		lo, hi := int(counts[q]), int(counts[q+1])
		counts[q] = uint32(n)
		if hi-lo > 1 {
			sortRun(sorted[lo:hi])
		}
		for i := lo; i < hi; i++ {
			if i > lo && sorted[i] == sorted[i-1] {
				continue
			}
			sorted[n] = sorted[i]
			n++
		}
	}
	counts[nq] = uint32(n)
	return sorted[:n], counts
}

// build lays out the filter from hash pairs (which it may reorder).
func build(variant Variant, opts Options, hs []hashPair) (*qf, filter.MemRemote) {
	f := &qf{variant: variant, r: uint(opts.RemainderBits), seed: opts.Seed, load: opts.LoadFactor}
	f.initParams()
	f.nq = uint64(math.Ceil(float64(len(hs)) / opts.LoadFactor))
	if f.nq < 1 {
		f.nq = 1
	}
	nq := f.nq

	buf := getHashBuf(len(hs))[:len(hs)]
	defer putHashBuf(buf)
	sorted, counts := groupByHome(hs, nq, buf)
	f.n = len(sorted)

	// Slots needed: runs in quotient order, each starting at its home slot
	// or right after the previous run.
	pos := 0
	for q := uint64(0); q < nq; q++ {
		c := int(counts[q+1] - counts[q])
		if c > 0 {
			pos = max(pos, int(q)) + c
		}
	}
	nslots := max(int(nq), pos)
	f.nblocks = (nslots + 63) / 64
	f.words = make([]uint64, f.nblocks*f.wpb)
	tails := make(filter.MemRemote, f.nblocks*64)

	lastEnd := -1 // runend of the last occupied quotient placed so far
	nextBlock := 0
	setOffset := func(b int) {
		F := max(0, lastEnd-64*b+1)
		f.words[b*f.wpb+wMeta] = uint64(min(F, offsetSat))
	}
	pos = 0
	for q := uint64(0); q < nq; q++ {
		lo, hi := int(counts[q]), int(counts[q+1])
		if lo == hi {
			continue
		}
		for nextBlock*64 <= int(q) {
			setOffset(nextBlock)
			nextBlock++
		}
		f.words[int(q>>6)*f.wpb+wOcc] |= 1 << (q & 63)
		s := max(pos, int(q))
		for i := lo; i < hi; i++ {
			bw := f.words[(s>>6)*f.wpb : (s>>6+1)*f.wpb]
			setRemW(bw, f.r, s&63, sorted[i].h2)
			tails[s] = sorted[i].h2
			s++
		}
		e := s - 1
		f.words[(e>>6)*f.wpb+wRunends] |= 1 << uint(e&63)
		lastEnd = e
		pos = s
	}
	for ; nextBlock < f.nblocks; nextBlock++ {
		setOffset(nextBlock)
	}
	return f, tails
}

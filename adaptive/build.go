package adaptive

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// Builder collects keys (as hashes) and builds a filter from all of them at
// once. It is not safe for concurrent use.
type Builder struct {
	kind Kind
	opts Options
	err  error
	hs   []hashPair
}

type hashPair struct{ h1, h2 uint64 }

// hashBufs recycles the hash slices of finished builders: a store builds a
// filter per table it writes, and growing each table's slice from nothing
// was a fifth of a write benchmark's allocations. build copies what it
// keeps, so a slice is free once Finish returns.
var hashBufs sync.Pool // of *[]hashPair

// maxPooledHashes bounds the slices kept (16 bytes a key: 8 MiB).
const maxPooledHashes = 1 << 19

// NewBuilder starts a filter of the given kind; sizeHint preallocates.
// Invalid kinds or options are reported by Finish.
func NewBuilder(kind Kind, opts Options, sizeHint int) *Builder {
	b := &Builder{kind: kind}
	if !kind.valid() {
		b.err = fmt.Errorf("%w: unknown kind %d", ErrInvalidOptions, uint8(kind))
	}
	if b.err == nil {
		b.opts, b.err = opts.normalize()
	}
	if b.err != nil {
		return b
	}
	if p, ok := hashBufs.Get().(*[]hashPair); ok && cap(*p) >= sizeHint {
		b.hs = (*p)[:0]
	} else if sizeHint > 0 {
		b.hs = make([]hashPair, 0, sizeHint)
	}
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
func (b *Builder) Finish() (Filter, MemRemote, error) {
	if b.err != nil {
		return nil, nil, b.err
	}
	if len(b.hs) > maxKeys {
		return nil, nil, fmt.Errorf("%w: %d keys is more than %d", ErrInvalidOptions, len(b.hs), maxKeys)
	}
	f, tails := build(b.kind, b.opts, b.hs)
	if hs := b.hs[:0]; cap(hs) > 0 && cap(hs) <= maxPooledHashes {
		hashBufs.Put(&hs)
	}
	b.hs = nil
	f.remote = tails
	return f, tails, nil
}

// build lays out the filter from hash pairs (which it may reorder).
func build(kind Kind, opts Options, hs []hashPair) (*qf, MemRemote) {
	f := &qf{kind: kind, r: uint(opts.RemainderBits), seed: opts.Seed, load: opts.LoadFactor}
	f.initParams()
	f.nq = uint64(math.Ceil(float64(len(hs)) / opts.LoadFactor))
	if f.nq < 1 {
		f.nq = 1
	}
	nq := f.nq

	// Counting sort by home slot.
	counts := make([]uint32, nq+1)
	for _, h := range hs {
		counts[quotient(h.h1, nq)+1]++
	}
	for i := uint64(1); i <= nq; i++ {
		counts[i] += counts[i-1]
	}
	sorted := make([]hashPair, len(hs))
	fill := slices.Clone(counts[:nq])
	for _, h := range hs {
		q := quotient(h.h1, nq)
		sorted[fill[q]] = h
		fill[q]++
	}
	fill = nil

	// Dedupe identical hashes within each home slot; keep per-slot counts.
	n := 0
	cmp := func(a, b hashPair) int {
		if a.h1 != b.h1 {
			if a.h1 < b.h1 {
				return -1
			}
			return 1
		}
		if a.h2 < b.h2 {
			return -1
		} else if a.h2 > b.h2 {
			return 1
		}
		return 0
	}
	for q := uint64(0); q < nq; q++ {
		lo, hi := int(counts[q]), int(counts[q+1])
		counts[q] = uint32(n)
		if hi-lo > 1 {
			slices.SortFunc(sorted[lo:hi], cmp)
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
	sorted = sorted[:n]
	f.n = n

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
	tails := make(MemRemote, f.nblocks*64)

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

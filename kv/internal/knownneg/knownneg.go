// Package knownneg keeps the store's known negatives: the keys that Get
// most often found absent, ranked by how often they were asked. Every
// table the store writes is pre-adapted against the ones in its key range
// (or, for the stacked policy, built around them), so what the read path
// learned survives flushes, compactions and restarts. See
// docs/ARCHITECTURE.md, "Known negatives".
//
// The record is a set-associative Space-Saving sketch: keys hash to a set
// of 8 slots (one cache line of tags), and within a set the Space-Saving
// rule of Metwally, Agrawal and El Abbadi (2005) applies: a key not held
// takes the slot of the least counted one and inherits its count, so a
// key asked more than an eighth of its set's counted queries is always
// held, its count overestimated by at most the set's smallest count. A
// global heap would give the same bound over the whole sketch, but
// keeping it ordered costs a dozen cache misses per update, which the
// absent-Get path cannot afford; a set is one cache line. Counts age: every
// 8 x capacity counted queries they are halved, so keys that stop being
// asked fall behind the keys of a shifted workload and are replaced.
package knownneg

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/filterpolicy/filter"
)

// DefaultCapacity is the number of keys a Sketch holds by default (about
// 1.25 MiB with 16-byte keys).
const DefaultCapacity = 32768

// DefaultSampleEvery is the default sampling period of Record: one absent
// Get in DefaultSampleEvery is counted, with that weight. Sampling keeps
// the record off the absent-Get hot path; a key asked k times is counted
// at least once with probability 1 - (1-1/DefaultSampleEvery)^k (93% for
// k = 20, 98.6% for k = 32).
const DefaultSampleEvery = 8

// ways is the number of slots per set.
const ways = 8

// agingPeriod is the number of counted queries per slot after which every
// count is halved.
const agingPeriod = 8

// slotBytes is the memory of one slot beyond its key's bytes: tag, count
// and string header.
const slotBytes = 4 + 4 + 16

// set is one cache line: the tags and counts of its slots. An update
// touches only this line (and the key of the slot it replaces), so it
// costs one cache miss. A slot is identified by its tag (32 hash bits,
// with the set index about 44 bits): two keys that share both are counted
// as one, which only blurs a hint (odds about 8 in 2^32 per new key).
type set struct {
	tags   [ways]uint32 // 0: empty slot
	counts [ways]uint32 // saturating
}

// Sketch is a bounded record of frequently asked absent keys. Safe for
// concurrent use: Record never blocks (a Record that finds the sketch busy
// is dropped, as a sampled-out one is).
type Sketch struct {
	sampleEvery uint32
	seed        uint64 // of hash; saved in the file, adopted by an empty sketch that loads it
	setMask     uint64

	mu       sync.Mutex
	sets     []set
	keys     []string // per slot (set*ways + way), read only to replace and list
	counted  uint64   // counted queries since the last aging
	keyBytes int
	version  uint64 // bumped by every change: Snapshot caches on it
	snap     List
	snapVer  uint64

	held atomic.Int64 // slots in use, read without the lock by Len
}

// New returns an empty sketch holding at most capacity keys (capacity <= 0:
// DefaultCapacity; rounded up to a power of two of at least 8) that counts
// one Record in sampleEvery (<= 1: every one).
func New(capacity, sampleEvery int) *Sketch {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	sets := 1
	if capacity > ways {
		sets = 1 << bits.Len(uint((capacity+ways-1)/ways-1))
	}
	if sampleEvery < 1 {
		sampleEvery = 1
	}
	return &Sketch{
		sampleEvery: uint32(sampleEvery),
		seed:        rand.Uint64(),
		setMask:     uint64(sets - 1),
		sets:        make([]set, sets),
		keys:        make([]string, sets*ways),
	}
}

// Capacity is the number of keys the sketch holds at most.
func (s *Sketch) Capacity() int { return len(s.keys) }

// Len is the number of keys held.
func (s *Sketch) Len() int { return int(s.held.Load()) }

// SizeBytes estimates the sketch's memory.
func (s *Sketch) SizeBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.keys)*slotBytes + s.keyBytes)
}

// Record notes that a Get found key absent. It is sampled (one call in
// sampleEvery is counted, with weight sampleEvery) and skipped when
// another goroutine holds the sketch, so its cost on the read path is a
// random number most of the time. key is not retained.
func (s *Sketch) Record(key []byte) {
	if s.sampleEvery > 1 && rand.Uint32N(s.sampleEvery) != 0 {
		return
	}
	if !s.mu.TryLock() {
		return
	}
	s.addLocked(hash(s.seed, key), key, uint64(s.sampleEvery))
	s.mu.Unlock()
}

// Add counts key weight times, unsampled and waiting for the lock (tests,
// loading).
func (s *Sketch) Add(key []byte, weight uint64) {
	s.mu.Lock()
	s.addLocked(hash(s.seed, key), key, weight)
	s.mu.Unlock()
}

func (s *Sketch) addLocked(h uint64, key []byte, weight uint64) {
	s.insertLocked(h, key, weight, true)
	s.counted += weight
	if s.counted >= uint64(agingPeriod*len(s.keys)) {
		s.ageLocked()
	}
}

// insertLocked counts key (hash h) weight times, the Space-Saving update
// within its set, without advancing aging. Without replace, a key not held
// is only added to an empty slot.
func (s *Sketch) insertLocked(h uint64, key []byte, weight uint64, replace bool) {
	s.version++
	st := &s.sets[h&s.setMask]
	tag := uint32(h>>32) | 1
	min := 0
	for w := range ways {
		if st.tags[w] == tag {
			st.counts[w] = addSat(st.counts[w], weight)
			return
		}
		if st.tags[w] == 0 || st.counts[w] < st.counts[min] {
			min = w
			if st.tags[w] == 0 {
				break
			}
		}
	}
	if st.tags[min] == 0 {
		s.held.Add(1)
	} else if !replace {
		return
	}
	// The new key takes the least counted slot and inherits its count
	// (zero for an empty slot): the bound on its overestimate.
	slot := int(h&s.setMask)*ways + min
	s.keyBytes += len(key) - len(s.keys[slot])
	s.keys[slot] = string(key)
	st.tags[min] = tag
	st.counts[min] = addSat(st.counts[min], weight)
}

func addSat(c uint32, w uint64) uint32 {
	if w >= uint64(math.MaxUint32-c) {
		return math.MaxUint32
	}
	return c + uint32(w)
}

// ageLocked halves every count.
func (s *Sketch) ageLocked() {
	for i := range s.sets {
		for w := range ways {
			s.sets[i].counts[w] /= 2
		}
	}
	s.counted = 0
	s.version++
}

// Count returns the count held for key (0 if it is not held).
func (s *Sketch) Count(key []byte) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := hash(s.seed, key)
	st := &s.sets[h&s.setMask]
	tag := uint32(h>>32) | 1
	for w := range ways {
		if st.tags[w] == tag {
			return uint64(st.counts[w])
		}
	}
	return 0
}

// List is a snapshot of the known negatives, sorted by key. It is
// immutable: share it freely.
type List []filter.KnownNegative

// Snapshot returns the keys held with their counts, sorted by key. Keys
// whose count aged to zero are left out. A snapshot is reused until the
// sketch changes.
func (s *Sketch) Snapshot() List {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap != nil && s.snapVer == s.version {
		return s.snap
	}
	l := make(List, 0, s.held.Load())
	for i := range s.sets {
		st := &s.sets[i]
		for w := range ways {
			if st.tags[w] != 0 && st.counts[w] > 0 {
				l = append(l, filter.KnownNegative{Key: []byte(s.keys[i*ways+w]), Count: uint64(st.counts[w])})
			}
		}
	}
	slices.SortFunc(l, func(a, b filter.KnownNegative) int { return bytes.Compare(a.Key, b.Key) })
	s.snap, s.snapVer = l, s.version
	return l
}

// InRange returns the sub-list of keys in [smallest, largest] (user keys).
func (l List) InRange(smallest, largest []byte) List {
	lo, _ := slices.BinarySearchFunc(l, smallest, func(e filter.KnownNegative, k []byte) int { return bytes.Compare(e.Key, k) })
	hi, found := slices.BinarySearchFunc(l, largest, func(e filter.KnownNegative, k []byte) int { return bytes.Compare(e.Key, k) })
	if found {
		hi++
	}
	if hi < lo {
		return nil
	}
	return l[lo:hi:hi]
}

// Keys returns the list's keys.
func (l List) Keys() [][]byte {
	keys := make([][]byte, len(l))
	for i, e := range l {
		keys[i] = e.Key
	}
	return keys
}

// hash is a seeded 64-bit hash of key for set selection and tags: 8-byte
// words folded by multiply and xor-shift (a Murmur-style finalizer per
// word). It needs to spread keys, not resist an adversary: colliding keys
// only share a set.
func hash(seed uint64, key []byte) uint64 {
	h := seed ^ uint64(len(key))*0x9E3779B97F4A7C15
	for len(key) >= 8 {
		h = mix64(h ^ binary.LittleEndian.Uint64(key))
		key = key[8:]
	}
	var tail uint64
	for i, c := range key {
		tail |= uint64(c) << (8 * i)
	}
	return mix64(h ^ tail ^ 0xff)
}

func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Package knownneg keeps the store's known negatives: the keys that Get
// most often found absent, ranked by how often they were asked. Every
// table the store writes is pre-adapted against the ones in its key range
// (or, for the stacked policy, built around them), so what the read path
// learned survives flushes, compactions and restarts. See
// docs/ARCHITECTURE.md, "Known negatives".
//
// The record is a set-associative Space-Saving sketch: keys hash to a set
// of 8 slots (half a cache line of tags), and within a set the Space-Saving
// rule of Metwally, Agrawal and El Abbadi (2005) applies: a key not held
// takes the slot of the least counted one and inherits its count, so a
// key asked more than an eighth of its set's counted queries is always
// held, its count overestimated by at most the set's smallest count. A
// global heap would give the same bound over the whole sketch, but
// keeping it ordered costs a dozen cache misses per update, which the
// absent-Get path cannot afford; a hit reads one line of tags (and a
// counted one writes one line of counts). While nearly all the absent
// keys are new, a key not held takes a slot only at its second sight:
// its first sets a bit in a doorkeeper (the admission bitmap of TinyLFU,
// Einziger, Friedman and Manes 2017), so keys asked once (existence
// checks of new keys, scans of a wide key space) cost a bit, not an
// eviction and a copy of the key. Counts age: every 8 x capacity counted
// queries (or up to 1/8 more, see age) they are halved and the
// doorkeeper is cleared, so keys that stop being asked fall behind the
// keys of a shifted workload and are replaced. The sketch also tells
// whether absent keys repeat (NewShare: the share of recent absent Gets
// whose key it did not hold), which the doorkeeper and the store's
// FixAuto rule read. With SetWindow, Record counts only in windows the
// store opens while it rewrites tables (window.go).
package knownneg

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/internal/stripe"
	"github.com/adaptkv/adaptkv/kv/internal/striped"
)

// DefaultCapacity is the number of keys a Sketch holds by default (about
// 2.8 MiB with 16-byte keys, the doorkeeper included). Half of it held
// the 30k hot absent keys of kvbench churn less well (set conflicts
// evicted some).
const DefaultCapacity = 65536

// Sampling says which Record calls are counted; each rate is a power of
// two (New rounds up). One call in Every is looked at at all (the others
// cost a random number). A looked-at hit (a key already held) costs a
// hash and a read of one cache line (the tags); one in HitEvery is
// counted, with weight Every x HitEvery (an atomic add on another line,
// the counts'). A looked-at miss (a key not held) takes the lock and a
// slot one time in MissEvery, with weight Every x MissEvery. Counting
// hits sparsely keeps the path cheap where it is hot (frequent keys are
// held); taking misses keeps the coverage: a key asked k times is held
// after its first asks with probability 1 - (1-1/(Every x MissEvery))^k.
//
// With SecondSight, while nearly all the keys recorded lately were new
// to the sketch (NewShare at least doorShare, checked as counts are), a
// looked-at miss of a key whose doorkeeper bit is clear sets the bit and
// takes no slot (it is counted as a miss all the same: aging and
// NewShare see it); the key is taken at its next looked-at miss in the
// same aging period, or at its first if other keys set its bit (at most
// about one in five: see doorBitsPerSlot). Seen takes the same
// doorkeeper bits while it is on. While keys repeat, misses are
// few and taking them at once keeps the coverage of keys asked once or
// twice (each one new table's false positive spared when it comes back).
type Sampling struct {
	Every, HitEvery, MissEvery uint32
	SecondSight                bool
}

// DefaultSampling is the store's sampling: one absent Get in 2 looked at,
// one hit in 4 of those counted, every miss taken (a key asked 4 times is
// held with probability 94%, 8 times 99.6%), but at its second sight
// while nearly all absent keys are new: a stream of keys asked once
// (existence checks of new keys, a scan of a wide key space) then costs
// a doorkeeper bit per Get looked at, not an eviction and a copy of its
// key. Measured on kvbench churn (taf, wasted probes against the ideal
// bound): every Get looked at 0.8-0.9x, one in 2 1.0-1.1x, one in 4
// 1.7x; with aprefix, misses taken at their second sight whatever the
// keys do 1.5-2.0x, against 1.1-1.3x.
var DefaultSampling = Sampling{Every: 2, HitEvery: 4, MissEvery: 1, SecondSight: true}

// NoSampling counts every Record.
var NoSampling = Sampling{Every: 1, HitEvery: 1, MissEvery: 1}

// rngStripes is the number of sampling generators (a power of two).
const rngStripes = 32

// rngState is one sampling generator, alone on its cache line.
type rngState struct {
	x atomic.Uint64
	_ [56]byte
}

// random returns the next sampling draw: SetSeed's generator, or the
// calling goroutine's stripe's xorshift64*.
func (s *Sketch) random() uint64 {
	if s.draw != nil {
		return s.draw()
	}
	st := &s.rng[stripe.Hint()&(rngStripes-1)].x
	x := st.Load()
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	st.Store(x)
	return x * 2685821657736338717
}

// ways is the number of slots per set.
const ways = 8

// agingPeriod is the number of counted queries per slot after which every
// count is halved.
const agingPeriod = 8

// slotBytes is the memory of one slot beyond its key's bytes: tag, count
// and string header.
const slotBytes = 4 + 4 + 16

// tagSet is the tags of one set's slots (0: an empty slot), half a cache
// line. A slot is identified by its tag (32 hash bits, with the set index
// about 44 bits): two keys that share both are counted as one, which only
// blurs a hint (odds about 8 in 2^32 per new key). Tags are written only
// when a slot takes a new key (under the lock), so the lines a hit reads
// stay shared between cores.
type tagSet [ways]atomic.Uint32

// countSet is the counts of one set's slots, in an array apart from the
// tags: a counted hit writes it, and on the tags' line that write made
// every other core's next hit on the set (or its neighbour) a cache miss.
// Kept together, two goroutines asking the same hot absent keys spent a
// third of an absent Get there (BenchmarkGetParallel/absent, -cpu 2).
// Counts are read and written atomically: hits count without the lock.
type countSet [ways]atomic.Uint32

// Sketch is a bounded record of frequently asked absent keys. Safe for
// concurrent use: Record never blocks (a miss that finds the sketch busy
// is dropped, as a sampled-out one is).
type Sketch struct {
	sampling Sampling
	seed     uint64        // of hash; set before use (New, or Decode of an empty sketch)
	draw     func() uint64 // SetSeed's deterministic random numbers; nil: rng
	// rng are the sampling's random numbers by goroutine stripe
	// (internal/stripe): xorshift64* states read and written with atomic
	// loads and stores, no read-modify-write (the store is still an XCHG
	// on amd64; math/rand/v2's Uint64 measured slower). Two goroutines of
	// one stripe may draw the same number, which sampling does not mind.
	rng     [rngStripes]rngState
	setMask uint64
	tags    []tagSet   // per set
	counts  []countSet // per set
	// door is the doorkeeper (Sampling.SecondSight; nil without): a bit
	// per key hash (firstSight), set at a key's first looked-at miss,
	// cleared when counts age.
	door     []atomic.Uint64
	doorOn   atomic.Bool     // the doorkeeper is in use (nearly all recent keys new: doorShare)
	doorBits uint            // log2 of the doorkeeper's bits
	counted  striped.Counter // counted weight since the last aging (striped: every sampled hit adds)
	held     atomic.Int64    // slots in use
	// aged is the counted weight of the aging periods past (under mu) and
	// missed the counted weight of the misses (keys not held: taken, or
	// first sights; striped, as every first sight adds), both since New:
	// NewShare's window reads them.
	aged   atomic.Uint64
	missed striped.Counter
	share  struct {
		sync.Mutex
		counted, missed uint64  // at the start of the current window
		last            float64 // the last full window's share
	}

	mu       sync.Mutex
	keys     []string // per slot (set*ways + way); under mu
	keyBytes int
	// sorted is every held key with its slot, sorted by key, as of the
	// last Snapshot; dirty the slots whose key changed since (under mu).
	// Snapshot keeps the entries whose slot still holds their key and
	// merges in the changed slots: a pass over the keys, not a sort.
	sorted  []slotKey
	spare   []slotKey // the sorted before last, whose array the next Snapshot reuses
	dirty   []int32
	rebuild bool // dirty overflowed: the next Snapshot starts over
	// last is the last Snapshot, reused while no key changed and the
	// counted weight moved by less than one per slot since (lastCounted):
	// the keys are what tables need, the counts only rank them.
	last        List
	lastCounted uint64

	// window is SetWindow's weight (0: Record always counts); open says
	// whether Record counts now, and windowEnd (under mu, as the aging
	// that moves weight from counted to aged) is the total counted weight
	// at which the window closes (window.go).
	window    uint64
	open      atomic.Bool
	windowEnd uint64
}

// New returns an empty sketch holding at most capacity keys (capacity <= 0:
// DefaultCapacity; rounded up to a power of two of at least 8) that counts
// the Record calls sampling selects (each rate rounded up to a power of
// two; zero fields: 1).
func New(capacity int, sampling Sampling) *Sketch {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	sets := 1
	if capacity > ways {
		sets = 1 << bits.Len(uint((capacity+ways-1)/ways-1))
	}
	sampling.Every = powerOfTwo(sampling.Every)
	sampling.HitEvery = powerOfTwo(sampling.HitEvery)
	sampling.MissEvery = powerOfTwo(sampling.MissEvery)
	sk := &Sketch{
		sampling: sampling,
		seed:     rand.Uint64(),
		setMask:  uint64(sets - 1),
		tags:     make([]tagSet, sets),
		counts:   make([]countSet, sets),
		keys:     make([]string, sets*ways),
	}
	if sampling.SecondSight {
		sk.doorBits = uint(bits.Len(uint(sets*ways*doorBitsPerSlot - 1)))
		sk.door = make([]atomic.Uint64, 1<<(sk.doorBits-6))
	}
	for i := range sk.rng {
		sk.rng[i].x.Store(rand.Uint64() | 1)
	}
	return sk
}

// powerOfTwo returns the least power of two at least n (1 for 0), at most
// 2^31.
func powerOfTwo(n uint32) uint32 {
	if n <= 1 {
		return 1
	}
	return 1 << min(bits.Len32(n-1), 31)
}

// SetSeed makes a new sketch deterministic, for tests: seed is its hash
// seed and seeds the sampling's random numbers (one generator behind a
// lock, so Record serializes on it). Call it before any other method.
func (s *Sketch) SetSeed(seed uint64) {
	s.seed = seed
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s.draw = func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Uint64()
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
	return int64(len(s.keys)*slotBytes + len(s.door)*8 + s.keyBytes)
}

// doorShare is the share of new keys (NewShare) from which the
// doorkeeper is in use: a stream of keys nearly all asked once. Lower, it
// stayed in use for the first windows after a scan of new keys, while a
// hot set was coming in, and kvbench churn then wasted a quarter more
// probes (its keys asked once or twice not recorded).
const doorShare = 0.9

// doorBitsPerSlot is the doorkeeper's size (Sampling.SecondSight). An
// aging period counts a weight of 8 per slot and a miss weighs at least
// 1, so at most 8 first sights per slot set bits between two clearings:
// with 32 bits per slot at most 1-e^(-1/4), 22% of the bits, are set
// when the doorkeeper is cleared, and a key unseen since is admitted at
// its first sight with that chance (11% on average over the period).
const doorBitsPerSlot = 32

// firstSight reports whether the key of hash h has not been seen since
// the doorkeeper was last cleared, and marks it seen. Called only while
// doorOn, which is set only for a sketch with a doorkeeper.
func (s *Sketch) firstSight(h uint64) bool {
	w, bit := s.doorBit(h)
	if w.Load()&bit != 0 {
		return false
	}
	w.Or(bit)
	return true
}

// doorBit returns the doorkeeper word and bit of the key of hash h.
func (s *Sketch) doorBit(h uint64) (*atomic.Uint64, uint64) {
	// Multiply-shift: the index depends on all of h's bits, not on the
	// low ones that pick the set or the high ones of the tag alone.
	i := (h * 0x9E3779B97F4A7C15) >> (64 - s.doorBits)
	return &s.door[i>>6], uint64(1) << (i & 63)
}

// Record notes that a Get found key absent (see Sampling; with SetWindow,
// only while a window is open). key is not retained.
func (s *Sketch) Record(key []byte) {
	if s.window != 0 && !s.open.Load() {
		return
	}
	// One random draw serves both sampling decisions: its low half decides
	// whether the call is looked at, its high half whether a hit is
	// counted or a miss taken. It is drawn only when a rate above 1 asks
	// for it (the rates are powers of two: masks, not divisions).
	var r uint64
	every := s.sampling.Every
	if every > 1 {
		r = s.random()
		if uint32(r)&(every-1) != 0 {
			return
		}
	}
	h := hash(s.seed, key)
	set := h & s.setMask
	tags := &s.tags[set]
	tag := uint32(h>>32) | 1
	for w := range ways {
		if tags[w].Load() == tag {
			e := s.sampling.HitEvery
			if e > 1 && !s.drawn(&r, every, e) {
				return
			}
			s.counts[set][w].Add(every * e)
			s.age(uint64(every * e))
			return
		}
	}
	if e := s.sampling.MissEvery; e > 1 && !s.drawn(&r, every, e) {
		return
	}
	if s.doorOn.Load() && s.firstSight(h) {
		s.countMiss(uint64(every * s.sampling.MissEvery))
		return
	}
	s.takeMiss(h, key)
}

// drawn decides the second sampling of a Record call at rate e (a power
// of two above 1) from the high half of *r, drawing *r first if the
// call's first decision (at rate every) did not.
func (s *Sketch) drawn(r *uint64, every, e uint32) bool {
	if every == 1 {
		*r = s.random()
	}
	return uint32(*r>>32)&(e-1) == 0
}

// takeMiss gives key (hash h), which the sketch does not hold, a slot
// with the weight of one counted miss, unless another goroutine holds the
// lock (then the miss is dropped, as a sampled-out one is).
func (s *Sketch) takeMiss(h uint64, key []byte) {
	if !s.mu.TryLock() {
		return
	}
	weight := uint64(s.sampling.Every * s.sampling.MissEvery)
	s.insertLocked(h, key, weight, true)
	s.missed.Add(int64(weight))
	s.mu.Unlock()
	s.age(weight)
}

// Contains reports whether the sketch holds key (a tag match: a key it
// does not hold matches with odds of about ways in 2^31).
func (s *Sketch) Contains(key []byte) bool { return s.holds(hash(s.seed, key)) }

// holds reports whether the sketch holds the key of hash h.
func (s *Sketch) holds(h uint64) bool {
	tags := &s.tags[h&s.setMask]
	tag := uint32(h>>32) | 1
	for w := range ways {
		if tags[w].Load() == tag {
			return true
		}
	}
	return false
}

// countMiss counts a miss that takes no slot (a doorkeeper's first
// sight): NewShare and aging see its weight.
func (s *Sketch) countMiss(weight uint64) {
	s.missed.Add(int64(weight))
	s.age(weight)
}

// Add counts key weight times, unsampled and waiting for the lock (tests,
// loading).
func (s *Sketch) Add(key []byte, weight uint64) {
	s.mu.Lock()
	s.insertLocked(hash(s.seed, key), key, weight, true)
	s.mu.Unlock()
	s.age(weight)
}

// agingChecks is how many times per aging period a stripe of the counted
// weight checks the total: each time it gains period/agingChecks.
const agingChecks = 256

// age adds weight to the counted queries and halves every count once they
// reach agingPeriod per slot.
//
// Summing the stripes reads every core's line, so it is done only when the
// caller's stripe crosses a multiple of period/agingChecks: once in that
// much weight per stripe, not on every add (checking on every add once a
// stripe held its share of the period made each counted hit of two
// goroutines read the other's line for most of the period). The halving
// comes when the total reaches the period, or up to
// striped.Stripes x period/agingChecks (1/8 of it) later (more if the
// lock is busy at a check), never earlier.
func (s *Sketch) age(weight uint64) {
	// The period and the step are powers of two (len(s.keys) is one).
	period := int64(agingPeriod * len(s.keys))
	shift := max(bits.Len(uint(period/agingChecks))-1, 0)
	w := int64(weight)
	n := s.counted.Add(w)
	if n>>shift == (n-w)>>shift {
		return
	}
	if s.window != 0 {
		s.closeWindowIfDone()
	}
	if s.door != nil && s.share.TryLock() {
		s.shareLocked()
		s.share.Unlock()
	}
	if s.counted.Load() < period || !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	if s.counted.Load() < period {
		return // another goroutine aged first
	}
	for i := range s.counts {
		for w := range ways {
			c := &s.counts[i][w]
			// A hit counted between the load and the store is lost: a
			// hint, not a count anyone relies on.
			c.Store(c.Load() / 2)
		}
	}
	for i := range s.door {
		s.door[i].Store(0)
	}
	s.aged.Add(uint64(s.counted.Load()))
	s.counted.Reset()
}

// shareWindow is the counted weight (about the absent Gets recorded) over
// which NewShare measures.
const shareWindow = 4096

// NewShare returns the share of the absent Gets recorded over the last
// full window of about 4096 (sampled as Record samples) whose key the
// sketch did not hold: near 0 while absent keys repeat, near 1 while they
// do not. It is 0 until the first window is full. Cheap enough for every
// false positive, not for every Get.
func (s *Sketch) NewShare() float64 {
	s.share.Lock()
	defer s.share.Unlock()
	s.shareLocked()
	return s.share.last
}

// shareLocked closes the current window of NewShare if it is full, and
// turns the doorkeeper on while most keys are new (Sampling.SecondSight).
func (s *Sketch) shareLocked() {
	counted := s.aged.Load() + uint64(s.counted.Load())
	if d := counted - s.share.counted; d >= shareWindow && counted > s.share.counted {
		missed := uint64(s.missed.Load())
		s.share.last = min(float64(missed-s.share.missed)/float64(d), 1)
		s.share.counted, s.share.missed = counted, missed
		if s.door != nil {
			s.doorOn.Store(s.share.last >= doorShare)
		}
	}
}

// insertLocked counts key (hash h) weight times, the Space-Saving update
// within its set, without advancing aging. Without replace, a key not held
// is only added to an empty slot.
func (s *Sketch) insertLocked(h uint64, key []byte, weight uint64, replace bool) {
	tags, counts := &s.tags[h&s.setMask], &s.counts[h&s.setMask]
	tag := uint32(h>>32) | 1
	min, minCount := 0, uint32(math.MaxUint32)
	for w := range ways {
		t := tags[w].Load()
		if t == tag {
			addSat(&counts[w], weight)
			return
		}
		if t == 0 {
			min, minCount = w, 0
			break
		}
		if c := counts[w].Load(); c < minCount {
			min, minCount = w, c
		}
	}
	if tags[min].Load() == 0 {
		s.held.Add(1)
	} else if !replace {
		return
	}
	// The new key takes the least counted slot and inherits its count
	// (zero for an empty slot): the bound on its overestimate.
	slot := int(h&s.setMask)*ways + min
	s.keyBytes += len(key) - len(s.keys[slot])
	s.keys[slot] = string(key)
	tags[min].Store(tag)
	addSat(&counts[min], weight)
	switch {
	case s.rebuild:
	case len(s.dirty) >= len(s.keys):
		s.rebuild, s.dirty = true, s.dirty[:0]
	default:
		s.dirty = append(s.dirty, int32(slot))
	}
}

func addSat(c *atomic.Uint32, w uint64) {
	for {
		old := c.Load()
		n := uint64(old) + w
		if n > math.MaxUint32 {
			n = math.MaxUint32
		}
		if c.CompareAndSwap(old, uint32(n)) {
			return
		}
	}
}

// Count returns the count held for key (0 if it is not held).
func (s *Sketch) Count(key []byte) uint64 {
	h := hash(s.seed, key)
	set := h & s.setMask
	tag := uint32(h>>32) | 1
	for w := range ways {
		if s.tags[set][w].Load() == tag {
			return uint64(s.counts[set][w].Load())
		}
	}
	return 0
}

// hash is the sketch's key hash (set index and tag).
func hash(seed uint64, key []byte) uint64 { return filter.Hash64(seed, key) }

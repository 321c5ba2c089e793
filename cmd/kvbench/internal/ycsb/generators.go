package ycsb

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// ZipfianConstant is YCSB's default zipfian skew θ.
const ZipfianConstant = 0.99

// scrambledItemCount and scrambledZetan are the constants of YCSB's
// ScrambledZipfianGenerator: it draws a zipfian rank over 10^10 items (whose
// ζ(10^10, 0.99) is precomputed) and hashes it onto the key space.
const (
	scrambledItemCount = 10_000_000_000
	scrambledZetan     = 26.46902820178302
)

// IntGenerator yields record numbers. Implementations are not safe for
// concurrent use: each worker thread owns its generators.
type IntGenerator interface {
	Next() uint64
}

// Zipfian draws integers in [min, min+items) with P(min+i) ∝ 1/(i+1)^θ using
// the method of Gray et al., "Quickly Generating Billion-Record Synthetic
// Databases" (SIGMOD 1994), as YCSB's ZipfianGenerator does: ranks 0 and 1
// are exact, larger ranks follow the continuous approximation. The item count
// may grow (NextN), in which case ζ is extended incrementally.
type Zipfian struct {
	rng       *rand.Rand
	base      uint64
	theta     float64
	alpha     float64
	zeta2     float64
	zetan     float64
	countZeta uint64
	eta       float64
	halfPowTh float64
}

var zetaCache sync.Map // zetaKey -> float64

type zetaKey struct {
	n     uint64
	theta float64
}

// Zeta returns ζ(n, θ) = Σ_{i=1..n} 1/i^θ (memoized: workers share it).
func Zeta(n uint64, theta float64) float64 {
	if v, ok := zetaCache.Load(zetaKey{n, theta}); ok {
		return v.(float64)
	}
	z := zetaRange(0, n, theta, 0)
	zetaCache.Store(zetaKey{n, theta}, z)
	return z
}

// zetaRange adds Σ_{i=st..n-1} 1/(i+1)^θ to sum.
func zetaRange(st, n uint64, theta, sum float64) float64 {
	for i := st; i < n; i++ {
		sum += 1 / math.Pow(float64(i+1), theta)
	}
	return sum
}

// NewZipfian returns a zipfian generator over [min, min+items) with skew theta
// (0 < theta < 1).
func NewZipfian(rng *rand.Rand, min, items uint64, theta float64) *Zipfian {
	return newZipfian(rng, min, items, theta, Zeta(items, theta))
}

func newZipfian(rng *rand.Rand, min, items uint64, theta, zetan float64) *Zipfian {
	z := &Zipfian{
		rng:       rng,
		base:      min,
		theta:     theta,
		alpha:     1 / (1 - theta),
		zeta2:     zetaRange(0, 2, theta, 0),
		zetan:     zetan,
		countZeta: items,
		halfPowTh: math.Pow(0.5, theta),
	}
	z.eta = z.computeEta(items)
	return z
}

func (z *Zipfian) computeEta(items uint64) float64 {
	return (1 - math.Pow(2/float64(items), 1-z.theta)) / (1 - z.zeta2/z.zetan)
}

// Next draws from the generator's current item count.
func (z *Zipfian) Next() uint64 { return z.NextN(z.countZeta) }

// NextN draws a value in [min, min+items). A larger item count than before
// extends ζ incrementally (cheap when items grow by inserts).
func (z *Zipfian) NextN(items uint64) uint64 {
	if items != z.countZeta {
		if items > z.countZeta {
			z.zetan = zetaRange(z.countZeta, items, z.theta, z.zetan)
		} else {
			z.zetan = Zeta(items, z.theta)
		}
		z.countZeta = items
		z.eta = z.computeEta(items)
	}
	u := z.rng.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return z.base
	}
	if uz < 1+z.halfPowTh {
		return z.base + 1
	}
	// x^alpha as exp(alpha ln x): math.Pow takes alpha = 1/(1-θ) = 100
	// apart into integer powers and costs 74 ns a draw here, this 23; the
	// rank differs in about one draw in 10^7 (the last bits of the power).
	r := uint64(float64(items) * math.Exp(z.alpha*math.Log(z.eta*u-z.eta+1)))
	if r >= items { // guard float rounding at u -> 1
		r = items - 1
	}
	return z.base + r
}

// ScrambledZipfian is YCSB's "zipfian" request distribution: a zipfian rank
// is drawn over 10^10 items (θ = 0.99) and hashed with FNV-64 onto
// [min, min+items), so the popular items are spread over the key space
// instead of clustering at the smallest record numbers.
type ScrambledZipfian struct {
	gen   *Zipfian
	min   uint64
	items uint64
}

// NewScrambledZipfian returns a scrambled zipfian generator over
// [min, min+items). With theta == ZipfianConstant it uses YCSB's 10^10-item
// rank space; other skews draw ranks over items items.
func NewScrambledZipfian(rng *rand.Rand, min, items uint64, theta float64) *ScrambledZipfian {
	var g *Zipfian
	if theta == ZipfianConstant {
		g = newZipfian(rng, 0, scrambledItemCount, theta, scrambledZetan)
	} else {
		g = NewZipfian(rng, 0, items, theta)
	}
	return &ScrambledZipfian{gen: g, min: min, items: items}
}

// Next draws a record number.
func (s *ScrambledZipfian) Next() uint64 {
	return s.min + FNVHash64(s.gen.Next())%s.items
}

// Uniform draws uniformly from [min, min+items).
type Uniform struct {
	rng        *rand.Rand
	min, items uint64
}

// NewUniform returns a uniform generator over [min, min+items).
func NewUniform(rng *rand.Rand, min, items uint64) *Uniform {
	return &Uniform{rng: rng, min: min, items: items}
}

// Next draws a record number.
func (u *Uniform) Next() uint64 { return u.min + u.rng.Uint64N(u.items) }

// Counter hands out insert sequence numbers and tracks how many records
// are known to exist: Count is the length of the prefix of sequence numbers
// whose inserts all completed, so readers never ask for a record another
// thread is still inserting (YCSB's AcknowledgedCounterGenerator). Safe for
// concurrent use.
type Counter struct {
	next    atomic.Uint64
	limit   atomic.Uint64 // every record below limit exists
	mu      sync.Mutex
	pending map[uint64]struct{} // acknowledged records above limit
}

// NewCounter returns a counter whose first value is start; records below
// start are taken as already inserted.
func NewCounter(start uint64) *Counter {
	c := &Counter{pending: map[uint64]struct{}{}}
	c.next.Store(start)
	c.limit.Store(start)
	return c
}

// Next returns the next insert sequence number.
func (c *Counter) Next() uint64 { return c.next.Add(1) - 1 }

// Ack records that the insert of n completed.
func (c *Counter) Ack(n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.limit.Load()
	if n < limit {
		return
	}
	if n != limit {
		c.pending[n] = struct{}{}
		return
	}
	limit++
	for {
		if _, ok := c.pending[limit]; !ok {
			break
		}
		delete(c.pending, limit)
		limit++
	}
	c.limit.Store(limit)
}

// Count returns how many records (0..Count-1) are known to exist.
func (c *Counter) Count() uint64 { return c.limit.Load() }

// SkewedLatest is YCSB's "latest" distribution: the most recently inserted
// records are the most popular (zipfian over the distance from the newest).
type SkewedLatest struct {
	counter *Counter
	zipf    *Zipfian
}

// NewSkewedLatest returns a latest-skewed generator over the records counted
// by c.
func NewSkewedLatest(rng *rand.Rand, c *Counter, theta float64) *SkewedLatest {
	n := c.Count()
	if n < 2 {
		n = 2
	}
	return &SkewedLatest{counter: c, zipf: NewZipfian(rng, 0, n, theta)}
}

// Next draws a record number in [0, Count()).
func (l *SkewedLatest) Next() uint64 {
	n := l.counter.Count()
	if n <= 1 {
		return 0
	}
	// YCSB: max = lastValue; next = max - zipfian.nextLong(max).
	last := n - 1
	return last - l.zipf.NextN(last)
}

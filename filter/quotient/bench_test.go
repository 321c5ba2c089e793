package quotient

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"
)

const benchN = 1 << 20

// benchAdaptQueries negative queries (A/S = 10) prepare the adapted filters.
const benchAdaptQueries = 10 * benchN

var benchData struct {
	once    sync.Once
	keys    [][]byte
	negs    [][]byte
	filters map[Variant]*qf
	adapted map[Variant]*qf
}

// benchSetup builds, once per process, a filter of every kind over the same
// 1M keys, and a second copy that has adapted to 10M other negative queries
// (A/S = 10: about 39,000 adaptations, most blocks holding nonzero codes),
// the state a long-running adaptive filter is in; the measured negatives are
// new to both.
func benchSetup(b *testing.B) {
	b.Helper()
	benchData.once.Do(func() {
		rng := rand.New(rand.NewPCG(7, 7))
		benchData.keys = randKeys(rng, benchN, 1)
		benchData.negs = randKeys(rng, benchN, 2)
		benchData.filters = map[Variant]*qf{}
		benchData.adapted = map[Variant]*qf{}
		for _, kind := range allVariants {
			for _, m := range []map[Variant]*qf{benchData.filters, benchData.adapted} {
				f, err := New(kind, benchData.keys, Options{Seed: 99})
				if err != nil {
					panic(err)
				}
				m[kind] = f.(*qf)
			}
			if kind == RSQF {
				continue
			}
			f := benchData.adapted[kind]
			neg := newNegStream(uint64(kind))
			for i := 0; i < benchAdaptQueries; i++ {
				k := neg.next()
				if f.MayContain(k) {
					if err := f.Adapt(k); err != nil {
						panic(err)
					}
				}
			}
		}
	})
}

// BenchmarkInsert builds a filter of 1M keys from scratch (hashing, sorting
// and layout): the figure is ns per key.
func BenchmarkInsert(b *testing.B) {
	benchSetup(b)
	for _, kind := range allVariants {
		b.Run(kind.String(), func(b *testing.B) {
			b.ReportAllocs()
			start, c0 := time.Now(), cpuTime()
			for i := 0; i < b.N; i++ {
				bl := NewBuilder(kind, Options{Seed: 5}, benchN)
				for _, k := range benchData.keys {
					bl.Add(k)
				}
				if _, _, err := bl.Finish(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*benchN), "ns/key")
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N*benchN), "cpu-ns/key")
		})
	}
}

// cpuTime is the process's user+system CPU time. The machine these
// benchmarks run on is shared, so besides wall-clock ns/op they report
// cpu-ns/op, which time-slicing with other processes does not inflate.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchQuery(b *testing.B, query func([]byte) bool, keys [][]byte, wantAll bool) {
	b.ReportAllocs()
	hits := 0
	b.ResetTimer()
	c0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if query(keys[i&(benchN-1)]) {
			hits++
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
	if wantAll && hits != b.N {
		b.Fatalf("false negatives: %d of %d", b.N-hits, b.N)
	}
	b.ReportMetric(float64(hits)/float64(b.N), "maybe/op")
}

// BenchmarkQuery measures MayContain on stored keys (positive) and on
// absent keys (negative), on fresh filters and after adapting to 1M
// negatives; "unsync" skips the sequence-counter check that makes queries
// safe during Adapt, to measure what the synchronization costs.
func BenchmarkQuery(b *testing.B) {
	benchSetup(b)
	for _, kind := range allVariants {
		f, a := benchData.filters[kind], benchData.adapted[kind]
		b.Run(fmt.Sprintf("%s/positive", kind), func(b *testing.B) { benchQuery(b, f.MayContain, benchData.keys, true) })
		b.Run(fmt.Sprintf("%s/negative", kind), func(b *testing.B) { benchQuery(b, f.MayContain, benchData.negs, false) })
		if kind == RSQF {
			continue
		}
		b.Run(fmt.Sprintf("%s/positive-adapted", kind), func(b *testing.B) { benchQuery(b, a.MayContain, benchData.keys, true) })
		b.Run(fmt.Sprintf("%s/negative-adapted", kind), func(b *testing.B) { benchQuery(b, a.MayContain, benchData.negs, false) })
		b.Run(fmt.Sprintf("%s/positive-adapted-unsync", kind), func(b *testing.B) { benchQuery(b, a.mayContainUnsync, benchData.keys, true) })
		b.Run(fmt.Sprintf("%s/negative-adapted-unsync", kind), func(b *testing.B) { benchQuery(b, a.mayContainUnsync, benchData.negs, false) })
	}
}

package prefix

import (
	"encoding/binary"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/filter/quotient"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// Run with: go test -run '^$' -bench . -benchmem ./filter/prefix/
// Add -prefix.big for n = 16M (about 2 GiB of RAM for keys and filters).
var benchBig = flag.Bool("prefix.big", false, "also benchmark n = 16M keys")

const benchQueryKeys = 1 << 20 // absent keys cycled through by negative queries

var benchKeys struct {
	sync.Mutex
	present map[int][][]byte
	absent  [][]byte
}

func benchSizes() []int {
	if *benchBig {
		return []int{1 << 20, 1 << 24}
	}
	return []int{1 << 20}
}

func sizeName(n int) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("n=%dM", n>>20)
	}
	return fmt.Sprintf("n=%d", n)
}

func presentKeys(n int) [][]byte {
	benchKeys.Lock()
	defer benchKeys.Unlock()
	if benchKeys.present == nil {
		benchKeys.present = map[int][][]byte{}
	}
	if k, ok := benchKeys.present[n]; ok {
		return k
	}
	k := makeKeys(n, 's', uint64(n))
	benchKeys.present[n] = k
	return k
}

func absentKeys() [][]byte {
	benchKeys.Lock()
	defer benchKeys.Unlock()
	if benchKeys.absent == nil {
		benchKeys.absent = makeKeys(benchQueryKeys, 'a', 777)
	}
	return benchKeys.absent
}

// cpuTimer measures the benchmark goroutine's thread CPU time (see
// threadCPUNanos) alongside the wall clock that ns/op reports.
type cpuTimer struct{ start int64 }

func startCPU(b *testing.B) cpuTimer {
	runtime.LockOSThread()
	b.ResetTimer()
	return cpuTimer{threadCPUNanos()}
}

// stop reports cpu-ns per unit (per op, or per key when perOp > 1).
func (c cpuTimer) stop(b *testing.B, perOp int, unit string) {
	end := threadCPUNanos()
	b.StopTimer()
	runtime.UnlockOSThread()
	if c.start >= 0 && end >= 0 {
		b.ReportMetric(float64(end-c.start)/float64(b.N)/float64(perOp), unit)
	}
}

// benchFilter is the common view of the two filters under test.
type benchFilter struct {
	mayContain func([]byte) bool
	bits       float64
}

func buildPrefix(keys [][]byte) benchFilter {
	f, err := BuildWithSeed(keys, 42)
	if err != nil {
		panic(err)
	}
	return benchFilter{mayContain: f.MayContain, bits: float64(f.SizeBytes() * 8)}
}

// buildPrefixIncremental builds through NewBuilder/Add/Finish, the path a
// table writer that sees keys one at a time takes.
func buildPrefixIncremental(keys [][]byte) benchFilter {
	b := NewBuilder(42, 0)
	for _, k := range keys {
		b.Add(k)
	}
	f, err := b.Finish()
	if err != nil {
		panic(err)
	}
	return benchFilter{mayContain: f.MayContain, bits: float64(f.SizeBytes() * 8)}
}

var bloomPolicy = bloom.FilterPolicy(10)

func buildBloom(keys [][]byte) benchFilter {
	w := bloomPolicy.NewWriter(sstable.TableFilter)
	for _, k := range keys {
		w.AddKey(k)
	}
	block := w.Finish(nil)
	return benchFilter{
		mayContain: func(k []byte) bool { return bloomPolicy.MayContain(sstable.TableFilter, block, k) },
		bits:       float64(len(block) * 8),
	}
}

// buildKind builds a filter of kind k (with its remote in memory) and, when
// adaptQueries > 0, first runs that many absent queries (a key set the
// benchmarks never query) adapting every false positive: "after heavy
// adaptation".
func buildKind(k filter.Kind, adaptQueries int) func([][]byte) benchFilter {
	return func(keys [][]byte) benchFilter {
		b := k.NewBuilder(filter.BuildOptions{Seed: 42, SizeHint: len(keys), WithRemote: true})
		for _, key := range keys {
			b.Add(key)
		}
		local, remote, err := b.Finish()
		if err != nil {
			panic(err)
		}
		f, err := k.Decode(k.Params(), 42, local, filter.MemRemote(remote))
		if err != nil {
			panic(err)
		}
		if adaptQueries > 0 {
			a := f.(filter.Adaptive)
			var key [16]byte
			for i := 0; i < adaptQueries; i++ {
				binary.LittleEndian.PutUint64(key[0:], uint64(i)*0x9e3779b97f4a7c15)
				binary.LittleEndian.PutUint64(key[8:], uint64(i))
				key[0] = 'x'
				if a.MayContain(key[:]) {
					if err := a.Adapt(key[:]); err != nil {
						panic(err)
					}
				}
			}
		}
		return benchFilter{mayContain: f.MayContain, bits: float64(f.SizeBytes() * 8)}
	}
}

// adaptedQueries is the adaptation stream of the "-adapted" variants.
const adaptedQueries = 10_000_000

var benchFilters = []struct {
	name  string
	build func([][]byte) benchFilter
}{
	{"prefix", buildPrefix},
	{"bloom10", buildBloom},
	{"aprefix", buildKind(APrefixKind{}, 0)},
	{"aprefix-adapted", buildKind(APrefixKind{}, adaptedQueries)},
	{"taf", buildKind(quotient.TAFKind, 0)},
	{"taf-adapted", buildKind(quotient.TAFKind, adaptedQueries)},
}

// buildOnly are extra build variants, not repeated in the query benchmarks.
var buildOnly = []struct {
	name  string
	build func([][]byte) benchFilter
}{
	{"prefix-builder", buildPrefixIncremental},
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range benchSizes() {
		for _, bf := range append(benchFilters[:len(benchFilters):len(benchFilters)], buildOnly...) {
			b.Run(fmt.Sprintf("%s/%s", bf.name, sizeName(n)), func(b *testing.B) {
				keys := presentKeys(n)
				b.ReportAllocs()
				cpu := startCPU(b)
				var f benchFilter
				for i := 0; i < b.N; i++ {
					f = bf.build(keys)
				}
				cpu.stop(b, n, "cpu-ns/key")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
				b.ReportMetric(f.bits/float64(n), "bits/key")
			})
		}
	}
}

// BenchmarkQuery measures one MayContain per op: positive queries cycle
// through the stored keys, negative ones through 2^20 absent keys (fp% is
// the share of those answered "maybe").
func BenchmarkQuery(b *testing.B) {
	for _, n := range benchSizes() {
		for _, bf := range benchFilters {
			var once sync.Once
			var f benchFilter
			get := func() benchFilter {
				once.Do(func() { f = bf.build(presentKeys(n)) })
				return f
			}
			b.Run(fmt.Sprintf("positive/%s/%s", bf.name, sizeName(n)), func(b *testing.B) {
				keys := presentKeys(n)
				f := get()
				b.ReportAllocs()
				cpu := startCPU(b)
				for i := 0; i < b.N; i++ {
					if !f.mayContain(keys[i&(n-1)]) {
						b.Fatal("false negative")
					}
				}
				cpu.stop(b, 1, "cpu-ns/op")
			})
			b.Run(fmt.Sprintf("negative/%s/%s", bf.name, sizeName(n)), func(b *testing.B) {
				keys := absentKeys()
				f := get()
				b.ReportAllocs()
				cpu := startCPU(b)
				hits := 0
				for i := 0; i < b.N; i++ {
					if f.mayContain(keys[i&(benchQueryKeys-1)]) {
						hits++
					}
				}
				cpu.stop(b, 1, "cpu-ns/op")
				// Rate over a full pass of the absent keys, independent of b.N.
				fp := 0
				for _, k := range keys {
					if f.mayContain(k) {
						fp++
					}
				}
				b.ReportMetric(100*float64(fp)/float64(len(keys)), "fp%")
				b.ReportMetric(f.bits/float64(n), "bits/key")
				_ = hits
			})
		}
	}
}

// BenchmarkDecode measures Decode (checksum and full validation of every
// bin) of a filter over 2^20 keys.
func BenchmarkDecode(b *testing.B) {
	f, err := BuildWithSeed(presentKeys(1<<20), 42)
	if err != nil {
		b.Fatal(err)
	}
	data, err := f.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildTable measures a filter built as the store builds a
// table's: 16k keys through the kind's builder with no size hint (Pebble's
// filter writer gives none), the remote representation included for
// aprefix. ns/key is per key added; B/op per table.
func BenchmarkBuildTable(b *testing.B) {
	const n = 16 << 10
	keys := presentKeys(n)
	for _, k := range []filter.Kind{Kind{}, APrefixKind{}} {
		b.Run(k.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bl := k.NewBuilder(filter.BuildOptions{Seed: 42, WithRemote: true})
				for _, key := range keys {
					bl.Add(key)
				}
				if _, _, err := bl.Finish(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

package filterpolicy

import (
	"testing"

	"github.com/adaptkv/adaptkv/filter"
)

// BenchmarkMayContain measures a negative query per policy on a 100k-key
// filter through the decoded Filter (package pebblefilter's benchmark
// measures the same query through Pebble's FilterPolicy.MayContain).
func BenchmarkMayContain(b *testing.B) {
	const n = 100_000
	keys := make([][]byte, 4096)
	for i := range keys {
		keys[i] = absent(i * 97)
	}
	for _, name := range Names() {
		p := fixedPolicy(b, name, 5)
		block := buildBlock(p, n)
		f, err := p.Open(block, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/filter", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				f.MayContain(keys[i&(len(keys)-1)])
			}
		})
	}
}

// BenchmarkMayContainPlacement measures a negative query on a 4M-key
// filter (larger than a core's L2 cache: queries miss it) whose local
// state starts a cache line, as sstable reads it (line), or 16 bytes
// past one (plus16), as a buffer from make places a block's local state
// after the 48-byte header. Queries cycle through 1M absent keys.
func BenchmarkMayContainPlacement(b *testing.B) {
	const n, queries = 1 << 22, 1 << 20
	keys := make([][]byte, queries)
	for i := range keys {
		keys[i] = absent(int(filter.Mix64(uint64(i)) % (1 << 30)))
	}
	for _, name := range []string{"bloom", "fuse", "prefix", "aprefix"} {
		block := buildBlock(fixedPolicy(b, name, 5), n)
		for _, place := range []struct {
			name string
			past int
		}{{"line", 0}, {"plus16", 16}} {
			buf := filter.AlignedBytes(len(block)+place.past, HeaderSize)[place.past:]
			copy(buf, block)
			f, _, err := OpenBlock(buf, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(name+"/"+place.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					f.MayContain(keys[i&(queries-1)])
				}
			})
		}
	}
}

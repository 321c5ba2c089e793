package filterpolicy

import (
	"testing"
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

package merging

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/itertest"
)

// BenchmarkMergingIterSeekGE reports the cost of a SeekGE followed by one
// Next over 8 inputs (the shape of a short range scan in kv).
func BenchmarkMergingIterSeekGE(b *testing.B) {
	const total = 1 << 16
	rng := rand.New(rand.NewSource(1))
	children := make([][]itertest.Entry, 8)
	keys := make([][]byte, total)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("user%012d", i))
		c := rng.Intn(8)
		children[c] = append(children[c], itertest.Entry{Key: base.InternalKey{UserKey: keys[i], Seq: uint64(i), Kind: base.KeyKindSet}, Value: []byte("value")})
	}
	it, _ := newMerged(children)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !it.SeekGE(keys[rng.Intn(total-1)]) || !it.Next() {
			b.Fatal("seek failed")
		}
	}
}

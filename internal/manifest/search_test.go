package manifest

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/stretchr/testify/require"
)

// TestSearchFindsAsSortSearch: Find answers as a binary search of the full
// keys does, on runs whose largest keys share long prefixes, differ only
// past the first 8 bytes after them, end in zero bytes or are prefixes of
// one another, for keys inside, between, equal to and outside them.
func TestSearchFindsAsSortSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 1, 'a', 'b', 0xff}
	randKey := func(prefix []byte, n int) []byte {
		k := append([]byte(nil), prefix...)
		for range n {
			k = append(k, alphabet[rng.IntN(len(alphabet))])
		}
		return k
	}
	for round := range 2000 {
		var prefix []byte
		switch round % 4 {
		case 1:
			prefix = []byte("tenant/0001/")
		case 2:
			prefix = []byte("tenant/0001/order/0000") // equal words after any short common prefix
		case 3:
			prefix = randKey(nil, rng.IntN(12))
		}
		n := 1 + rng.IntN(40)
		var largest [][]byte
		for range n {
			largest = append(largest, randKey(prefix, rng.IntN(14)))
		}
		slices.SortFunc(largest, bytes.Compare)
		largest = slices.CompactFunc(largest, bytes.Equal)
		ts := make([]*base.TableMeta, len(largest))
		for i, k := range largest {
			ts[i] = &base.TableMeta{FileNum: uint64(i), Largest: base.InternalKey{UserKey: k}}
		}
		s := NewSearch(ts)
		probes := [][]byte{nil, {}, {0xff, 0xff}, prefix, randKey(nil, 3)}
		for _, k := range largest {
			probes = append(probes, k, append(slices.Clone(k), 0), k[:len(k)/2])
		}
		for range 50 {
			probes = append(probes, randKey(prefix, rng.IntN(14)))
		}
		for _, key := range probes {
			want := sort.Search(len(ts), func(i int) bool { return bytes.Compare(ts[i].Largest.UserKey, key) >= 0 })
			require.Equal(t, want, s.Find(ts, key), "key %q in %q", key, largest)
		}
	}
}

func TestSearchEmpty(t *testing.T) {
	s := NewSearch(nil)
	require.Equal(t, 0, s.Find(nil, []byte("a")))
}

// BenchmarkSearch: one level's binary search for keys like kvbench's
// ("user" and a decimal hash), over 300 tables: Find against a binary
// search of the full keys.
func BenchmarkSearch(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	keys := make([][]byte, 1<<12)
	for i := range keys {
		keys[i] = strconv.AppendUint([]byte("user"), rng.Uint64(), 10)
	}
	largest := slices.Clone(keys[:300])
	slices.SortFunc(largest, bytes.Compare)
	ts := make([]*base.TableMeta, len(largest))
	for i, k := range largest {
		ts[i] = &base.TableMeta{FileNum: uint64(i), Largest: base.InternalKey{UserKey: k}}
	}
	s := NewSearch(ts)
	b.Run("find", func(b *testing.B) {
		sum := 0
		for i := 0; b.Loop(); i++ {
			sum += s.Find(ts, keys[i&(len(keys)-1)])
		}
		require.Positive(b, sum)
	})
	b.Run("sort.Search", func(b *testing.B) {
		sum := 0
		for i := 0; b.Loop(); i++ {
			key := keys[i&(len(keys)-1)]
			sum += sort.Search(len(ts), func(i int) bool { return bytes.Compare(ts[i].Largest.UserKey, key) >= 0 })
		}
		require.Positive(b, sum)
	})
}

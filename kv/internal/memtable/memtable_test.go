package memtable

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/stretchr/testify/require"
)

func ik(k string, seq uint64, kind base.KeyKind) base.InternalKey {
	return base.InternalKey{UserKey: []byte(k), Seq: seq, Kind: kind}
}

// shapes are the two skiplist shapes a memtable takes: branching factor 4
// (memtables smaller than wideAt) and 2 (larger ones).
var shapes = []struct {
	name string
	new  func() *MemTable
}{
	{"branching=4", New},
	{"branching=2", func() *MemTable { return NewRecycled(NewRecycler(wideAt, 0)) }},
}

// TestOrderAndGet inserts random versions and checks the iteration order
// (both directions, seeks) against a sorted slice, and Get's visibility by
// sequence number, in both skiplist shapes.
func TestOrderAndGet(t *testing.T) {
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) { testOrderAndGet(t, sh.new()) })
	}
}

func testOrderAndGet(t *testing.T, m *MemTable) {
	rng := rand.New(rand.NewPCG(1, 2))
	var all []base.InternalKey
	for seq := uint64(1); seq <= 5000; seq++ {
		k := ik(fmt.Sprintf("k%03d", rng.IntN(500)), seq, base.KeyKind(rng.IntN(2)))
		m.Add(k, []byte(fmt.Sprint(seq)))
		all = append(all, k)
	}
	slices.SortFunc(all, base.CompareInternalKeys)
	require.Equal(t, len(all), m.Len())
	it := m.NewIter()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		require.Equal(t, all[i], it.Key())
		require.Equal(t, fmt.Sprint(all[i].Seq), string(it.Value()))
		i++
	}
	require.Equal(t, len(all), i)
	for ok := it.Last(); ok; ok = it.Prev() {
		i--
		require.Equal(t, all[i], it.Key())
	}
	require.Zero(t, i)
	for n := 0; n < 200; n++ {
		k := fmt.Sprintf("k%03d", rng.IntN(520))
		j := slices.IndexFunc(all, func(x base.InternalKey) bool { return string(x.UserKey) >= k })
		ok := it.SeekGE([]byte(k))
		require.Equal(t, j >= 0, ok)
		if ok {
			require.Equal(t, all[j], it.Key())
		}
		if j < 0 {
			j = len(all)
		}
		ok = it.SeekLT([]byte(k))
		require.Equal(t, j > 0, ok)
		if ok {
			require.Equal(t, all[j-1], it.Key())
		}
		// Get at a random snapshot: newest version with Seq < snap.
		snap := uint64(rng.IntN(5002))
		var want *base.InternalKey
		for x := range all {
			if string(all[x].UserKey) == k && all[x].Seq < snap {
				want = &all[x]
				break
			}
		}
		v, kind, found := m.Get([]byte(k), snap)
		require.Equal(t, want != nil, found, "key %s snap %d", k, snap)
		if found {
			require.Equal(t, want.Kind, kind)
			require.Equal(t, fmt.Sprint(want.Seq), string(v))
		}
	}
}

// TestConcurrentReaders reads while a writer inserts (run with -race):
// readers always see a sorted list and every key added before they started.
// The writer adds one entry at a time, or groups of them with AddAll.
func TestConcurrentReaders(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("AddAll=%v", grouped), func(t *testing.T) { testConcurrentReaders(t, grouped) })
	}
}

func testConcurrentReaders(t *testing.T, grouped bool) {
	m := New()
	m.groupAt = 0
	const n = 20000
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		rng := rand.New(rand.NewPCG(3, 4))
		var es []Entry
		for seq := uint64(1); seq <= n; seq++ {
			k := ik(fmt.Sprintf("k%06d", rng.IntN(n)), seq, base.KeyKindSet)
			if !grouped {
				m.Add(k, nil)
				continue
			}
			if es = append(es, Entry{Key: k}); len(es) == 37 || seq == n {
				m.AddAll(es)
				es = es[:0]
			}
		}
	}()
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				before := m.Len()
				it := m.NewIter()
				cnt := 0
				var prev base.InternalKey
				for ok := it.First(); ok; ok = it.Next() {
					if cnt > 0 && base.CompareInternalKeys(prev, it.Key()) >= 0 {
						t.Errorf("out of order: %v then %v", prev, it.Key())
						return
					}
					prev = it.Key()
					cnt++
				}
				if cnt < before {
					t.Errorf("saw %d entries, %d were added before", cnt, before)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, n, m.Len())
}

// TestConcurrentGetFindsPublished runs Gets and seeks while a writer
// inserts keys in random order: a key whose Add returned before the read
// began is always found, by Get, by SeekGE to it and by SeekLT to its
// immediate successor. (A search that ended at the last node below the key
// and then read that node's link again returned whatever a concurrent Add
// had linked there in between, a node below the key: the key seemed
// absent.) Both skiplist shapes.
func TestConcurrentGetFindsPublished(t *testing.T) {
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) { testConcurrentGetFindsPublished(t, sh.new()) })
	}
}

func testConcurrentGetFindsPublished(t *testing.T, m *MemTable) {
	var n int64 = 600000
	if testing.Short() {
		n = 200000 // CI's -race -short run
	}
	rng := rand.New(rand.NewPCG(5, 6))
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "k%08d", rng.Uint32())
	}
	var added atomic.Int64 // keys[:added] are in
	go func() {
		for i, k := range keys {
			m.Add(ik(string(k), uint64(i+1), base.KeyKindSet), k)
			added.Store(int64(i + 1))
		}
	}()
	gets, misses := 0, 0
	for c := added.Load(); c < n; c = added.Load() {
		if c == 0 {
			continue
		}
		k := keys[rng.IntN(int(c))]
		if v, _, ok := m.Get(k, math.MaxUint64); !ok || string(v) != string(k) {
			misses++
		}
		it := m.NewIter()
		if !it.SeekGE(k) || string(it.Key().UserKey) != string(k) {
			misses++
		}
		if !it.SeekLT(append(slices.Clip(k), 0)) || string(it.Key().UserKey) != string(k) {
			misses++
		}
		gets += 3
	}
	require.Zero(t, misses, "%d of %d reads missed a key added before them", misses, gets)
}

// TestBranching: a memtable that fills at wideAt bytes or more has a
// skiplist of branching factor 2 (half its nodes at least 2 high), a
// smaller one, and one without a Recycler, of factor 4 (a quarter).
func TestBranching(t *testing.T) {
	const n = 40_000
	for _, c := range []struct {
		m    *MemTable
		want float64
	}{
		{New(), 0.25},
		{NewRecycled(NewRecycler(4<<20, 0)), 0.25},
		{NewRecycled(NewRecycler(wideAt-1, 0)), 0.25},
		{NewRecycled(NewRecycler(wideAt, 0)), 0.5},
		{NewRecycled(NewRecycler(1<<30, 0)), 0.5},
	} {
		for i := range n {
			c.m.Add(ik(fmt.Sprintf("k%08d", i*7919%n), uint64(i+1), base.KeyKindSet), nil)
		}
		dir := *c.m.chunks.Load()
		tall := 0
		for r := c.m.head.link(0).Load(); r != 0; {
			nd := c.m.node(&dir, ref(r))
			if nd.height >= 2 {
				tall++
			}
			r = nd.link(0).Load()
		}
		// Binomial: 5 standard deviations of n draws.
		require.InDelta(t, c.want*n, float64(tall), 5*math.Sqrt(n*c.want*(1-c.want)))
	}
}

// TestPrefixCompare checks that comparing by the 8-byte prefix first orders
// keys exactly as base.CompareInternalKeys does, on keys of 0 to 12 bytes
// over a tiny alphabet with zero bytes (so prefixes tie, keys are prefixes
// of one another and padding meets real zeros), and that the memtable
// iterates them in that order.
func TestPrefixCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	randKey := func() []byte {
		k := make([]byte, rng.IntN(13))
		for i := range k {
			k[i] = []byte{0, 1, 0xff}[rng.IntN(3)]
		}
		return k
	}
	m := New()
	var all []base.InternalKey
	for seq := uint64(1); seq <= 20000; seq++ {
		a := base.InternalKey{UserKey: randKey(), Seq: seq, Kind: base.KeyKindSet}
		b := base.InternalKey{UserKey: randKey(), Seq: seq + 1, Kind: base.KeyKindSet}
		m.Add(a, nil)
		n := m.findGE(a) // a's own node
		require.Equal(t, a, n.key())
		require.Equal(t, base.CompareInternalKeys(a, b), compare(n, b, keyPrefix(b.UserKey)), "%x vs %x", a.UserKey, b.UserKey)
		all = append(all, a)
	}
	slices.SortFunc(all, base.CompareInternalKeys)
	it := m.NewIter()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		require.Equal(t, all[i], it.Key())
		i++
	}
	require.Equal(t, len(all), i)
}

// BenchmarkAdd measures inserting 16-byte random keys with 100-byte values
// into one memtable (a new one every 32k entries, about a 4 MiB memtable).
func BenchmarkAdd(b *testing.B) {
	value := make([]byte, 100)
	m := New()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%(1<<15) == 0 {
			m = New()
		}
		k := make([]byte, 16)
		h := uint64(i) * 0x9E3779B97F4A7C15
		for j := range 8 {
			k[j], k[8+j] = byte(h>>(8*j)), byte(h>>(8*j+3))
		}
		m.Add(base.InternalKey{UserKey: k, Seq: uint64(i + 1), Kind: base.KeyKindSet}, value)
	}
}

// BenchmarkAddLarge measures inserting 1M random keys ("user" and 16 bytes)
// with 100-byte values into one memtable of about 160 MB, a bulk load's:
// each insert's search then misses the CPU caches at most levels, so the
// skiplist's shape, more than the compare, sets its cost.
func BenchmarkAddLarge(b *testing.B) { benchAddLarge(b, 0) }

// BenchmarkAddAllLarge is BenchmarkAddLarge with the entries added 256 at
// a time by AddAll (a write batch's), whose searches overlap their cache
// misses.
func BenchmarkAddAllLarge(b *testing.B) { benchAddLarge(b, 256) }

func benchAddLarge(b *testing.B, group int) {
	for _, n := range []int{1 << 15, 1 << 17, 1 << 19, 1 << 20} {
		for _, wide := range []bool{false, true} {
			b.Run(fmt.Sprintf("n=%d/wide=%v", n, wide), func(b *testing.B) {
				value := make([]byte, 100)
				keys := make([][]byte, n)
				es := make([]Entry, n)
				for i := range keys {
					k := make([]byte, 20)
					copy(k, "user")
					h := uint64(i) * 0x9E3779B97F4A7C15
					for j := range 8 {
						k[4+j], k[12+j] = byte(h>>(8*j)), byte(h>>(8*j+3))
					}
					keys[i] = k
					es[i] = Entry{Key: base.InternalKey{UserKey: k, Seq: uint64(i + 1), Kind: base.KeyKindSet}, Value: value}
				}
				size := 1 << 20
				if wide {
					size = wideAt
				}
				for b.Loop() {
					m := NewRecycled(NewRecycler(size, 0))
					if group > 0 {
						for i := 0; i < n; i += group {
							m.AddAll(es[i:min(n, i+group)])
						}
						continue
					}
					for i, k := range keys {
						m.Add(base.InternalKey{UserKey: k, Seq: uint64(i + 1), Kind: base.KeyKindSet}, value)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/insert")
			})
		}
	}
}

// BenchmarkGet measures Get of present keys in a memtable of 32k entries
// (16-byte random keys, about a 4 MiB memtable).
func BenchmarkGet(b *testing.B) {
	const n = 1 << 15
	m := New()
	keys := make([][]byte, n)
	for i := range keys {
		k := make([]byte, 16)
		h := uint64(i) * 0x9E3779B97F4A7C15
		for j := range 8 {
			k[j], k[8+j] = byte(h>>(8*j)), byte(h>>(8*j+3))
		}
		keys[i] = k
		m.Add(base.InternalKey{UserKey: k, Seq: uint64(i + 1), Kind: base.KeyKindSet}, k)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, _, ok := m.Get(keys[i%n], n+1); !ok {
			b.Fatal("missing")
		}
	}
}

func TestRangeDels(t *testing.T) {
	m := New()
	require.Nil(t, m.RangeDels())
	require.True(t, m.Empty())
	start, end := []byte("b"), []byte("d")
	m.AddRangeDel(start, end, 5)
	start[0] = 'x' // the memtable keeps its own copy
	require.False(t, m.Empty())
	require.Zero(t, m.Len())
	require.Positive(t, m.Size())
	require.Equal(t, uint64(5), m.RangeDels().Covering([]byte("c"), 10))
	m.AddRangeDel([]byte("c"), []byte("e"), 7)
	s := m.RangeDels()
	require.Equal(t, uint64(7), s.Covering([]byte("c"), 10))
	require.Equal(t, uint64(5), s.Covering([]byte("c"), 7))
	require.Zero(t, s.Covering([]byte("e"), 10))
	require.Same(t, s, m.RangeDels(), "built once per change")

	m.Add(base.InternalKey{UserKey: []byte("c"), Seq: 6, Kind: base.KeyKindSet}, []byte("v"))
	v, kind, seq, ok := m.GetVersion([]byte("c"), 10)
	require.True(t, ok)
	require.Equal(t, []byte("v"), v)
	require.Equal(t, base.KeyKindSet, kind)
	require.Equal(t, uint64(6), seq)
}

// TestAddAll: entries added in groups (AddAll, groups of 1 to 100, many
// versions of few user keys, tombstones among them) make the same
// memtable as the same entries added one at a time, in both skiplist
// shapes: the same entries in the same order, and Get finds each.
func TestAddAll(t *testing.T) {
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			one, all := sh.new(), sh.new()
			all.groupAt = 64 << 10 // one at a time, then in groups
			rng := rand.New(rand.NewPCG(5, 6))
			var es []Entry
			for seq := uint64(1); seq <= 30_000; seq++ {
				k := ik(fmt.Sprintf("k%05d", rng.IntN(3000)), seq, base.KeyKind(rng.IntN(2)))
				v := []byte(fmt.Sprint(seq))
				if k.Kind == base.KeyKindDelete {
					v = nil
				}
				one.Add(k, v)
				es = append(es, Entry{Key: k, Value: v})
			}
			for rest := es; len(rest) > 0; {
				g := rest[:min(len(rest), 1+rng.IntN(100))]
				all.AddAll(g)
				rest = rest[len(g):]
			}
			require.Equal(t, one.Len(), all.Len())
			require.Equal(t, one.Size(), all.Size())
			a, b := one.NewIter(), all.NewIter()
			for okA, okB := a.First(), b.First(); okA || okB; okA, okB = a.Next(), b.Next() {
				require.True(t, okA && okB)
				require.Equal(t, a.Key(), b.Key())
				require.Equal(t, a.Value(), b.Value())
			}
			for _, e := range es[len(es)-500:] {
				v, kind, seq, found := all.GetVersion(e.Key.UserKey, e.Key.Seq+1)
				require.True(t, found)
				require.Equal(t, e.Key.Seq, seq)
				require.Equal(t, e.Key.Kind, kind)
				require.Equal(t, e.Value, v)
			}
		})
	}
}

// TestSplitKeys: the split keys are distinct, ascending, and cut the
// entries into parts of similar counts, in a narrow memtable and a wide
// one; a memtable of a few user keys splits only between them.
func TestSplitKeys(t *testing.T) {
	for _, size := range []int{1 << 20, wideAt} {
		m := NewRecycled(NewRecycler(size, 0))
		require.Nil(t, m.SplitKeys(4), "empty")
		const count = 200_000
		rng := rand.New(rand.NewPCG(1, uint64(size)))
		for i := range count {
			k := binary.BigEndian.AppendUint64([]byte("k"), rng.Uint64())
			m.Add(base.InternalKey{UserKey: k, Seq: uint64(i + 1), Kind: base.KeyKindSet}, nil)
		}
		require.Nil(t, m.SplitKeys(1))
		for _, n := range []int{2, 8, 64} {
			keys := m.SplitKeys(n)
			require.Len(t, keys, n-1)
			counts := make([]int, n)
			it := m.NewIter()
			for ok := it.First(); ok; ok = it.Next() {
				counts[sort.Search(len(keys), func(i int) bool { return bytes.Compare(keys[i], it.Key().UserKey) > 0 })]++
			}
			for i, c := range counts {
				require.InDelta(t, count/n, c, 0.5*count/float64(n), "size %d, part %d of %d", size, i, n)
			}
		}
	}
	m := New()
	for i := range 1000 {
		m.Add(base.InternalKey{UserKey: []byte{byte('a' + i%3)}, Seq: uint64(i + 1), Kind: base.KeyKindSet}, nil)
	}
	keys := m.SplitKeys(8)
	require.LessOrEqual(t, len(keys), 2, "three user keys: at most two cuts")
	for i := 1; i < len(keys); i++ {
		require.Negative(t, bytes.Compare(keys[i-1], keys[i]))
	}
	require.NotEmpty(t, keys)
	require.Greater(t, keys[0][0], byte('a'), "no cut before the first key")
}

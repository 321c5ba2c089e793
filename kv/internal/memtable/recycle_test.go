package memtable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/stretchr/testify/require"
)

// fill adds n random keys with values derived from them to m (sequence
// numbers from seq0) and returns the keys, sorted.
func fill(m *MemTable, rng *rand.Rand, n int, seq0 uint64) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "k%016x", rng.Uint64())
		// Values of varied lengths, some tall nodes: every slab kind.
		m.Add(ik(string(keys[i]), seq0+uint64(i), base.KeyKindSet), bytes.Repeat(keys[i][1:2], 1+i%200))
	}
	slices.SortFunc(keys, bytes.Compare)
	return keys
}

// requireHolds checks that m iterates exactly keys, each with its value.
func requireHolds(t *testing.T, m *MemTable, keys [][]byte) {
	t.Helper()
	it := m.NewIter()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		require.Less(t, i, len(keys))
		require.Equal(t, keys[i], it.Key().UserKey)
		require.Equal(t, keys[i][1], it.Value()[0])
		i++
	}
	require.Equal(t, len(keys), i)
	// Seeks walk the upper levels too.
	for j := 0; j < len(keys); j += 97 {
		require.True(t, it.SeekGE(keys[j]))
		require.Equal(t, keys[j], it.Key().UserKey)
		v, _, ok := m.Get(keys[j], 1<<40)
		require.True(t, ok)
		require.Equal(t, keys[j][1], v[0])
	}
}

// TestRecyclerReuse releases a memtable and builds the next one from its
// memory: the second holds exactly its own entries (no stale node, link or
// byte of the first shows), its inserts allocate nothing while recycled
// chunks last, and the Recycler never keeps more than its limit, nor the
// chunk of a single large entry.
func TestRecyclerReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	r := NewRecycler(4<<20, 64<<20)
	a := NewRecycled(r)
	fill(a, rng, 20000, 1)
	require.Zero(t, r.Held())
	a.Release()
	held := r.Held()
	require.Positive(t, held)

	b := NewRecycled(r)
	keys := fill(b, rng, 20000, 1)
	require.Positive(t, r.Reused())
	requireHolds(t, b, keys)
	// b took back what a had, as much as it needed.
	require.Less(t, r.Held(), held)

	// With chunks to take, an insert allocates nothing.
	b.Release()
	c := NewRecycled(r)
	key, val := make([]byte, 17), make([]byte, 100)
	seq := uint64(0)
	allocs := testing.AllocsPerRun(10000, func() {
		seq++
		copy(key, fmt.Appendf(key[:0], "k%016x", seq))
		c.Add(base.InternalKey{UserKey: key, Seq: seq, Kind: base.KeyKindSet}, val)
	})
	if !raceEnabled {
		require.Zero(t, allocs)
	}

	// A limit below one memtable's memory keeps only that much, in whole
	// chunks; a large entry's own chunk is not kept.
	small := NewRecycler(4<<20, 1<<20)
	d := NewRecycled(small)
	fill(d, rng, 20000, 1)
	d.Add(ik("large", 1<<30, base.KeyKindSet), make([]byte, small.chunkSize))
	chunks := len(*d.chunks.Load())
	require.Greater(t, chunks*small.chunkSize, 1<<20)
	d.Release()
	require.Equal(t, 1<<20, small.Held())
	for c, ok := small.free.Get(); ok; c, ok = small.free.Get() {
		require.Len(t, c, small.chunkSize)
	}
	require.Empty(t, *d.chunks.Load(), "Release leaves the memtable nothing")
}

// TestChunkSize checks the chunk size for a memtable size: a sixteenth,
// within [minChunkSize, maxChunkSize], a power of two.
func TestChunkSize(t *testing.T) {
	require.Equal(t, minChunkSize, ChunkSize(0))
	require.Equal(t, minChunkSize, ChunkSize(64<<10))
	require.Equal(t, 64<<10, ChunkSize(1<<20))
	require.Equal(t, maxChunkSize, ChunkSize(4<<20))
	require.Equal(t, maxChunkSize, ChunkSize(1<<30))
	require.Equal(t, 256<<10, maxChunkSize)
}

// TestRefReleasesAtLast checks that a memtable's memory goes to the
// Recycler at the last Unref, not before, and that a memtable without a
// Recycler releases nothing.
func TestRefReleasesAtLast(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	r := NewRecycler(4<<20, 64<<20)
	m := NewRecycled(r)
	keys := fill(m, rng, 5000, 1)
	m.Ref()
	m.Ref()
	m.Unref()
	require.Zero(t, r.Held())
	requireHolds(t, m, keys)
	m.Unref()
	require.Positive(t, r.Held())

	own := New()
	fill(own, rng, 5000, 1)
	own.Ref()
	own.Unref() // no Recycler: nothing to hand over, and no panic
	require.Nil(t, own.rec)
}

// BenchmarkAddRecycled is BenchmarkAdd with each new memtable built from
// the memory of the one before it (a Recycler), as the store does.
func BenchmarkAddRecycled(b *testing.B) {
	value := make([]byte, 100)
	r := NewRecycler(4<<20, 16<<20)
	m := NewRecycled(r)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%(1<<15) == 0 {
			m.Release()
			m = NewRecycled(r)
		}
		k := make([]byte, 16)
		h := uint64(i) * 0x9E3779B97F4A7C15
		for j := range 8 {
			k[j], k[8+j] = byte(h>>(8*j)), byte(h>>(8*j+3))
		}
		m.Add(base.InternalKey{UserKey: k, Seq: uint64(i + 1), Kind: base.KeyKindSet}, value)
	}
}

// TestChunksGrowBeforeRefsRunOut fills a memtable of 4 KiB chunks with
// entries of more than a quarter chunk, each of which takes a chunk (and
// a ref's chunk index) of its own: after growAt chunks the memtable takes
// chunks of maxChunkSize, in which such entries share chunks again, so the
// refs last (Capacity). Every entry reads back.
func TestChunksGrowBeforeRefsRunOut(t *testing.T) {
	r := NewRecycler(64<<10, 0)
	require.Equal(t, minChunkSize, r.chunkSize)
	m := NewRecycled(r)
	rng := rand.New(rand.NewPCG(11, 12))
	keys := make([][]byte, growAt+4000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "k%016x", rng.Uint64())
		m.Add(ik(string(keys[i]), uint64(i+1), base.KeyKindSet), bytes.Repeat(keys[i][1:2], 1100))
	}
	slices.SortFunc(keys, bytes.Compare)
	require.Equal(t, maxChunkSize, m.chunkSize)
	// growAt chunks of one entry each, then 4000 entries about 57 to a chunk.
	require.Less(t, len(*m.chunks.Load()), growAt+100)
	requireHolds(t, m, keys)
}

// TestArenaBytes: a memtable's arena holds its entries and the unused ends
// of its chunks: each full chunk leaves less than a quarter chunk unused
// (a larger entry takes a chunk of its own, which it fills), the current
// one less than a chunk. A Recycler takes it all on Release.
func TestArenaBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	r := NewRecycler(1<<20, 64<<20)
	m := NewRecycled(r)
	empty := m.ArenaBytes()
	require.Equal(t, int64(ChunkSize(1<<20)), empty, "the head takes the first chunk")
	fill(m, rng, 20000, 1)
	m.Add(ik("big", 1<<30, base.KeyKindSet), make([]byte, 3*ChunkSize(1<<20)))
	chunks := int64(len(*m.chunks.Load()))
	require.GreaterOrEqual(t, m.ArenaBytes(), m.Size())
	require.Less(t, m.ArenaBytes(), m.Size()+chunks*int64(ChunkSize(1<<20))/4+int64(ChunkSize(1<<20)),
		"each full chunk wastes less than the largest entry it takes, a quarter chunk")
	m.Release()
	require.Zero(t, m.ArenaBytes())
}

// TestRecyclerPrefill: Prefill keeps a memtable's worth of chunks ahead, no
// more than asked nor than the limit, and a memtable filled from them
// allocates no fresh chunk and holds exactly its entries (the prefilled
// chunks are not zero).
func TestRecyclerPrefill(t *testing.T) {
	const size = 1 << 20
	chunk := ChunkSize(size)
	want := size + 2*chunk
	r := NewRecycler(size, 3*want)
	require.Equal(t, want/chunk, r.Prefill(want))
	require.Equal(t, want, r.Held())
	require.EqualValues(t, want/chunk, r.Prefilled())
	require.Zero(t, r.Prefill(want), "already holds a memtable's worth")

	m := NewRecycled(r)
	rng := rand.New(rand.NewPCG(3, 4))
	var keys [][]byte
	for m.Size() < size {
		keys = append(keys, fill(m, rng, 100, uint64(len(keys))+1)...)
	}
	slices.SortFunc(keys, bytes.Compare)
	requireHolds(t, m, keys)
	require.Zero(t, r.Allocated(), "a memtable of the prefilled chunks allocated fresh ones")
	require.Positive(t, r.Reused())

	// The limit bounds a prefill.
	small := NewRecycler(size, 2*chunk)
	require.Equal(t, 2, small.Prefill(want))
	require.Equal(t, 2*chunk, small.Held())
}

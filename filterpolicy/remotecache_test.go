package filterpolicy

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

// countingReaderAt counts the file reads a BlockRemote makes.
type countingReaderAt struct {
	r     *strings.Reader
	reads int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.r.ReadAt(p, off)
}

// remoteBlock builds an adaptive policy's block over n keys and returns it
// with its header.
func remoteBlock(t *testing.T, name string, seed uint64, n int) ([]byte, Header) {
	t.Helper()
	wp, err := ForTable(fixedPolicy(t, name, 0), seed, nil)
	require.NoError(t, err)
	block := writeBlock(wp.NewWriter(pebble.TableFilter), n)
	require.NoError(t, wp.Err())
	h, _, err := VerifyBlock(block)
	require.NoError(t, err)
	require.True(t, h.HasRemote)
	return block, h
}

// TestRemoteCache: reads through a shared cache return what the file holds
// (two tables' chunks never taken for each other), a request whose chunks
// are cached reads no file, the cache never holds more than its capacity,
// and a chunk that fails its checksum is neither returned nor cached.
func TestRemoteCache(t *testing.T) {
	n, _ := sizes()
	blockA, hA := remoteBlock(t, "taf", 77, n)
	blockB, hB := remoteBlock(t, "aprefix", 78, n)
	const chunks = 40
	cache := NewRemoteCache(chunks * RemoteCacheChunkBytes)
	require.Equal(t, int64(chunks*RemoteCacheChunkBytes), cache.Capacity())
	require.Nil(t, NewRemoteCache(RemoteCacheChunkBytes-1))

	fileA := &countingReaderAt{r: strings.NewReader(string(blockA))}
	fileB := &countingReaderAt{r: strings.NewReader(string(blockB))}
	a, b := NewBlockRemote(fileA, 0, hA), NewBlockRemote(fileB, 0, hB)
	a.SetCache(cache)
	b.SetCache(cache)
	wantA, wantB := make([]uint64, hA.RemoteSlots), make([]uint64, hB.RemoteSlots)
	require.NoError(t, NewBlockRemote(strings.NewReader(string(blockA)), 0, hA).ReadSlots(0, wantA))
	require.NoError(t, NewBlockRemote(strings.NewReader(string(blockB)), 0, hB).ReadSlots(0, wantB))

	// The same request twice: the second reads no file.
	got := make([]uint64, 70)
	require.NoError(t, a.ReadSlots(100, got))
	require.Equal(t, wantA[100:170], got)
	require.Equal(t, 1, fileA.reads)
	clear(got)
	require.NoError(t, a.ReadSlots(100, got))
	require.Equal(t, wantA[100:170], got)
	require.Equal(t, 1, fileA.reads, "both chunks cached")
	require.Equal(t, uint64(1), a.Reads())
	// The same slots of the other table are its own.
	require.NoError(t, b.ReadSlots(100, got))
	require.Equal(t, wantB[100:170], got)
	require.Equal(t, 1, fileB.reads)

	// Random requests: always the file's words; the cache stays bounded.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		r, want := a, wantA
		if rng.IntN(2) == 0 {
			r, want = b, wantB
		}
		first := rng.IntN(len(want))
		dst := make([]uint64, 1+rng.IntN(min(100, len(want)-first)))
		require.NoError(t, r.ReadSlots(first, dst))
		require.Equal(t, want[first:first+len(dst)], dst)
		require.LessOrEqual(t, len(cache.slots), chunks)
		require.Len(t, cache.index, len(cache.slots))
	}
	require.Positive(t, cache.Hits())
	require.Positive(t, cache.Misses())
	require.Less(t, a.Reads()+b.Reads(), uint64(5000+3), "some requests served by the cache")

	// A corrupt chunk fails the read and is not cached; its neighbours
	// read before stay right.
	bad := []byte(blockA)
	bad = append([]byte(nil), bad...)
	off := hA.LocalEnd() + 8*5
	binary.LittleEndian.PutUint64(bad[off:], ^binary.LittleEndian.Uint64(bad[off:]))
	c2 := NewRemoteCache(8 * RemoteCacheChunkBytes)
	br := NewBlockRemote(strings.NewReader(string(bad)), 0, hA)
	br.SetCache(c2)
	for range 2 {
		require.ErrorIs(t, br.ReadSlots(0, make([]uint64, 10)), filter.ErrRemote)
	}
	require.Empty(t, c2.index)
	require.NoError(t, br.ReadSlots(64, got[:10]))
	require.Equal(t, wantA[64:74], got[:10])
}

// TestRemoteCacheClock: a chunk read again survives a stream of chunks read
// once, which CLOCK inserts unreferenced.
func TestRemoteCacheClock(t *testing.T) {
	n, _ := sizes()
	block, h := remoteBlock(t, "taf", 79, n)
	require.Greater(t, h.RemoteSlots/RemoteChunkSlots, 40)
	file := &countingReaderAt{r: strings.NewReader(string(block))}
	br := NewBlockRemote(file, 0, h)
	br.SetCache(NewRemoteCache(8 * RemoteCacheChunkBytes))
	one := make([]uint64, 1)
	hot := 0
	for c := 1; c < 40; c++ {
		require.NoError(t, br.ReadSlots(hot, one)) // the hot chunk, again and again
		require.NoError(t, br.ReadSlots(c*RemoteChunkSlots, one))
	}
	require.Equal(t, 40, file.reads, "the hot chunk read from the file once")
}

// TestRemoteCacheConcurrent: readers of two tables sharing a small cache,
// at once, always get the file's words (run with -race).
func TestRemoteCacheConcurrent(t *testing.T) {
	blockA, hA := remoteBlock(t, "taf", 81, 10_000)
	blockB, hB := remoteBlock(t, "aprefix", 82, 10_000)
	cache := NewRemoteCache(16 * RemoteCacheChunkBytes)
	remotes := []*BlockRemote{NewBlockRemote(strings.NewReader(string(blockA)), 0, hA), NewBlockRemote(strings.NewReader(string(blockB)), 0, hB)}
	wants := make([][]uint64, 2)
	for i, br := range remotes {
		wants[i] = make([]uint64, br.Slots())
		require.NoError(t, br.ReadSlots(0, wants[i]))
		br.SetCache(cache)
	}
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 3000 {
				i := rng.IntN(2)
				first := rng.IntN(len(wants[i]))
				dst := make([]uint64, 1+rng.IntN(min(80, len(wants[i])-first)))
				if err := remotes[i].ReadSlots(first, dst); err != nil {
					errs <- err
					return
				}
				if !slices.Equal(wants[i][first:first+len(dst)], dst) {
					errs <- fmt.Errorf("remote %d slots from %d: wrong words", i, first)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	require.Positive(t, cache.Hits())
}

// TestRemoteCacheReserve: with SetReserve the cache takes memory as its
// chunks come, a step at a time, never more than it holds plus a step and
// never more than its capacity in all, and Release gives back every part
// once.
func TestRemoteCacheReserve(t *testing.T) {
	const chunks = 1000 // 544 KB: two full steps and a part
	c := NewRemoteCache(chunks * RemoteCacheChunkBytes)
	var taken, given int64
	var calls int
	c.SetReserve(func(n int) func() {
		calls++
		taken += int64(n)
		released := false
		return func() {
			require.False(t, released, "each part released once")
			released = true
			given += int64(n)
		}
	})
	require.Zero(t, c.Reserved(), "nothing taken before a chunk")
	words := make([]uint64, RemoteChunkSlots)
	for i := range 3 * chunks { // past the capacity: evictions reuse slots
		c.put(chunkKey{remote: 1, chunk: uint32(i)}, words)
		used := int64(min(i+1, chunks)) * RemoteCacheChunkBytes
		require.GreaterOrEqual(t, c.Reserved(), used, "chunk %d", i)
		require.Less(t, c.Reserved()-used, int64(RemoteCacheReserveStep), "chunk %d", i)
		require.Equal(t, taken, c.Reserved())
	}
	require.Equal(t, c.Capacity(), c.Reserved(), "the whole capacity once full")
	require.Equal(t, 3, calls, "two steps and the rest")
	c.Release()
	require.Equal(t, taken, given)
	require.Zero(t, c.Reserved())
	c.put(chunkKey{remote: 2}, words)
	require.Equal(t, 3, calls, "nothing taken after Release")
}

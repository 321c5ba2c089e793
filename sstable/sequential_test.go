package sstable

import (
	"context"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestSequentialReader: a reader whose iterators read ahead
// (ReaderOptions.Sequential) returns what a block-at-a-time reader does,
// for a scan, for seeks back and forth and for point lookups, in far fewer
// file reads on a scan.
func TestSequentialReader(t *testing.T) {
	fs := vfs.NewMem()
	const n = 40000 // about 1.4 MB of blocks: several read-ahead windows
	writeTable(t, fs, "t.sst", mustPolicy(t, "bloom", 1), n)
	plain, err := Open(fs, "t.sst", ReaderOptions{})
	require.NoError(t, err)
	defer plain.Close()
	seq, err := Open(fs, "t.sst", ReaderOptions{Sequential: true})
	require.NoError(t, err)
	defer seq.Close()

	plainReads := plain.Metrics().DataBlockReads + plain.Metrics().IndexBlockReads
	seqReads := seq.Metrics().DataBlockReads + seq.Metrics().IndexBlockReads
	it, err := seq.NewIter(nil, nil)
	require.NoError(t, err)
	requireFullScan(t, it, n)
	pit, err := plain.NewIter(nil, nil)
	require.NoError(t, err)
	for ok := pit.First(); ok; ok = pit.Next() {
	}
	require.NoError(t, pit.Close())
	plainReads = plain.Metrics().DataBlockReads + plain.Metrics().IndexBlockReads - plainReads
	seqReads = seq.Metrics().DataBlockReads + seq.Metrics().IndexBlockReads - seqReads
	t.Logf("file reads for a full scan: %d block at a time, %d with read-ahead", plainReads, seqReads)
	require.Less(t, seqReads*10, plainReads, "read-ahead reads a window per many blocks")

	// Seeks anywhere, including back, on the same iterator.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		j := rng.IntN(n)
		require.True(t, it.SeekGE(absentKey(j)) == (j+1 < n), "seek %d", j)
		if j+1 < n {
			require.Equal(t, storedKey(j+1), it.Key().UserKey)
			require.Equal(t, value(j+1), it.Value())
		}
	}
	require.NoError(t, it.Close())
	for range 2000 {
		j := rng.IntN(n)
		v, ok, err := seq.Get(storedKey(j))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, value(j), v)
	}
}

// TestReadaheadHandle: reads inside the window, across its end, larger
// than it and past the end of the object.
func TestReadaheadHandle(t *testing.T) {
	data := make([]byte, 3*readaheadSize+100)
	for i := range data {
		data[i] = byte(i * 7)
	}
	src := &countingBytes{data: data}
	h := &readaheadHandle{r: src, size: int64(len(data))}
	ctx := context.Background()
	read := func(off, n int) []byte {
		p := make([]byte, n)
		require.NoError(t, h.ReadAt(ctx, p, int64(off)))
		require.Equal(t, data[off:off+n], p, "read %d at %d", n, off)
		return p
	}
	read(0, 100)
	read(100, 4000)
	read(readaheadSize-10, 20) // crosses the window's end: refills
	read(50, 10)               // back: refills
	require.Equal(t, 3, src.reads)
	read(0, readaheadSize) // as large as the window: straight through
	require.Equal(t, 4, src.reads)
	read(len(data)-50, 50) // the last window is short
	read(len(data)-10, 10)
	require.Equal(t, 5, src.reads)
	require.Error(t, h.ReadAt(ctx, make([]byte, 10), int64(len(data)-5)), "past the end")
	require.NoError(t, h.Close())
}

// countingBytes is an objstorage.Readable over a byte slice that counts
// its reads.
type countingBytes struct {
	data  []byte
	reads int
}

func (c *countingBytes) ReadAt(_ context.Context, p []byte, off int64) error {
	c.reads++
	if off < 0 || off+int64(len(p)) > int64(len(c.data)) {
		return io.ErrUnexpectedEOF
	}
	copy(p, c.data[off:])
	return nil
}

// TestBigBufsRecycled: a table's write buffer and a scan's read-ahead
// window go back to the free list when the table is finished and the
// iterator closed, and the next ones are taken from there; the list never
// holds more than maxBigBufs.
func TestBigBufsRecycled(t *testing.T) {
	for _, ok := bigBufs.Get(); ok; _, ok = bigBufs.Get() {
		// Empty the list: the test counts what comes back to it.
	}
	held := bigBufs.Len
	fs := vfs.NewMem()
	writeTable(t, fs, "t.sst", mustPolicy(t, "bloom", 1), 20000)
	require.Equal(t, 1, held(), "the finished table's write buffer")
	r, err := Open(fs, "t.sst", ReaderOptions{Sequential: true})
	require.NoError(t, err)
	defer r.Close()
	var its []Iterator
	for range maxBigBufs + 2 {
		it, err := r.NewIter(nil, nil)
		require.NoError(t, err)
		require.True(t, it.First()) // fills its window
		its = append(its, it)
	}
	require.Zero(t, held(), "the windows took the free buffer")
	for _, it := range its {
		requireFullScan(t, it, 20000)
		require.NoError(t, it.Close())
	}
	require.Equal(t, maxBigBufs, held())
}

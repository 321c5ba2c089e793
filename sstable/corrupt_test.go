package sstable

import (
	"io"
	"math/rand/v2"
	"testing"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func readAll(t *testing.T, fs vfs.FS, path string) []byte {
	f, err := fs.Open(path)
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return b
}

func writeAll(t *testing.T, fs vfs.FS, path string, b []byte) {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// lookupAll checks that every stored key is found and some absent keys are
// not, without error. With -short (and -race) it checks a sample: every
// 7th stored key.
func lookupAll(t *testing.T, r *Reader, n int) {
	t.Helper()
	step, absent := 1, 3000
	if testing.Short() {
		step, absent = 7, 300
	}
	for i := 0; i < n; i += step {
		v, ok, err := r.Get(storedKey(i))
		require.NoError(t, err)
		require.True(t, ok, "stored key %d reported missing", i)
		require.Equal(t, value(i), v)
	}
	for i := 0; i < absent; i++ {
		_, ok, err := r.Get(absentKey(i))
		require.NoError(t, err)
		require.False(t, ok)
	}
}

func filterPos(t *testing.T, fs vfs.FS, path string) (off, length int64, h filterpolicy.Header) {
	r, err := Open(fs, path, ReaderOptions{})
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.FilterError())
	return r.filterOff, r.filterLen, r.hdr
}

func TestCorruptFilterBlock(t *testing.T) {
	n, trials := 5000, 80
	if testing.Short() {
		n, trials = 1000, 56 // every header byte, 8 body bytes
	}
	for _, name := range []string{"bloom", "fuse", "prefix", "taf", "exaf"} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeTable(t, fs, "t.sst", mustPolicy(t, name, 11), n)
			off, _, h := filterPos(t, fs, "t.sst")
			orig := readAll(t, fs, "t.sst")
			rng := rand.New(rand.NewPCG(3, uint64(len(name))))
			for trial := 0; trial < trials; trial++ {
				b := append([]byte(nil), orig...)
				// Header bytes first, then random bytes of the local state.
				pos := off + int64(trial)
				if trial >= filterpolicy.HeaderSize {
					pos = off + filterpolicy.HeaderSize + int64(rng.IntN(h.LocalLen))
				}
				b[pos] ^= byte(1 + rng.IntN(255))
				writeAll(t, fs, "c.sst", b)
				r, err := Open(fs, "c.sst", ReaderOptions{})
				if err != nil {
					continue // a clear error is acceptable
				}
				require.ErrorIs(t, r.FilterError(), filterpolicy.ErrCorruptBlock, "flip at %d", pos-off)
				require.Nil(t, r.Filter(), "a corrupt filter block means no filter")
				lookupAll(t, r, n)
				require.NoError(t, r.Close())
			}
		})
	}
}

func TestCorruptRemote(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 8000
	}
	for _, name := range []string{"taf", "exaf", "aprefix"} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeTable(t, fs, "t.sst", mustPolicy(t, name, 12), n)
			off, length, h := filterPos(t, fs, "t.sst")
			require.True(t, h.HasRemote)
			require.Equal(t, length, int64(h.LocalEnd()+h.RemoteSize()))
			b := readAll(t, fs, "t.sst")
			// Corrupt every 64-slot chunk: each adaptation must fail.
			rng := rand.New(rand.NewPCG(4, 5))
			for c := 0; c*filterpolicy.RemoteChunkSlots < h.RemoteSlots; c++ {
				slots := min(filterpolicy.RemoteChunkSlots, h.RemoteSlots-c*filterpolicy.RemoteChunkSlots) // the last chunk may be short
				pos := off + int64(h.LocalEnd()) + int64(c*(filterpolicy.RemoteChunkSlots*8+4)) + int64(rng.IntN(slots*8))
				b[pos] ^= 0x5a
			}
			writeAll(t, fs, "c.sst", b)
			r, err := Open(fs, "c.sst", ReaderOptions{StatePath: "c.state"})
			require.NoError(t, err)
			require.NoError(t, r.FilterError(), "the local state is intact")
			lookupAll(t, r, n)
			m := r.Metrics()
			require.Positive(t, m.FalsePositiveProbes)
			require.Equal(t, m.FalsePositiveProbes, m.AdaptErrors)
			require.Zero(t, m.Adaptations)
			require.Error(t, r.LastAdaptError())
			require.NoError(t, r.Close())
		})
	}
}

func TestCorruptStateFile(t *testing.T) {
	n, trials := 8000, 60
	if testing.Short() {
		n, trials = 2000, 12
	}
	for _, name := range adaptivePolicies(t) {
		t.Run(name, func(t *testing.T) { corruptStateFile(t, name, n, trials) })
	}
}

// corruptStateFile damages the adaptive state file of a table of policy
// name in trials ways; every reopen must report ErrStateCorrupt and find
// every key (the pristine filter is used).
func corruptStateFile(t *testing.T, name string, n, trials int) {
	fs := vfs.NewMem()
	writeTable(t, fs, "t.sst", mustPolicy(t, name, 13), n)
	writeTable(t, fs, "u.sst", mustPolicy(t, name, 14), n)
	adaptSome := func(path, state string) {
		r, err := Open(fs, path, ReaderOptions{StatePath: state})
		require.NoError(t, err)
		for i := 0; i < 20000; i++ {
			_, _, err := r.Get(absentKey(i))
			require.NoError(t, err)
		}
		require.Positive(t, r.Metrics().Adaptations)
		require.NoError(t, r.Close())
	}
	adaptSome("t.sst", "t.state")
	adaptSome("u.sst", "u.state")
	good := readAll(t, fs, "t.state")

	open := func() *Reader {
		r, err := Open(fs, "t.sst", ReaderOptions{StatePath: "t.state"})
		require.NoError(t, err)
		return r
	}
	r := open()
	require.NoError(t, r.StateError())
	require.NoError(t, r.Close())

	// Another table's state file is rejected.
	writeAll(t, fs, "t.state", readAll(t, fs, "u.state"))
	r = open()
	require.ErrorIs(t, r.StateError(), ErrStateCorrupt)
	require.Contains(t, r.StateError().Error(), "another table")
	lookupAll(t, r, n)
	require.NoError(t, r.Close())

	rng := rand.New(rand.NewPCG(6, 7))
	for trial := 0; trial < trials; trial++ {
		b := append([]byte(nil), good...)
		switch trial % 3 {
		case 0:
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		case 1:
			b = b[:rng.IntN(len(b))]
		case 2:
			b = append(b, 0)
		}
		writeAll(t, fs, "t.state", b)
		r := open()
		require.ErrorIs(t, r.StateError(), ErrStateCorrupt, "trial %d", trial)
		lookupAll(t, r, n)
		require.NoError(t, r.Close())
	}
}

func TestCorruptDataBlock(t *testing.T) {
	n := 5000
	fs := vfs.NewMem()
	writeTable(t, fs, "t.sst", mustPolicy(t, "none", 1), n)
	b := readAll(t, fs, "t.sst")
	b[100] ^= 0xff // inside the first data block
	writeAll(t, fs, "c.sst", b)
	r, err := Open(fs, "c.sst", ReaderOptions{})
	require.NoError(t, err)
	defer r.Close()
	_, _, err = r.Get(storedKey(0))
	require.ErrorIs(t, err, ErrCorrupt)
}

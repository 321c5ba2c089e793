package directio

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// writeRandom writes n random bytes to path and returns them.
func writeRandom(t *testing.T, path string, n int) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return b
}

// TestReadAtMatchesFile reads a table at random offsets and lengths
// (aligned or not, across the end, past it) in both modes: the bytes and
// the io.EOF at the end are those of a plain file, and every read is
// counted; other files pass through uncounted.
func TestReadAtMatchesFile(t *testing.T) {
	for _, direct := range []bool{false, true} {
		if direct && !supported {
			continue
		}
		dir := t.TempDir()
		size := 3*Align*7 + 123 // ends inside a block
		want := writeRandom(t, filepath.Join(dir, "000001.sst"), size)
		writeRandom(t, filepath.Join(dir, "MANIFEST-000001"), 100)
		fs, err := New(vfs.Default, direct, nil)
		require.NoError(t, err)
		require.Equal(t, direct, fs.Direct())
		f, err := fs.Open(filepath.Join(dir, "000001.sst"))
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(2, 3))
		reads := uint64(0)
		for i := 0; i < 2000; i++ {
			off := rng.IntN(size + 10)
			n := 1 + rng.IntN(3*Align)
			if i%5 == 0 {
				off &^= Align - 1 // aligned starts too
			}
			p := make([]byte, n)
			got, err := f.ReadAt(p, int64(off))
			reads++
			wantN := max(0, min(n, size-off))
			require.Equal(t, wantN, got, "off %d len %d", off, n)
			require.Equal(t, want[min(off, size):min(off, size)+wantN], p[:got])
			if wantN < n {
				require.ErrorIs(t, err, io.EOF, "off %d len %d", off, n)
			} else {
				require.NoError(t, err)
			}
		}
		all, err := io.ReadAll(f)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, all), "sequential Read")
		require.NoError(t, f.Close())
		require.Greater(t, fs.Stats().Reads.Load(), reads, "ReadAt and Read counted")

		before := fs.Stats().Reads.Load()
		m, err := fs.Open(filepath.Join(dir, "MANIFEST-000001"))
		require.NoError(t, err)
		_, err = m.ReadAt(make([]byte, 10), 0)
		require.NoError(t, err)
		require.NoError(t, m.Close())
		require.Equal(t, before, fs.Stats().Reads.Load(), "not a table: not counted")
	}
}

// TestDirectBytesAreAlignedSpans: a direct read reads the aligned span
// around what it was asked (what the device reads), a buffered one what
// it was asked.
func TestDirectBytesAreAlignedSpans(t *testing.T) {
	if !supported {
		t.Skip("no O_DIRECT here")
	}
	dir := t.TempDir()
	writeRandom(t, filepath.Join(dir, "t.sst"), 8*Align)
	for _, direct := range []bool{false, true} {
		fs, err := New(vfs.Default, direct, nil)
		require.NoError(t, err)
		f, err := fs.Open(filepath.Join(dir, "t.sst"))
		require.NoError(t, err)
		_, err = f.ReadAt(make([]byte, 100), Align-50) // crosses a block boundary
		require.NoError(t, err)
		require.NoError(t, f.Close())
		want := uint64(100)
		if direct {
			want = 2 * Align
		}
		require.Equal(t, want, fs.Stats().Bytes.Load(), "direct=%v", direct)
	}
}

func TestAlignedBuffers(t *testing.T) {
	for _, n := range []int{1, Align - 1, Align, Align + 1, 5 * Align, 9 << 20} {
		b := getBuffer(n)
		require.Len(t, b.b, n)
		require.Zero(t, uintptr(unsafePointer(b.b))%Align, "n=%d", n)
		putBuffer(b)
	}
}

func unsafePointer(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

package sstable

import (
	"path/filepath"
	"testing"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestVerify: Verify reads a sound table of every policy whole, and names
// the damage when a byte of its data, its filter block or its remote
// section is flipped.
func TestVerify(t *testing.T) {
	const n = 5000
	for _, name := range filterpolicy.Names() {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeTable(t, fs, "t.sst", mustPolicy(t, name, 3), n)
			r, err := Open(fs, "t.sst", ReaderOptions{})
			require.NoError(t, err)
			res, err := r.Verify()
			require.NoError(t, err)
			require.Equal(t, uint64(n), res.Keys)
			require.Equal(t, storedKey(0), res.Smallest)
			require.Equal(t, storedKey(n-1), res.Largest)
			props, err := r.Properties()
			require.NoError(t, err)
			require.Equal(t, uint64(n), props.NumEntries)
			if filterpolicy.Adapts(mustPolicy(t, name, 3)) {
				require.Positive(t, res.RemoteSlots)
			}
			require.Equal(t, res.RemoteSlots > 0, r.RemoteBytes() > 0)
			require.GreaterOrEqual(t, r.RemoteBytes(), uint64(8*res.RemoteSlots))
			require.NoError(t, r.Close())

			// A flipped byte in a data block.
			b := readAll(t, fs, "t.sst")
			b[100] ^= 0xff
			writeAll(t, fs, "bad.sst", b)
			r, err = Open(fs, "bad.sst", ReaderOptions{})
			if err == nil {
				_, err = r.Verify()
				r.Close()
			}
			require.ErrorIs(t, err, ErrCorrupt)
			require.Contains(t, err.Error(), "bad.sst")

			// A flipped byte in the filter block's remote section, or in
			// its local state (the reader falls back to no filter, and
			// Verify reports it).
			if name == "none" {
				return
			}
			off, length, h := filterPos(t, fs, "t.sst")
			at := off + int64(h.LocalEnd()) + 10
			if h.RemoteSlots == 0 {
				at = off + length/2
			}
			b = readAll(t, fs, "t.sst")
			b[at] ^= 0xff
			writeAll(t, fs, "bad2.sst", b)
			r, err = Open(fs, "bad2.sst", ReaderOptions{})
			require.NoError(t, err)
			_, err = r.Verify()
			require.ErrorIs(t, err, ErrCorrupt, "flip at %d of filter block [%d, +%d)", at, off, length)
			require.Contains(t, err.Error(), "bad2.sst")
			require.NoError(t, r.Close())
		})
	}
}

// TestHistorySaved: the adaptive state file keeps the filter's history,
// and a reader that loads it adds its own counts.
func TestHistorySaved(t *testing.T) {
	for _, name := range adaptivePolicies(t) {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeTable(t, fs, "t.sst", mustPolicy(t, name, 9), 20000)
			state := filepath.Join("t.fstate")
			var want FilterHistory
			for session := 0; session < 2; session++ {
				r, err := Open(fs, "t.sst", ReaderOptions{StatePath: state})
				require.NoError(t, err)
				require.Equal(t, want, r.History(), "session %d starts from the saved history", session)
				for i := 0; i < 20000; i++ {
					_, _, err := r.Get(absentKey(i + 20000*session))
					require.NoError(t, err)
				}
				m := r.Metrics()
				require.Positive(t, m.FalsePositiveProbes)
				want.Adaptations += m.Adaptations
				want.Rebuilds += m.Rebuilds
				want.FalsePositives += m.FalsePositiveProbes
				require.Equal(t, want, r.History())
				require.NoError(t, r.Close())
			}
		})
	}
}

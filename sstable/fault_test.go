package sstable

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// TestStateWriteFailures injects I/O errors into each step of the atomic
// state write: SaveState fails with the error, no temp file is left, and
// the previously saved state still loads.
func TestStateWriteFailures(t *testing.T) {
	n := 5000
	var failKind atomic.Int32
	failKind.Store(-1)
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if errorfs.OpKind(failKind.Load()) == op.Kind && strings.Contains(op.Path, "t.state") {
			return errorfs.ErrInjected
		}
		return nil
	}))
	writeTable(t, fs, "t.sst", mustPolicy(t, "taf", 31), n)
	r, err := Open(fs, "t.sst", ReaderOptions{StatePath: "t.state"})
	require.NoError(t, err)
	adaptRange := func(r *Reader, lo, hi int) {
		for i := lo; i < hi; i++ {
			_, ok, err := r.Get(absentKey(i))
			require.NoError(t, err)
			require.False(t, ok)
		}
	}
	adaptRange(r, 0, 20000)
	require.NoError(t, r.SaveState())
	saved := filterAnswers(r, absentKeys(0, 20000))

	for _, kind := range []errorfs.OpKind{errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileSync, errorfs.OpRename} {
		adaptRange(r, 20000*(int(kind)+2), 20000*(int(kind)+3)) // new adaptations to save
		failKind.Store(int32(kind))
		require.ErrorIs(t, r.SaveState(), errorfs.ErrInjected, "op %d", kind)
		failKind.Store(-1)
		_, err := fs.Stat("t.state.tmp")
		require.Error(t, err, "temp file left behind after failed op %d", kind)

		// A second reader of the same table sees the last good state.
		r2, err := Open(fs, "t.sst", ReaderOptions{StatePath: "t.state"})
		require.NoError(t, err)
		require.NoError(t, r2.StateError())
		require.Equal(t, saved, filterAnswers(r2, absentKeys(0, 20000)))
		checkAllStored(t, r2, n)
		r2.opts.StatePath = "" // do not overwrite with its own state
		require.NoError(t, r2.Close())
	}
	require.NoError(t, r.Close())
}

func absentKeys(lo, hi int) [][]byte {
	out := make([][]byte, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, absentKey(i))
	}
	return out
}

// TestRemoteReadFailures makes every read of the remote section fail: the
// adaptations fail and are counted, every Get still answers right.
func TestRemoteReadFailures(t *testing.T) {
	n := 10000
	var remoteStart, remoteEnd atomic.Int64
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileReadAt && strings.HasSuffix(op.Path, "t.sst") && op.Offset >= remoteStart.Load() && op.Offset < remoteEnd.Load() {
			return errorfs.ErrInjected
		}
		return nil
	}))
	writeTable(t, fs, "t.sst", mustPolicy(t, "exaf", 32), n)
	off, _, h := filterPos(t, fs, "t.sst")
	remoteStart.Store(off + int64(h.LocalEnd()))
	remoteEnd.Store(off + int64(h.LocalEnd()+h.RemoteSize()))
	r, err := Open(fs, "t.sst", ReaderOptions{})
	require.NoError(t, err)
	for i := 0; i < 30000; i++ {
		_, ok, err := r.Get(absentKey(i))
		require.NoError(t, err)
		require.False(t, ok)
	}
	checkAllStored(t, r, n)
	m := r.Metrics()
	require.Positive(t, m.AdaptErrors)
	require.Equal(t, m.FalsePositiveProbes, m.AdaptErrors)
	require.ErrorIs(t, r.LastAdaptError(), errorfs.ErrInjected)
	require.NoError(t, r.Close())
}

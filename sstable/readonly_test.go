package sstable

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// TestStateReadOnly: a Reader opened with StateReadOnly loads the saved
// adaptive state (its filter answers exactly as the one that saved it),
// keeps adapting in memory, and never writes a state file: SaveState fails
// with ErrReadOnlyState, Close succeeds, and no write operation reaches a
// state path (the file stays byte-for-byte the same).
func TestStateReadOnly(t *testing.T) {
	n, absent := 20_000, 40_000
	if testing.Short() {
		n, absent = 8000, 16_000
	}
	var stateWrites atomic.Int64
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.Contains(op.Path, ".state") {
			stateWrites.Add(1)
		}
		return nil
	}))
	writeTable(t, fs, "t.sst", mustPolicy(t, "taf", 41), n)

	// A read-write Reader adapts to the false positives of absent keys and
	// saves its state on Close.
	r, err := Open(fs, "t.sst", ReaderOptions{StatePath: "t.state"})
	require.NoError(t, err)
	var fps [][]byte
	for i := 0; i < absent; i++ {
		before := r.Metrics().FalsePositiveProbes
		_, ok, err := r.Get(absentKey(i))
		require.NoError(t, err)
		require.False(t, ok)
		if r.Metrics().FalsePositiveProbes > before {
			fps = append(fps, absentKey(i))
		}
	}
	require.NotEmpty(t, fps)
	answers := filterAnswers(r, fps)
	require.NoError(t, r.Close())
	saved := readAll(t, fs, "t.state")
	require.Positive(t, stateWrites.Load(), "the read-write Reader saved its state")

	// The read-only Reader starts from that state.
	stateWrites.Store(0)
	ro := ReaderOptions{StatePath: "t.state", StateReadOnly: true}
	r, err = Open(fs, "t.sst", ro)
	require.NoError(t, err)
	require.NoError(t, r.StateError())
	require.Equal(t, answers, filterAnswers(r, fps), "read-only Reader must load the saved state")
	requireFixed(t, r, fps, 0.9) // (the few unfixed adapt in memory)
	checkAllStored(t, r, n)
	// New false positives still adapt, in memory only.
	for i := absent; i < 2*absent; i++ {
		_, ok, err := r.Get(absentKey(i))
		require.NoError(t, err)
		require.False(t, ok)
	}
	require.Positive(t, r.Metrics().Adaptations)
	require.ErrorIs(t, r.SaveState(), ErrReadOnlyState)
	require.NoError(t, r.Close())
	require.ErrorIs(t, r.SaveState(), ErrClosed)
	require.Zero(t, stateWrites.Load(), "a read-only Reader wrote to a state path")
	require.Equal(t, saved, readAll(t, fs, "t.state"), "state file changed")
	_, err = fs.Stat("t.state.tmp")
	require.Error(t, err)

	// Without a state file: the pristine filter, and still nothing written.
	r, err = Open(fs, "t.sst", ReaderOptions{StatePath: "other.state", StateReadOnly: true})
	require.NoError(t, err)
	require.ErrorIs(t, r.StateError(), ErrNoState)
	for _, k := range fps[:min(len(fps), 100)] {
		_, ok, err := r.Get(k)
		require.NoError(t, err)
		require.False(t, ok)
	}
	require.ErrorIs(t, r.SaveState(), ErrReadOnlyState)
	require.NoError(t, r.Close())
	_, err = fs.Stat("other.state")
	require.Error(t, err, "a read-only Reader created its state file")
	require.Zero(t, stateWrites.Load())

	// StateReadOnly needs a state file to read.
	_, err = Open(fs, "t.sst", ReaderOptions{StateReadOnly: true})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

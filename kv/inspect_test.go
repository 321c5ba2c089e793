package kv

import (
	"fmt"
	"strings"
	"testing"

	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// inspectStore writes a store with tables in L0 and L6 (one holding a
// range tombstone) whose adaptive filters have fixed false positives, and
// closes it (the states saved).
func inspectStore(t *testing.T, fs vfs.FS) {
	db, err := Open("db", &Options{FS: fs, FilterPolicy: "aprefix", KnownNegatives: -1})
	require.NoError(t, err)
	for i := 0; i < 4000; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%05d", 2*i), []byte("v"), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	for i := 0; i < 100; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%05d", 2*i+1), []byte("w"), NoSync))
	}
	require.NoError(t, db.DeleteRange([]byte("k00300"), []byte("k00400"), NoSync))
	require.NoError(t, db.Flush())
	for i := 0; i < 4000; i++ {
		_, _ = db.Get(fmt.Appendf(nil, "k%05d!", 2*i)) // absent: false positives get fixed
	}
	db.tc.waitFixes()
	require.Positive(t, db.Metrics().Adaptations)
	require.NoError(t, db.Close())
}

func TestTables(t *testing.T) {
	fs := vfs.NewMem()
	inspectStore(t, fs)
	db, err := Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	ts, err := db.Tables()
	require.NoError(t, err)
	require.Len(t, ts, 2)
	l0, l6 := ts[0], ts[1]
	require.Equal(t, 0, l0.Level)
	require.Equal(t, 6, l6.Level)
	require.True(t, l0.RangeDels)
	require.False(t, l6.RangeDels)
	require.Equal(t, uint64(100), l0.Keys)
	require.Equal(t, uint64(4000), l6.Keys)
	require.Equal(t, "k00001", string(l0.Smallest))
	require.Equal(t, "k00400", string(l0.Largest), "a range tombstone's end bounds the table")
	for _, st := range ts {
		require.Equal(t, "aprefix", st.FilterKind)
		require.Positive(t, st.FilterBytes)
		require.InDelta(t, float64(8*st.FilterBytes)/float64(st.FilterKeys), st.BitsPerKey, 1e-9)
		require.Positive(t, st.RemoteBytes)
		require.NoError(t, st.StateError)
	}
	// The fixes of the closed session were saved with the states.
	require.Positive(t, l6.History.Adaptations+l0.History.Adaptations)
	require.Positive(t, l6.History.FalsePositives)
}

func TestCheck(t *testing.T) {
	fs := vfs.NewMem()
	inspectStore(t, fs)
	db, err := Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	rep, err := db.Check()
	require.NoError(t, err)
	require.Equal(t, 2, rep.Tables)
	require.Equal(t, uint64(4100), rep.Keys)
	require.Positive(t, rep.RemoteSlots)
	ts, err := db.Tables()
	require.NoError(t, err)
	require.NoError(t, db.Close())

	damage := func(name string, off int) {
		path := fs.PathJoin("db", name)
		data, err := readFile(fs, path)
		require.NoError(t, err)
		if off < 0 {
			off += len(data)
		}
		data[off] ^= 0xff
		rewriteFile(t, fs, path, data)
	}
	// One flipped byte in the L6 table's data: Check names the table (Open
	// does not read the data blocks).
	table := tableFileName(ts[1].FileNum)
	damage(table, 200)
	db, err = Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	_, err = db.Check()
	require.ErrorIs(t, err, ErrCorruption)
	require.Contains(t, err.Error(), table)
	require.NoError(t, db.Close())
	damage(table, 200) // repaired

	// A manifest whose remote section size disagrees with the table's.
	db, err = Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	db.mu.current.Levels[6][0].RemoteSize++
	_, err = db.Check()
	require.ErrorIs(t, err, ErrCorruption)
	require.ErrorContains(t, err, "remote section")
	db.mu.current.Levels[6][0].RemoteSize--
	require.NoError(t, db.Close())

	// A damaged adaptive state file.
	state := stateFileName(ts[1].FileNum)
	damage(state, 40)
	db, err = Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	_, err = db.Check()
	require.ErrorIs(t, err, ErrCorruption)
	require.ErrorIs(t, err, sstable.ErrStateCorrupt)
	require.Contains(t, err.Error(), state)
	require.NoError(t, db.Close())
}

func TestReadManifest(t *testing.T) {
	fs := vfs.NewMem()
	inspectStore(t, fs)
	name, edits, err := ReadManifest(fs, "db")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(name, "MANIFEST-"))
	require.NotEmpty(t, edits)
	first := edits[0]
	require.True(t, first.HasLogNum && first.HasNextFileNum && first.HasLastSeq, "a manifest starts with the whole state")
	// Replaying the edits gives the live tables.
	live := map[uint64]ManifestTable{}
	for _, e := range edits {
		for _, d := range e.Deleted {
			delete(live, d.FileNum)
		}
		for _, a := range e.Added {
			live[a.FileNum] = a
		}
	}
	db, err := Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	ts, err := db.Tables()
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.Len(t, live, len(ts))
	for _, st := range ts {
		a, ok := live[st.FileNum]
		require.True(t, ok)
		require.Equal(t, st.Level, a.Level)
		require.Equal(t, st.RangeDels, a.RangeDels)
		require.Equal(t, st.Size, a.Size)
		require.Equal(t, st.RemoteBytes, a.RemoteSize, "the manifest records the remote section's size")
		require.Positive(t, a.RemoteSize)
	}
	_, _, err = ReadManifest(fs, "nodb")
	require.Error(t, err)
}

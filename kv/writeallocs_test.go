package kv

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoSyncSetAllocs: a NoSync Set allocates at most once (inside Pebble's
// WAL record writer): the commit request, its batch and the group-commit
// buffers are reused from write to write.
func TestNoSyncSetAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, unmapped := range []bool{false, true} {
		db, err := Open(t.TempDir(), &Options{DisableWALMapping: unmapped})
		require.NoError(t, err)
		key, val := make([]byte, 16), make([]byte, 100)
		i := uint64(0)
		set := func() {
			i++
			binary.BigEndian.PutUint64(key, i)
			if err := db.Set(key, val, NoSync); err != nil {
				t.Fatal(err)
			}
		}
		for range 1000 { // buffers grow to their size
			set()
		}
		allocs := testing.AllocsPerRun(3000, set)
		require.NoError(t, db.Close())
		require.LessOrEqual(t, allocs, 1.0, "DisableWALMapping %v", unmapped)
	}
}

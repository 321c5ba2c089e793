package kv

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestImplicitSnapshotRacesRewriteAndCompaction runs a rewrite of a key, a
// flush and a full compaction just before a Get or NewIter pins its read
// state. Compaction keeps only the newest version of the key (an implicit
// snapshot is not registered), so a read whose sequence number was taken
// before the pin found no visible version of a key that always had one.
func TestImplicitSnapshotRacesRewriteAndCompaction(t *testing.T) {
	for _, read := range []string{"Get", "NewIter"} {
		t.Run(read, func(t *testing.T) {
			db, err := Open("db", &Options{FS: vfs.NewMem()})
			require.NoError(t, err)
			defer db.Close()
			k := []byte("k")
			require.NoError(t, db.Set(k, []byte("v1"), Sync))
			require.NoError(t, db.Flush())

			ran := false
			db.testHookBeforePin = func() {
				if ran {
					return
				}
				ran = true
				require.NoError(t, db.Set(k, []byte("v2"), Sync))
				require.NoError(t, db.Compact(nil, nil))
				require.Equal(t, 1, db.Metrics().Levels[6].NumFiles, "v1 compacted away")
			}
			var got []byte
			if read == "Get" {
				got, err = db.Get(k)
				require.NoError(t, err, "k always had a value (v1, then v2)")
			} else {
				it, err := db.NewIter(nil)
				require.NoError(t, err)
				require.True(t, it.First(), "k always had a value (v1, then v2)")
				require.Equal(t, k, it.Key())
				got = append([]byte(nil), it.Value()...)
				require.False(t, it.Next())
				require.NoError(t, it.Close())
			}
			require.True(t, ran)
			// The read began after v2's write finished: it must see v2.
			require.Equal(t, "v2", string(got))
		})
	}
}

package kv

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func TestSmoke(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, MemTableSize: 32 << 10})
	require.NoError(t, err)
	for i := 0; i < 5000; i++ {
		require.NoError(t, db.Set([]byte(fmt.Sprintf("key%06d", i)), []byte(fmt.Sprintf("val%d", i)), NoSync))
	}
	for i := 0; i < 5000; i += 3 {
		require.NoError(t, db.Delete([]byte(fmt.Sprintf("key%06d", i)), NoSync))
	}
	require.NoError(t, db.Flush())
	require.NoError(t, db.Compact(nil, nil))
	check := func(db *DB) {
		for i := 0; i < 5000; i++ {
			v, err := db.Get([]byte(fmt.Sprintf("key%06d", i)))
			if i%3 == 0 {
				require.ErrorIs(t, err, ErrNotFound)
			} else {
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("val%d", i), string(v))
			}
		}
		it, err := db.NewIter(nil)
		require.NoError(t, err)
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		require.NoError(t, it.Error())
		require.Equal(t, 5000-1667, n)
		n = 0
		for ok := it.Last(); ok; ok = it.Prev() {
			n++
		}
		require.Equal(t, 5000-1667, n)
		require.NoError(t, it.Close())
	}
	check(db)
	t.Logf("%+v", db.Metrics())
	require.NoError(t, db.Close())
	db, err = Open("db", &Options{FS: fs})
	require.NoError(t, err)
	check(db)
	require.NoError(t, db.Close())
}

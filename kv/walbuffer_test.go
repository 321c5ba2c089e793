package kv

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// TestWALBufferNoSync checks the buffered mode's promises: NoSync writes are
// readable at once and reach the OS (the WAL file) without another write,
// Close writes back what is buffered, and a reopen finds every write, the
// WAL replayed in order.
func TestWALBufferNoSync(t *testing.T) {
	fs := vfs.NewMem()
	opts := func() *Options { return &Options{FS: fs, WALBufferNoSync: true, MemTableSize: 1 << 20} }
	db, err := Open("db", opts())
	require.NoError(t, err)
	const n = 5000
	for i := 0; i < n; i++ {
		k := fmt.Appendf(nil, "key%06d", i)
		require.NoError(t, db.Set(k, crashValue(k), NoSync))
		if i%1000 == 0 {
			require.NoError(t, db.Delete(k, NoSync))
		}
	}
	v, err := db.Get([]byte("key000001"))
	require.NoError(t, err)
	require.Equal(t, crashValue([]byte("key000001")), v)
	// The write-back goroutine writes the buffer to the file on its own.
	require.Eventually(t, func() bool {
		total := int64(0)
		for _, w := range walFiles(t, fs, "db") {
			st, err := fs.Stat(fs.PathJoin("db", w))
			require.NoError(t, err)
			total += st.Size()
		}
		return total > n*30
	}, 10*time.Second, time.Millisecond, "buffered NoSync writes never reached the WAL file")
	require.NoError(t, db.Close())

	db, err = Open("db", opts())
	require.NoError(t, err)
	defer db.Close()
	for i := 0; i < n; i++ {
		k := fmt.Appendf(nil, "key%06d", i)
		v, err := db.Get(k)
		if i%1000 == 0 {
			require.ErrorIs(t, err, ErrNotFound, "key %d was deleted", i)
			continue
		}
		require.NoError(t, err, "key %d", i)
		require.Equal(t, crashValue(k), v)
	}
}

// TestWALBufferNoSyncWriteError checks that a failing background write-back
// stops the store's writes with the error instead of losing it.
func TestWALBufferNoSyncWriteError(t *testing.T) {
	var fail atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && op.Kind == errorfs.OpFileWrite && strings.HasSuffix(op.Path, ".log") {
			return errorfs.ErrInjected
		}
		return nil
	}))
	db, err := Open("db", &Options{FS: fs, WALBufferNoSync: true})
	require.NoError(t, err)
	require.NoError(t, db.Set([]byte("a"), []byte("1"), Sync))
	fail.Store(true)
	var werr error
	require.Eventually(t, func() bool {
		werr = db.Set([]byte("b"), []byte("2"), NoSync)
		return werr != nil
	}, 10*time.Second, time.Millisecond, "a WAL write-back error must fail later writes")
	require.ErrorIs(t, werr, errorfs.ErrInjected)
	fail.Store(false)
	_ = db.Close()
}

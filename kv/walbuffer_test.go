package kv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
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

// TestWALBufferOrder writes records of many sizes (some larger than the
// buffer kept for reuse) through a walBuffer, writing back at random points
// while a second goroutine also writes back, and checks that the file holds
// exactly the bytes written, in order.
func TestWALBufferOrder(t *testing.T) {
	fs := vfs.NewMem()
	f, err := fs.Create("wal", vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	b := &walBuffer{f: f}
	rng := rand.New(rand.NewPCG(7, 8))
	var want []byte
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := b.writeBack(); err != nil {
				done <- err
				return
			}
		}
	}()
	for i := 0; i < 2000; i++ {
		n := rng.IntN(200)
		if i%100 == 0 {
			n = maxWALBufferKept + rng.IntN(1000)
		}
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		_, err := b.Write(p)
		require.NoError(t, err)
		want = append(want, p...)
		if rng.IntN(10) == 0 {
			require.NoError(t, b.Flush())
		}
	}
	close(stop)
	require.NoError(t, <-done)
	require.NoError(t, b.Flush())
	require.NoError(t, f.Close())
	got, err := readFile(fs, "wal")
	require.NoError(t, err)
	require.Equal(t, len(want), len(got))
	require.True(t, bytes.Equal(want, got), "the file differs from what was written")
}

// TestWALBufferNoAliasing checks, after write-backs of small and of
// over-sized buffers, that the buffer the leader appends to never shares
// its array with the one kept for the next write-back (which a concurrent
// write-back would write to the file while the leader overwrites it).
func TestWALBufferNoAliasing(t *testing.T) {
	f, err := vfs.NewMem().Create("wal", vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	b := &walBuffer{f: f}
	shared := func() bool {
		return cap(b.cur) > 0 && cap(b.spare) > 0 && &b.cur[:1][0] == &b.spare[:1][0]
	}
	for _, n := range []int{10, 20, maxWALBufferKept + 1, 10, 10, 30, maxWALBufferKept + 5, 10, 10} {
		_, err := b.Write(make([]byte, n))
		require.NoError(t, err)
		require.NoError(t, b.writeBack())
		_, err = b.Write([]byte("x"))
		require.NoError(t, err)
		require.False(t, shared(), "after a write-back of %d bytes", n)
	}
}

// TestWALBufferAdopt: a new WAL's buffer takes over the arrays of the
// closed one's (no regrowth), never with the two arrays shared, and writes
// exactly what is appended after.
func TestWALBufferAdopt(t *testing.T) {
	fs := vfs.NewMem()
	f1, err := fs.Create("wal1", vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	old := &walBuffer{f: f1}
	for _, n := range []int{64 << 10, 128 << 10} {
		_, err := old.Write(make([]byte, n))
		require.NoError(t, err)
		require.NoError(t, old.writeBack())
	}
	require.NoError(t, f1.Close())
	f2, err := fs.Create("wal2", vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	b := &walBuffer{f: f2}
	b.adopt(old)
	require.GreaterOrEqual(t, cap(b.cur), 64<<10, "the closed WAL's buffer is reused")
	require.GreaterOrEqual(t, cap(b.spare), 64<<10)
	require.NotSame(t, &b.cur[:1][0], &b.spare[:1][0], "the two buffers share an array")
	require.Nil(t, old.cur)
	require.Nil(t, old.spare)
	want := []byte("after the rotation")
	_, err = b.Write(want)
	require.NoError(t, err)
	require.NoError(t, b.writeBack())
	require.NoError(t, f2.Close())
	got, err := readFile(fs, "wal2")
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// TestWALBufferKeptAcrossSwitch: a memtable switch hands the old WAL's
// buffers to the new WAL before the switch record is written into it, so
// that the new WAL does not grow a buffer from nothing (with a write-back
// goroutine that falls behind, that buffer grows to megabytes, copied on
// the writer's path at each doubling).
func TestWALBufferKeptAcrossSwitch(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), WALBufferNoSync: true, MemTableSize: 64 << 10})
	require.NoError(t, err)
	defer db.Close()
	// capacity is what the current WAL's two buffers hold once the
	// write-back goroutine has written everything back.
	capacity := func() int {
		b := db.wal.buf
		require.Eventually(t, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.cur) == 0
		}, 10*time.Second, time.Millisecond)
		b.writeMu.Lock()
		defer b.writeMu.Unlock()
		b.mu.Lock()
		defer b.mu.Unlock()
		return cap(b.cur) + cap(b.spare)
	}
	// Two large writes grow both buffers and fill the memtable.
	require.NoError(t, db.Set([]byte("a"), make([]byte, 40<<10), NoSync))
	capacity()
	require.NoError(t, db.Set([]byte("b"), make([]byte, 40<<10), NoSync))
	before, switches := capacity(), db.walSwitches.Load()
	require.GreaterOrEqual(t, before, 80<<10)
	require.NoError(t, db.Set([]byte("c"), []byte("v"), NoSync)) // switches first
	require.Equal(t, switches+1, db.walSwitches.Load())
	require.GreaterOrEqual(t, capacity(), before, "the new WAL's buffers are not the old one's")
}

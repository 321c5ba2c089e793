package kv

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestTouchPagesChangesNothing: touching the pages of a shared mapping
// leaves every byte as it was, also while a writer copies records into the
// same pages (the populate goroutine touches pages the WAL writer may
// reach).
func TestTouchPagesChangesNothing(t *testing.T) {
	const size = 1 << 20
	data, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_ANON)
	require.NoError(t, err)
	defer func() { require.NoError(t, syscall.Munmap(data)) }()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		copy(data[:size/2], want[:size/2])
		var wg sync.WaitGroup
		wg.Go(func() {
			// The writer: 150-byte records over the second half.
			for off := size / 2; off < size; off += 150 {
				copy(data[off:min(off+150, size)], want[off:])
			}
		})
		touchPages(data)
		wg.Wait()
		touchPages(data)
		require.Equal(t, want, data, "round %d", round)
	}
}

// presentPages counts the pages of b, a mapping, that the process's page
// table maps (the present bit of /proc/self/pagemap): a write to one of
// them does not fault.
func presentPages(t *testing.T, b []byte) (present, pages int) {
	t.Helper()
	pages = (len(b) + pageSize - 1) / pageSize
	f, err := os.Open("/proc/self/pagemap")
	require.NoError(t, err)
	defer f.Close()
	entries := make([]byte, 8*pages)
	_, err = f.ReadAt(entries, int64(uintptr(unsafe.Pointer(&b[0]))/uintptr(pageSize))*8)
	require.NoError(t, err)
	for i := range pages {
		if binary.LittleEndian.Uint64(entries[8*i:])&(1<<63) != 0 {
			present++
		}
	}
	return present, pages
}

// TestNextWALPreparedIsPopulated: a prepared WAL is ready only once its
// pages are mapped, so that the writers that take it never fault on it,
// even where populating runs late (held here 200 ms): the preparation's
// done waits for it, and so does the rotation that takes the WAL, which
// Metrics counts.
func TestNextWALPreparedIsPopulated(t *testing.T) {
	db, p := openWithPreparedWAL(t, t.TempDir(), &Options{})
	defer func() { require.NoError(t, db.Close()) }()
	require.NoError(t, p.err)
	populateDelay.Store(int64(200 * time.Millisecond))
	defer populateDelay.Store(0)

	// Rotation 2 takes the WAL prepared before the delay and prepares
	// the next one, whose populating is held.
	writeNextWALKeys(t, db, 1000, 2000)
	require.NoError(t, db.Flush())
	require.Same(t, p.w, db.wal)
	next := db.walNext
	require.NotNil(t, next)
	<-next.done
	require.NoError(t, next.err)
	require.NotNil(t, next.w.mapped, "a prepared WAL is mapped")
	present, pages := presentPages(t, next.w.mapped.data)
	require.Equal(t, pages, present, "pages of the WAL mapped once it is prepared")

	// Rotation 3 comes after the preparation: no wait. Rotation 4 comes
	// before its WAL's populating (held) ends, and waits for it.
	writeNextWALKeys(t, db, 2000, 3000)
	require.NoError(t, db.Flush())
	require.Same(t, next.w, db.wal)
	require.Zero(t, db.Metrics().WALPrepareWaits)
	next = db.walNext
	writeNextWALKeys(t, db, 3000, 4000)
	require.NoError(t, db.Flush())
	require.Same(t, next.w, db.wal)
	present, pages = presentPages(t, db.wal.mapped.data)
	require.Equal(t, pages, present, "pages of the WAL the rotation waited for")
	m := db.Metrics()
	require.EqualValues(t, 1, m.WALPrepareWaits)
	require.Greater(t, m.WALPrepareWaitTime, 50*time.Millisecond)
	requireNextWALKeysIn(t, db, 4000)
}

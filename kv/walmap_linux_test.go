package kv

import (
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"

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

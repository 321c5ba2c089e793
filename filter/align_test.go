package filter

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAlignedBytes: the slice has the length and capacity asked, is
// zeroed, and its byte at starts a cache line (the next byte does not).
func TestAlignedBytes(t *testing.T) {
	for _, n := range []int{0, 1, 47, 64, 1000, 100_000} {
		for _, at := range []int{0, 16, 48, 63, 64, 100} {
			if at > n {
				continue
			}
			for range 8 { // allocations land at different offsets
				b := AlignedBytes(n, at)
				require.Len(t, b, n)
				require.Equal(t, n, cap(b))
				require.True(t, IsAligned(b, at), "n %d at %d", n, at)
				require.False(t, IsAligned(b, at+1), "n %d at %d", n, at)
				for i, c := range b {
					require.Zero(t, c, "byte %d", i)
				}
			}
		}
	}
}

package filter

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMemRemoteReadsAndBounds(t *testing.T) {
	m := MemRemote{10, 11, 12, 13}
	dst := make([]uint64, 2)
	require.NoError(t, m.ReadSlots(1, dst))
	require.Equal(t, []uint64{11, 12}, dst)
	require.NoError(t, m.ReadSlots(4, nil))
	require.ErrorIs(t, m.ReadSlots(3, dst), ErrRemote)
	require.ErrorIs(t, m.ReadSlots(-1, dst), ErrRemote)
}

func TestNoRemoteFails(t *testing.T) {
	require.ErrorIs(t, NoRemote{}.ReadSlots(0, make([]uint64, 1)), ErrRemote)
}

func TestCodesAreDistinct(t *testing.T) {
	seen := map[Code]bool{}
	for _, c := range []Code{CodeNone, CodeBloom, CodeFuse, CodePrefix, CodeRSQF, CodeTAF, CodeExAF,
		CodeUTAF, CodeACF, CodeACFCyclic, CodeACFSwap, CodeCAF, CodeAPrefix, CodeStacked} {
		require.False(t, seen[c], "code %d assigned twice", c)
		seen[c] = true
	}
}

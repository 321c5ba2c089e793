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

// AbsentInRange keeps the negatives strictly between the first and last
// key that no key equals; MostCounted orders by count, ties by position.
func TestAbsentInRange(t *testing.T) {
	kn := func(keys ...string) []KnownNegative {
		out := make([]KnownNegative, len(keys))
		for i, k := range keys {
			out[i] = KnownNegative{Key: []byte(k), Count: uint64(len(k))}
		}
		return out
	}
	keys := func(a *AbsentInRange) []string {
		var out []string
		for _, e := range a.Kept() {
			out = append(out, string(e.Key))
		}
		return out
	}
	a := NewAbsentInRange(kn("a", "b", "bb", "c", "cc", "ccc", "d", "e"))
	for _, k := range []string{"b", "c", "d"} {
		a.Add([]byte(k))
	}
	require.Equal(t, []string{"bb", "cc", "ccc"}, keys(a), "a before the first key, b c d stored, e past the last")

	a = NewAbsentInRange(nil)
	a.Add([]byte("x"))
	require.Empty(t, a.Kept())
	a = NewAbsentInRange(kn("a", "b"))
	require.Empty(t, a.Kept(), "no key: no range")
	a.Add([]byte("c"))
	require.Empty(t, a.Kept(), "one key: nothing strictly inside")

	require.Equal(t, []int{2, 0, 1, 3}, MostCounted([]KnownNegative{{Count: 5}, {Count: 1}, {Count: 9}, {Count: 1}}))
}

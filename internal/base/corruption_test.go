package base

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCorruptionKind(t *testing.T) {
	a := CorruptionKind("a: corrupt thing")
	b := CorruptionKind("b: corrupt other thing")
	wrapped := fmt.Errorf("%w: block 3: bad checksum", a)

	require.ErrorIs(t, a, ErrCorruption)
	require.ErrorIs(t, wrapped, ErrCorruption)
	require.ErrorIs(t, wrapped, a)
	require.NotErrorIs(t, wrapped, b, "kinds stay apart")
	require.NotErrorIs(t, ErrCorruption, a, "the general error is not a specific kind")
	require.NotErrorIs(t, errors.New("a: corrupt thing"), ErrCorruption, "matching is by value, not message")
	require.Equal(t, "a: corrupt thing: block 3: bad checksum", wrapped.Error())
}

func TestCompareInternalKeys(t *testing.T) {
	k := func(u string, seq uint64, kind KeyKind) InternalKey {
		return InternalKey{UserKey: []byte(u), Seq: seq, Kind: kind}
	}
	ordered := []InternalKey{
		k("a", 9, KeyKindSet), k("a", 9, KeyKindDelete), k("a", 3, KeyKindSet),
		k("ab", 100, KeyKindSet), k("b", 1, KeyKindDelete),
	}
	for i := range ordered {
		require.Zero(t, CompareInternalKeys(ordered[i], ordered[i]))
		for j := i + 1; j < len(ordered); j++ {
			require.Equal(t, -1, CompareInternalKeys(ordered[i], ordered[j]), "%d < %d", i, j)
			require.Equal(t, 1, CompareInternalKeys(ordered[j], ordered[i]), "%d > %d", j, i)
		}
	}
}

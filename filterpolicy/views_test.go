package filterpolicy

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

// viewCount returns how many blocks p's view cache holds.
func viewCount(p Policy) int {
	n := 0
	p.(*policy).views.m.Range(func(any, any) bool { n++; return true })
	return n
}

// TestViewsOwnedByPolicy: the verified views of the blocks Pebble passes
// belong to the policy that was asked: another policy (of the same kind)
// holds none of them, a block's view is made once however often it is
// asked, and the cache is bounded (cleared past viewCacheMaxEntries).
func TestViewsOwnedByPolicy(t *testing.T) {
	a, b := fixedPolicy(t, "taf", 3), fixedPolicy(t, "taf", 3)
	blocks := make([][]byte, 5)
	for i := range blocks {
		blocks[i] = buildBlock(a, 1000+i)
	}
	for round := 0; round < 3; round++ {
		for i, block := range blocks {
			require.True(t, a.MayContain(pebble.TableFilter, block, key(i)), "no false negative")
		}
	}
	require.Equal(t, len(blocks), viewCount(a), "one view a block")
	require.Zero(t, viewCount(b), "another policy holds none")
	require.True(t, b.MayContain(pebble.TableFilter, blocks[0], key(0)))
	require.Equal(t, 1, viewCount(b))
	require.Equal(t, len(blocks), viewCount(a))

	// Past the bound the cache starts over; answers stay right.
	small := make([][]byte, viewCacheMaxEntries+1)
	c := fixedPolicy(t, "bloom", 3)
	for i := range small {
		small[i] = buildBlock(c, 1+i%7)
		require.True(t, c.MayContain(pebble.TableFilter, small[i], key(0)))
	}
	require.LessOrEqual(t, viewCount(c), viewCacheMaxEntries)
	require.Equal(t, len(blocks), viewCount(a), "other policies' caches untouched")
}

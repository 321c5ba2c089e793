package kv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestIterL0Sublevels: iterators read L0 as sublevels (one levelIter per
// sorted run). On an L0 of flushes that overlap some and not others, with
// deletes and overwrites, every positioning call, in both directions and
// within random bounds, meets a model of the writes; the L0 read has
// sublevels holding more than one table, and more tables than sublevels.
func TestIterL0Sublevels(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), L0CompactionThreshold: 64, L0StopWritesThreshold: 128})
	require.NoError(t, err)
	defer db.Close()
	model := map[string]string{}
	rng := rand.New(rand.NewPCG(11, 12))
	key := func(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }
	// Flushes over [lo, lo+span): narrow ones side by side (one sublevel),
	// wide ones over them (sublevels above).
	for f := 0; f < 24; f++ {
		lo, span := rng.IntN(900), 20+rng.IntN(80)
		if f%6 == 5 {
			lo, span = 0, 1000
		}
		for j := 0; j < 60; j++ {
			k := key(lo + rng.IntN(span))
			if rng.IntN(5) == 0 {
				require.NoError(t, db.Delete(k, NoSync))
				delete(model, string(k))
				continue
			}
			v := fmt.Sprintf("v%d.%d", f, j)
			require.NoError(t, db.Set(k, []byte(v), NoSync))
			model[string(k)] = v
		}
		require.NoError(t, db.Flush())
	}
	v := db.currentVersion()
	subs, tables := len(v.L0Sublevels), len(v.Levels[0])
	wide := slices.ContainsFunc(v.L0Sublevels, func(s []*base.TableMeta) bool { return len(s) > 1 })
	v.unref()
	require.Less(t, subs, tables, "L0 must have fewer sublevels than tables")
	require.True(t, wide, "a sublevel must hold more than one table")
	require.Greater(t, subs, 1)

	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for round := 0; round < 300; round++ {
		var lower, upper []byte
		if rng.IntN(2) == 0 {
			lower = key(rng.IntN(1000))
		}
		if rng.IntN(2) == 0 {
			upper = key(rng.IntN(1000))
		}
		var want []string
		for _, k := range keys {
			if (lower == nil || k >= string(lower)) && (upper == nil || k < string(upper)) {
				want = append(want, k)
			}
		}
		it, err := db.NewIter(&IterOptions{LowerBound: lower, UpperBound: upper})
		require.NoError(t, err)
		seek := key(rng.IntN(1000))
		pos := slices.IndexFunc(want, func(k string) bool { return k >= string(seek) })
		ok := it.SeekGE(seek)
		if rng.IntN(2) == 0 {
			pos = slices.IndexFunc(want, func(k string) bool { return k >= string(seek) }) - 1
			if pos == -2 {
				pos = len(want) - 1
			}
			ok = it.SeekLT(seek)
		}
		for step := 0; step < 30; step++ {
			if pos < 0 || pos >= len(want) {
				require.False(t, ok, "round %d step %d: bounds %q %q", round, step, lower, upper)
				break
			}
			require.True(t, ok, "round %d step %d: want %s", round, step, want[pos])
			require.Equal(t, want[pos], string(it.Key()), "round %d step %d", round, step)
			require.True(t, bytes.Equal([]byte(model[want[pos]]), it.Value()))
			if rng.IntN(3) == 0 {
				ok, pos = it.Prev(), pos-1
			} else {
				ok, pos = it.Next(), pos+1
			}
		}
		require.NoError(t, it.Close())
	}
}

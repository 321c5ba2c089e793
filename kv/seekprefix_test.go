package kv

import (
	"fmt"
	"testing"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestSeekPrefixGEWastesAsGet: SeekPrefixGE on absent keys goes through the
// filters exactly as Get does. Two stores built alike (filters with a fixed
// seed, fixes made inline) are asked the same absent keys, one with Get,
// one with an iterator's SeekPrefixGE: the filter checks, false positives
// and fixes are the same, and asking again finds the false positives fixed.
func TestSeekPrefixGEWastesAsGet(t *testing.T) {
	for _, name := range []string{"aprefix", "bloom"} {
		t.Run(name, func(t *testing.T) {
			open := func() *DB {
				p, err := filterpolicy.New(name, filterpolicy.Options{SeedSource: filterpolicy.FixedSeed(7)})
				require.NoError(t, err)
				db, err := Open("db", &Options{FS: vfs.NewMem(), Filter: p, FixInline: true, KnownNegatives: -1})
				require.NoError(t, err)
				for i := 0; i < 20000; i++ {
					require.NoError(t, db.Set(fmt.Appendf(nil, "key%06d", 2*i), []byte("v"), NoSync))
				}
				require.NoError(t, db.Compact(nil, nil))
				return db
			}
			a, b := open(), open()
			defer a.Close()
			defer b.Close()
			it, err := b.NewIter(nil)
			require.NoError(t, err)
			defer it.Close()
			var passes [2][2]Metrics
			for pass := 0; pass < 2; pass++ {
				for i := 0; i < 20000; i++ {
					k := fmt.Appendf(nil, "key%06d", 2*i+1)
					_, err := a.Get(k)
					require.ErrorIs(t, err, ErrNotFound)
					require.False(t, it.SeekPrefixGE(k))
					require.NoError(t, it.Error())
				}
				passes[pass] = [2]Metrics{a.Metrics(), b.Metrics()}
			}
			for pass, m := range passes {
				ga, sb := m[0], m[1]
				require.Equal(t, ga.Gets, sb.Gets, "pass %d", pass)
				require.Equal(t, ga.FilterChecks, sb.FilterChecks, "pass %d", pass)
				require.Equal(t, ga.FilterNegatives, sb.FilterNegatives, "pass %d", pass)
				require.Equal(t, ga.FalsePositiveProbes, sb.FalsePositiveProbes, "pass %d", pass)
				require.Equal(t, ga.Adaptations, sb.Adaptations, "pass %d", pass)
			}
			first := passes[0][1].FalsePositiveProbes
			require.Positive(t, first, "absent keys met false positives")
			second := passes[1][1].FalsePositiveProbes - first
			if name == "aprefix" {
				require.Positive(t, passes[0][1].Adaptations)
				require.Zero(t, second, "the second pass meets the false positives fixed")
			} else {
				require.Equal(t, first, second, "a static filter repeats its false positives")
			}
			// A stored key is found, with its value, and Next leaves it.
			require.True(t, it.SeekPrefixGE([]byte("key000010")))
			require.Equal(t, "v", string(it.Value()))
			require.False(t, it.Next())
			require.False(t, it.Valid())
			require.True(t, it.SeekGE([]byte("key000010")), "other positioning works after it")
			require.True(t, it.Next())
			require.Equal(t, "key000012", string(it.Key()))
		})
	}
}

func TestSeekPrefixGEBoundsAndErrors(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer db.Close()
	for _, k := range []string{"a", "b", "c"} {
		require.NoError(t, db.Set([]byte(k), []byte(k), NoSync))
	}
	require.NoError(t, db.DeleteRange([]byte("c"), []byte("d"), NoSync))
	it, err := db.NewIter(&IterOptions{LowerBound: []byte("b")})
	require.NoError(t, err)
	require.False(t, it.SeekPrefixGE([]byte("a")), "below the lower bound")
	require.True(t, it.SeekPrefixGE([]byte("b")))
	require.False(t, it.SeekPrefixGE([]byte("c")), "range-deleted")
	require.NoError(t, it.Error())
	require.False(t, it.SeekPrefixGE(nil))
	require.ErrorIs(t, it.Error(), ErrEmptyKey)
	require.True(t, it.SeekPrefixGE([]byte("b")))
	require.NoError(t, it.Error())
	require.NoError(t, it.Close())
	require.False(t, it.SeekPrefixGE([]byte("b")))
	require.ErrorIs(t, it.Error(), ErrClosed)
}

// BenchmarkSeekPrefixGE: existence checks through one iterator (Pebble's
// recommended pattern) on BenchmarkGet's store; compare with its
// Get/present and Get/absent.
func BenchmarkSeekPrefixGE(b *testing.B) {
	const n = 100_000
	db := benchDB(b, vfs.NewMem(), n)
	defer db.Close()
	it, err := db.NewIter(nil)
	require.NoError(b, err)
	defer it.Close()
	for _, c := range []struct {
		name string
		off  int
		want bool
	}{{"present", 0, true}, {"absent", 1, false}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if it.SeekPrefixGE(benchKey(2*(i%n)+c.off)) != c.want {
					b.Fatal(it.Error())
				}
			}
		})
	}
}

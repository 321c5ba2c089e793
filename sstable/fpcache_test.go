package sstable

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// fpCacheReader opens a table of n keys written with policy, with the
// false-positive cache on and a gate that lets no fix through.
func fpCacheReader(t *testing.T, policy string, n int) *Reader {
	fs := vfs.NewMem()
	writeTable(t, fs, "t.sst", mustPolicy(t, policy, 21), n)
	r, err := Open(fs, "t.sst", ReaderOptions{CacheFalsePositives: true, FixFalsePositive: func([]byte) bool { return false }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// askAbsentKeys looks up absent keys [lo, hi) and returns those that were
// false positives (a probe that found nothing).
func askAbsentKeys(t *testing.T, r *Reader, lo, hi int) (fps []int) {
	for i := lo; i < hi; i++ {
		before := r.Metrics().FalsePositiveProbes
		_, found, err := r.Get(absentKey(i))
		require.NoError(t, err)
		require.False(t, found)
		if r.Metrics().FalsePositiveProbes > before {
			fps = append(fps, i)
		}
	}
	return fps
}

// newestPerSet returns the absent keys among fps (in the order they were
// cached) that c should hold: the newest fpWays of each set.
func newestPerSet(c *fpCache, fps []int) map[int]bool {
	newest := map[int]bool{}
	perSet := map[int]int{}
	for j := len(fps) - 1; j >= 0; j-- {
		set, _ := c.locate(absentKey(fps[j]))
		if perSet[set] < fpWays {
			newest[fps[j]] = true
			perSet[set]++
		}
	}
	return newest
}

// TestFalsePositiveCache: with CacheFalsePositives a false positive the
// gate holds back enters the table's cache, and the key's next lookups
// answer absent without a probe (no fix, no remote read) unless its set
// overflowed and let it go; the cache's
// memory counts in FilterBytes; every stored key is still found, for
// every adaptive kind.
func TestFalsePositiveCache(t *testing.T) {
	n, absent := 100_000, 20_000
	if testing.Short() {
		// About 20 false positives at 0.39%: under half the cache's 128 slots.
		n, absent = 40_000, 5_000
	}
	for _, name := range adaptivePolicies(t) {
		t.Run(name, func(t *testing.T) {
			r := fpCacheReader(t, name, n)
			bytesBefore := r.Metrics().FilterBytes
			fps := askAbsentKeys(t, r, 0, absent)
			require.NotEmpty(t, fps)
			require.LessOrEqual(t, len(fps), fpCacheEntries(uint64(n))/2, "the test wants (nearly) every false positive cached")
			kept := newestPerSet(&r.tableFilter.fpCache, fps)
			m := r.Metrics()
			require.Equal(t, uint64(len(fps)), m.FalsePositivesCached)
			require.Zero(t, m.FixesDeferred, "cached, not deferred")
			require.Zero(t, m.Adaptations)
			require.Zero(t, m.RemoteReads)
			require.Greater(t, m.FilterBytes, bytesBefore, "the cache's memory counts")

			for _, i := range fps {
				require.Equal(t, kept[i], r.tableFilter.fpCache.has(absentKey(i)), "key %d: held iff among its set's newest", i)
			}
			require.Greater(t, len(kept), len(fps)*9/10, "sets rarely overflow at half the capacity")
			for i := range kept {
				require.Empty(t, askAbsentKeys(t, r, i, i+1), "cached: no probe again")
			}
			m2 := r.Metrics()
			require.Equal(t, uint64(len(kept)), m2.CachedNegatives)
			require.Equal(t, m.FilterNegatives+uint64(len(kept)), m2.FilterNegatives, "a cached answer is a negative")
			require.Equal(t, m2.FilterChecks, m2.FilterNegatives+m2.FalsePositiveProbes+m2.TruePositiveProbes)
			for i := range n {
				_, found, err := r.Get(storedKey(i))
				require.NoError(t, err)
				require.True(t, found, "no false negative: key %d", i)
			}
		})
	}
}

// TestCachedReturn: without FixReturning, every lookup the cache answers
// calls ReaderOptions.CachedReturn with its key, and nothing else does.
func TestCachedReturn(t *testing.T) {
	fs := vfs.NewMem()
	writeTable(t, fs, "t.sst", mustPolicy(t, "aprefix", 21), 40_000)
	var returned []string
	r, err := Open(fs, "t.sst", ReaderOptions{CacheFalsePositives: true, FixFalsePositive: func([]byte) bool { return false },
		CachedReturn: func(key []byte) { returned = append(returned, string(key)) }})
	require.NoError(t, err)
	defer r.Close()
	fps := askAbsentKeys(t, r, 0, 5000)
	require.NotEmpty(t, fps)
	require.Empty(t, returned, "a false positive is not a return")
	var want []string
	for _, i := range fps {
		if r.tableFilter.fpCache.has(absentKey(i)) {
			want = append(want, string(absentKey(i)))
		}
	}
	require.NotEmpty(t, want)
	require.Len(t, askAbsentKeys(t, r, 0, 5000), len(fps)-len(want), "the cache answers for the keys it holds")
	require.Equal(t, want, returned)
	require.Zero(t, r.Metrics().Adaptations)
}

// TestFalsePositiveCacheFIFO: a full set lets its oldest key go: after
// more false positives than the cache holds, a key is cached exactly when
// it is among the newest fpWays keys of its set, and the others are false
// positives again.
func TestFalsePositiveCacheFIFO(t *testing.T) {
	const n, absent = 20_000, 200_000
	r := fpCacheReader(t, "aprefix", n)
	c := &r.tableFilter.fpCache
	fps := askAbsentKeys(t, r, 0, absent)
	require.Greater(t, len(fps), 2*c.capacity, "the test wants the cache overflowed")
	require.Equal(t, uint64(len(fps)), r.Metrics().FalsePositivesCached)
	newest := newestPerSet(c, fps)
	require.Len(t, newest, c.capacity, "every set full")
	for _, i := range fps {
		require.Equal(t, newest[i], c.has(absentKey(i)), "key %d", i)
	}
	for _, i := range fps[:20] {
		if !newest[i] {
			require.Len(t, askAbsentKeys(t, r, i, i+1), 1, "let go: a false positive again")
		}
	}
}

// TestFalsePositiveCacheTags: a tag only hints; keys of one set whose tags
// are equal are told apart by their bytes: each is held while it is in the
// set, a key of the same tag that never entered is not, and taking one
// out (remove) or letting it go (FIFO) leaves the others held.
func TestFalsePositiveCacheTags(t *testing.T) {
	c := &fpCache{capacity: fpCacheMinEntries}
	c.add(absentKey(0)) // the slots and the seed
	require.True(t, c.remove(absentKey(0)))
	set0, tag0 := c.locate(absentKey(1))
	var same [][]byte // keys of set0 with tag tag0
	for i := 2; len(same) < fpWays+2; i++ {
		if set, tag := c.locate(absentKey(i)); set == set0 && tag == tag0 {
			same = append(same, absentKey(i))
		}
	}
	require.True(t, c.add(absentKey(1)))
	require.True(t, c.add(same[0]))
	require.False(t, c.add(same[0]), "held already")
	require.True(t, c.has(absentKey(1)))
	require.True(t, c.has(same[0]))
	require.False(t, c.has(same[1]), "same set and tag, never added")
	require.True(t, c.remove(absentKey(1)))
	require.False(t, c.has(absentKey(1)))
	require.False(t, c.remove(absentKey(1)))
	require.True(t, c.has(same[0]), "removing another key of its tag leaves it")
	for _, k := range same[1:] { // fills the set and lets same[0] and same[1] go
		require.True(t, c.add(k))
	}
	require.False(t, c.has(same[0]))
	require.False(t, c.has(same[1]))
	for _, k := range same[2:] {
		require.True(t, c.has(k), "%s", k)
	}
	require.Equal(t, int64(8*c.capacity+8*c.capacity/fpWays+c.capacity/fpWays)+fpWays*int64(len(same[2])+fpCacheEntryBytes), c.bytes.Load())
}

// TestFalsePositiveCacheOff: without a gate every false positive is fixed
// and nothing is cached; a static filter caches nothing either.
func TestFalsePositiveCacheOff(t *testing.T) {
	const n, absent = 20_000, 20_000
	fs := vfs.NewMem()
	writeTable(t, fs, "a.sst", mustPolicy(t, "aprefix", 3), n)
	writeTable(t, fs, "b.sst", mustPolicy(t, "bloom", 3), n)
	a, err := Open(fs, "a.sst", ReaderOptions{CacheFalsePositives: true})
	require.NoError(t, err)
	defer a.Close()
	require.NotEmpty(t, askAbsentKeys(t, a, 0, absent))
	require.Zero(t, a.Metrics().FalsePositivesCached)
	require.Positive(t, a.Metrics().Adaptations)

	b, err := Open(fs, "b.sst", ReaderOptions{CacheFalsePositives: true, FixFalsePositive: func([]byte) bool { return false }})
	require.NoError(t, err)
	defer b.Close()
	fps := askAbsentKeys(t, b, 0, absent)
	require.NotEmpty(t, fps)
	require.Len(t, askAbsentKeys(t, b, 0, absent), len(fps), "a static filter: the same false positives")
	require.Zero(t, b.Metrics().FalsePositivesCached)
}

// TestFalsePositiveCacheConcurrent: lookups of stored and absent keys on
// several goroutines while the cache fills and lets keys go; no stored key
// is ever missed (run with -race).
func TestFalsePositiveCacheConcurrent(t *testing.T) {
	n, absent := 100_000, 100_000
	if testing.Short() {
		n, absent = 20_000, 40_000
	}
	r := fpCacheReader(t, "aprefix", n)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < max(n, absent); i += 4 {
				if i < n {
					_, found, err := r.Get(storedKey(i))
					if err != nil || !found {
						t.Errorf("stored key %d: found %v, %v", i, found, err)
						return
					}
				}
				if i < absent {
					if _, found, err := r.Get(absentKey(i)); err != nil || found {
						t.Errorf("absent key %d: found %v, %v", i, found, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	require.Positive(t, r.Metrics().FalsePositivesCached)
	for i := range n {
		_, found, err := r.Get(storedKey(i))
		require.NoError(t, err)
		require.True(t, found, "no false negative: key %d", i)
	}
}

// TestFixReturning: with FixReturning a cached false positive whose key
// comes back is answered by the cache (no probe), fixed then, and leaves
// the cache; its next lookups end at the filter. A key that never comes
// back is never fixed. Fixes made by the lookup and through QueueFix
// alike; every stored key is still found, for every adaptive kind.
func TestFixReturning(t *testing.T) {
	n, absent := 100_000, 20_000
	if testing.Short() {
		n, absent = 30_000, 6_000
	}
	for _, name := range adaptivePolicies(t) {
		for _, queued := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/queued=%v", name, queued), func(t *testing.T) {
				fs := vfs.NewMem()
				writeTable(t, fs, "t.sst", mustPolicy(t, name, 22), n)
				var queue []func()
				o := ReaderOptions{CacheFalsePositives: true, FixReturning: true,
					FixFalsePositive: func([]byte) bool { return false }}
				if queued {
					o.QueueFix = func(fix func()) bool { queue = append(queue, fix); return true }
				}
				r, err := Open(fs, "t.sst", o)
				require.NoError(t, err)
				defer r.Close()

				fps := askAbsentKeys(t, r, 0, absent)
				require.NotEmpty(t, fps)
				m := r.Metrics()
				require.Equal(t, uint64(len(fps)), m.FalsePositivesCached)
				require.Zero(t, m.Adaptations, "first sights: cached, not fixed")
				require.Empty(t, queue)

				// Half the keys the cache holds come back; the others never do.
				var back, away []int
				kept := newestPerSet(&r.fpCache, fps)
				for _, i := range fps {
					switch {
					case !kept[i]:
					case len(back) <= len(away):
						back = append(back, i)
					default:
						away = append(away, i)
					}
				}
				require.NotEmpty(t, away)
				for _, i := range back {
					require.Empty(t, askAbsentKeys(t, r, i, i+1), "key %d: the cache answers", i)
					require.False(t, r.fpCache.has(absentKey(i)), "key %d: left the cache", i)
				}
				require.Len(t, queue, map[bool]int{false: 0, true: len(back)}[queued])
				for _, fix := range queue {
					fix()
				}
				m2 := r.Metrics()
				require.Equal(t, uint64(len(back)), m2.Adaptations, "one fix per returning key")
				require.Equal(t, uint64(len(back)), m2.CachedNegatives)
				unfixed := 0
				for _, i := range back {
					if r.filter.MayContain(absentKey(i)) {
						unfixed++
						continue
					}
					require.Empty(t, askAbsentKeys(t, r, i, i+1), "key %d: fixed, no probe", i)
				}
				if strings.HasPrefix(name, "acf") || name == "caf" || m2.Rebuilds > 0 {
					// A later fix may undo an earlier one: a cuckoo
					// filter's moves, caf's FIFO, a rebuilt block (see
					// TestRoundTripPolicies' bounds); most stay fixed.
					require.LessOrEqual(t, unfixed, len(back)/4+1, "of %d fixed keys", len(back))
				} else {
					require.Zero(t, unfixed, "every returning key fixed")
				}
				require.Equal(t, m2.CachedNegatives, r.Metrics().CachedNegatives, "fixed keys end at the filter")
				for _, i := range away {
					require.True(t, r.fpCache.has(absentKey(i)), "key %d: never back, still cached", i)
				}
				for i := range n {
					_, found, err := r.Get(storedKey(i))
					require.NoError(t, err)
					require.True(t, found, "no false negative: key %d", i)
				}
			})
		}
	}
}

// TestFixReturningConcurrent: goroutines ask stored keys and the same
// absent keys over and over while returning keys leave the cache and fix
// the filter under them (fixes made by the lookups); no stored key is ever
// missed and no absent key found (run with -race).
func TestFixReturningConcurrent(t *testing.T) {
	n, absent := 100_000, 20_000
	if testing.Short() {
		n, absent = 20_000, 10_000
	}
	for _, name := range []string{"aprefix", "taf"} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeTable(t, fs, "t.sst", mustPolicy(t, name, 23), n)
			r, err := Open(fs, "t.sst", ReaderOptions{CacheFalsePositives: true, FixReturning: true,
				FixFalsePositive: func([]byte) bool { return false }})
			require.NoError(t, err)
			defer r.Close()
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for round := range 3 {
						for i := g; i < max(n, absent); i += 4 {
							if i < n && (i+round)%3 == 0 {
								if _, found, err := r.Get(storedKey(i)); err != nil || !found {
									t.Errorf("stored key %d: found %v, %v", i, found, err)
									return
								}
							}
							if j := (i + round*997) % absent; i < absent {
								if _, found, err := r.Get(absentKey(j)); err != nil || found {
									t.Errorf("absent key %d: found %v, %v", j, found, err)
									return
								}
							}
						}
					}
				}()
			}
			wg.Wait()
			m := r.Metrics()
			require.Positive(t, m.FalsePositivesCached)
			require.Positive(t, m.Adaptations, "returning keys fixed")
			for i := range n {
				_, found, err := r.Get(storedKey(i))
				require.NoError(t, err)
				require.True(t, found, "no false negative: key %d", i)
			}
		})
	}
}

// TestSharedFalsePositiveCounter: readers given one counter
// (ReaderOptions.FalsePositives) add every false-positive probe of theirs
// to it, as their Metrics count them.
func TestSharedFalsePositiveCounter(t *testing.T) {
	const n, absent = 20_000, 20_000
	fs := vfs.NewMem()
	writeTable(t, fs, "a.sst", mustPolicy(t, "aprefix", 3), n)
	writeTable(t, fs, "b.sst", mustPolicy(t, "bloom", 3), n)
	var shared atomic.Uint64
	a, err := Open(fs, "a.sst", ReaderOptions{FalsePositives: &shared})
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(fs, "b.sst", ReaderOptions{FalsePositives: &shared})
	require.NoError(t, err)
	defer b.Close()
	askAbsentKeys(t, a, 0, absent)
	askAbsentKeys(t, b, 0, absent)
	fa, fb := a.Metrics().FalsePositiveProbes, b.Metrics().FalsePositiveProbes
	require.Positive(t, fa)
	require.Positive(t, fb)
	require.Equal(t, fa+fb, shared.Load())
}

// BenchmarkFalsePositiveCacheHas: lookups in full false-positive caches
// of keys they do not hold, as every "maybe" of a store whose absent keys
// never repeat asks them, and of keys they hold. The caches are those of
// 1024 tables of 16k keys (32 slots each), more than a core's L2 cache
// holds, a table chosen at random per lookup, as in a store of many
// tables.
//
//	go test ./sstable -run '^$' -bench FalsePositiveCacheHas
func BenchmarkFalsePositiveCacheHas(b *testing.B) {
	caches := make([]fpCache, 1024)
	var held, other [][]byte
	for t := range caches {
		c := &caches[t]
		c.capacity = fpCacheEntries(16 << 10)
		for i := range 4 * c.capacity {
			k := absentKey(t<<20 | i)
			c.add(k)
		}
		for len(held) < (t+1)*c.capacity/2 { // half the slots' keys, picked at random
			if k := absentKey(t<<20 | rand.IntN(4*c.capacity)); c.has(k) {
				held = append(held, k)
			}
		}
		other = append(other, absentKey(t<<20|1<<19))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		keys [][]byte
		want bool
	}{{"absent", other, false}, {"held", held, true}} {
		b.Run(tc.name, func(b *testing.B) {
			idx := make([]int, 1<<16)
			for i := range idx {
				idx[i] = rng.IntN(len(tc.keys))
			}
			per := len(tc.keys) / len(caches)
			hits := 0
			for i := 0; b.Loop(); i++ {
				j := idx[i&(len(idx)-1)]
				if caches[j/per].has(tc.keys[j]) {
					hits++
				}
			}
			if tc.want != (hits == b.N) || (!tc.want && hits > 0) {
				b.Fatalf("%d hits of %d", hits, b.N)
			}
		})
	}
}

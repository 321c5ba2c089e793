package kv

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// adaptRun loads a store with present keys, then asks the same absent keys
// rounds times and returns the false-positive probes of each round.
func adaptRun(t *testing.T, policy string, present, absent, rounds int) (perRound []uint64, final Metrics) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, FilterPolicy: policy, MemTableSize: 256 << 10, TargetFileSize: 128 << 10})
	require.NoError(t, err)
	defer db.Close()
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte("user"), uint64(i)*0x9E3779B97F4A7C15) }
	b := NewBatch()
	for i := 0; i < present; i++ {
		require.NoError(t, b.Set(key(2*i), []byte("value")))
		if b.Count() == 1000 {
			require.NoError(t, db.Apply(b, NoSync))
			b.Reset()
		}
	}
	require.NoError(t, db.Apply(b, NoSync))
	require.NoError(t, db.Compact(nil, nil))
	prev := db.Metrics().FalsePositiveProbes
	for r := 0; r < rounds; r++ {
		for i := 0; i < absent; i++ {
			_, err := db.Get(key(2*i + 1))
			require.ErrorIs(t, err, ErrNotFound)
		}
		db.tc.waitFixes() // the round's fixes land before the next round
		m := db.Metrics()
		perRound = append(perRound, m.FalsePositiveProbes-prev)
		prev = m.FalsePositiveProbes
	}
	// No false negatives after all that adapting.
	for i := 0; i < present; i += 7 {
		v, err := db.Get(stateTestKey(2 * i))
		require.NoError(t, err)
		require.Equal(t, "value", string(v))
	}
	return perRound, db.Metrics()
}

// TestAdaptivity repeats the same absent keys: with taf the false-positive
// probes fall to (near) zero after the first round, because each false
// positive is fixed when first seen; bloom pays the same probes every round.
func TestAdaptivity(t *testing.T) {
	present, absent, rounds := 50_000, 10_000, 100
	if testing.Short() {
		present, absent, rounds = 20_000, 4_000, 10
	}
	sum := func(xs []uint64) (s uint64) {
		for _, x := range xs {
			s += x
		}
		return s
	}
	taf, tm := adaptRun(t, "taf", present, absent, rounds)
	bloom, bm := adaptRun(t, "bloom", present, absent, rounds)
	t.Logf("taf:   round1 %d fp probes, rounds 2..%d total %d (%.3f/round), adaptations %d, %.2f bits/key, tables %v",
		taf[0], rounds, sum(taf[1:]), float64(sum(taf[1:]))/float64(rounds-1), tm.Adaptations, tm.FilterBitsPerKey, tm.Levels)
	t.Logf("bloom: round1 %d fp probes, rounds 2..%d total %d (%.3f/round), %.2f bits/key",
		bloom[0], rounds, sum(bloom[1:]), float64(sum(bloom[1:]))/float64(rounds-1), bm.FilterBitsPerKey)
	require.Positive(t, taf[0], "the first round must meet false positives")
	require.Positive(t, bloom[0])
	// taf: every later round costs at most 1% of the first round on average.
	require.LessOrEqual(t, float64(sum(taf[1:]))/float64(rounds-1), 0.01*float64(taf[0])+0.5)
	// Each first-round false positive is cached at its first sight and
	// fixed when the cache answers its return, unless another key's fix
	// already fixed it (two absent keys matching one stored fingerprint:
	// the filter then says absent, and the cache is never asked): those
	// are the keys cached and never answered.
	fixedBySideEffect := tm.FalsePositivesCached - tm.CachedNegatives
	require.GreaterOrEqual(t, tm.Adaptations+fixedBySideEffect, taf[0], "each first-round false positive is fixed")
	require.Less(t, fixedBySideEffect, taf[0]/4+1, "fixes made for another key are rare")
	require.LessOrEqual(t, tm.Adaptations, sum(taf), "no fix without a false positive")
	// bloom is static: the same false positives every round.
	for r, x := range bloom {
		require.Equal(t, bloom[0], x, "bloom round %d", r+1)
	}
	_ = fmt.Sprint
}

// stateTestKey is the key of record i: even i are stored, odd i absent.
func stateTestKey(i int) []byte {
	return binary.BigEndian.AppendUint64([]byte("user"), uint64(i)*0x9E3779B97F4A7C15)
}

// adaptiveStateStore opens a taf store that fixes every false positive at
// first sight (FixEvery: the rounds below count on it) and whose table
// cache holds one table (so tables are closed, and their state saved, all
// along), loads it and
// compacts it into several tables. absent is sized so a round expects
// dozens of false positives (about 0.37% of absent keys per table checked):
// a zero first round would be an e^-25 event, not a flake.
func adaptiveStateStore(t *testing.T) (fs vfs.FS, opts *Options, db *DB, present, absent int) {
	fs = vfs.NewMem()
	opts = &Options{FS: fs, FilterPolicy: "taf", MemTableSize: 64 << 10, TargetFileSize: 32 << 10, MaxOpenFiles: 1, FixRule: FixEvery}
	db, err := Open("db", opts)
	require.NoError(t, err)
	present, absent = 20_000, 20_000
	if testing.Short() {
		present, absent = 8000, 10_000
	}
	for i := 0; i < present; i++ {
		require.NoError(t, db.Set(stateTestKey(2*i), []byte("v"), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	require.Greater(t, db.Metrics().Levels[6].NumFiles, 1, "several tables, so the cache of 1 evicts")
	return fs, opts, db, present, absent
}

// fpRound asks the absent keys from..from+n once each and returns the
// false-positive probes they cost.
func fpRound(t *testing.T, db *DB, from, n int) uint64 {
	before := db.Metrics().FalsePositiveProbes
	for i := from; i < from+n; i++ {
		_, err := db.Get(stateTestKey(2*i + 1))
		require.ErrorIs(t, err, ErrNotFound)
	}
	db.tc.waitFixes() // the round's fixes land before the next round
	return db.Metrics().FalsePositiveProbes - before
}

// countStateFiles counts the adaptive state files among names.
func countStateFiles(names []string) int {
	n := 0
	for _, name := range names {
		if ft, _ := parseFileName(name); ft == fileTypeState {
			n++
		}
	}
	return n
}

// TestAdaptiveStatePersists checks that adaptations survive the table cache
// closing a table (MaxOpenFiles 1) and a restart: the state files are saved
// and loaded, so known false positives stay fixed.
func TestAdaptiveStatePersists(t *testing.T) {
	fs, opts, db, _, absent := adaptiveStateStore(t)
	first := fpRound(t, db, 0, absent)
	require.Positive(t, first)
	require.LessOrEqual(t, fpRound(t, db, 0, absent), first/10+1, "after eviction")
	require.NoError(t, db.Close())
	names, err := fs.List("db")
	require.NoError(t, err)
	require.Positive(t, countStateFiles(names), "adaptive state files saved")
	db, err = Open("db", opts)
	require.NoError(t, err)
	defer db.Close()
	again := fpRound(t, db, 0, absent)
	t.Logf("first round %d false-positive probes, after restart %d", first, again)
	require.LessOrEqual(t, again, first/10+1, "after restart")
}

// TestReadOnlyKeepsAdaptiveState: a store adapts to repeated absent keys and
// closes; reopened ReadOnly, it loads the saved adaptive state, so those
// keys cost (almost) no false-positive probes, while new false positives
// adapt in memory only (until the table cache closes the table): after the
// read-only session (whose table cache of 1 closes tables all along) every
// file, state files included, is byte-for-byte unchanged.
func TestReadOnlyKeepsAdaptiveState(t *testing.T) {
	fs, opts, db, present, absent := adaptiveStateStore(t)
	first := fpRound(t, db, 0, absent)
	require.Positive(t, first)
	require.NoError(t, db.Close())

	files := func() map[string][]byte {
		names, err := fs.List("db")
		require.NoError(t, err)
		out := make(map[string][]byte, len(names))
		for _, n := range names {
			f, err := fs.Open(fs.PathJoin("db", n))
			require.NoError(t, err)
			b, err := io.ReadAll(f)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			out[n] = b
		}
		return out
	}
	before := files()
	require.Positive(t, countStateFiles(slices.Collect(maps.Keys(before))), "adaptive state files saved")

	ro := *opts
	ro.ReadOnly = true
	db, err := Open("db", &ro)
	require.NoError(t, err)
	again := fpRound(t, db, 0, absent)
	fresh := fpRound(t, db, absent, absent) // new absent keys: false positives, adapted in memory
	m := db.Metrics()
	t.Logf("read-write first round %d false-positive probes; read-only: same keys %d, new keys %d, %d adaptations",
		first, again, fresh, m.Adaptations)
	// Without the saved state the read-only store would pay about first
	// again (a pristine filter repeats its false positives).
	require.LessOrEqual(t, again, first/10+1, "read-only store forgot the saved adaptations")
	require.Positive(t, fresh)
	require.Positive(t, m.Adaptations, "read-only filters still adapt in memory")
	for i := 0; i < present; i += 11 {
		v, err := db.Get(stateTestKey(2 * i))
		require.NoError(t, err)
		require.Equal(t, "v", string(v))
	}
	require.NoError(t, db.Close())
	require.Equal(t, before, files(), "a read-only session changed files")
}

// TestRemoteCacheSavesReads: aprefix's fix reads its bin's two index words,
// then the bin's words. With the remote cache (the default) the index
// chunks stay cached, so a fix costs at most about one file read (none when
// its bin's words were read before); without it
// (RemoteCacheSize < 0) two. Every absent key is asked once, so each fix
// is of a new key.
func TestRemoteCacheSavesReads(t *testing.T) {
	readsPerFix := map[bool]float64{}
	for _, cached := range []bool{false, true} {
		opts := &Options{FS: vfs.NewMem(), FilterPolicy: "aprefix", FixInline: true, KnownNegatives: -1}
		if !cached {
			opts.RemoteCacheSize = -1
		}
		db, err := Open("db", opts)
		require.NoError(t, err)
		const n = 50_000
		for i := range n {
			require.NoError(t, db.Set(stateTestKey(i), []byte("v"), NoSync))
		}
		require.NoError(t, db.Compact(nil, nil))
		m0 := db.Metrics()
		for i := range 300_000 {
			_, err := db.Get(stateTestKey(n + i))
			require.ErrorIs(t, err, ErrNotFound)
		}
		m := db.Metrics()
		fixes := m.Adaptations - m0.Adaptations
		require.Greater(t, fixes, uint64(300), "about 0.4%% of absent Gets are false positives")
		readsPerFix[cached] = float64(m.RemoteReads-m0.RemoteReads) / float64(fixes)
		if cached {
			require.Positive(t, m.RemoteCacheHits)
		} else {
			require.Zero(t, m.RemoteCacheHits+m.RemoteCacheMisses)
		}
		for i := range n {
			_, err := db.Get(stateTestKey(i))
			require.NoError(t, err)
		}
		require.NoError(t, db.Close())
	}
	t.Logf("remote file reads per fix: %.2f without the cache, %.2f with it", readsPerFix[false], readsPerFix[true])
	require.GreaterOrEqual(t, readsPerFix[false], 1.95)
	require.LessOrEqual(t, readsPerFix[true], 1.3)
}

// TestReadCounts checks the cheap counters against Metrics on a store
// whose table cache closes its readers all along (their counts move to
// the cache's sum of closed readers): read around each Get, the moves of
// ReadCounts add up to the moves of Metrics.
func TestReadCounts(t *testing.T) {
	_, _, db, _, absent := adaptiveStateStore(t)
	defer db.Close()
	m0, c0 := db.Metrics(), db.ReadCounts()
	require.Equal(t, m0.Gets, c0.Gets)
	require.Equal(t, m0.FalsePositiveProbes, c0.FalsePositiveProbes)
	var fps, fpGets uint64
	for i := range absent {
		before := db.ReadCounts()
		_, err := db.Get(stateTestKey(2*i + 1))
		require.ErrorIs(t, err, ErrNotFound)
		after := db.ReadCounts()
		require.Equal(t, before.Gets+1, after.Gets)
		if d := after.FalsePositiveProbes - before.FalsePositiveProbes; d > 0 {
			fps += d
			fpGets++
		}
	}
	db.tc.waitFixes()
	m1, c1 := db.Metrics(), db.ReadCounts()
	require.Positive(t, fpGets, "some Gets met false positives")
	require.Equal(t, m1.FalsePositiveProbes-m0.FalsePositiveProbes, fps)
	require.Equal(t, m1.FalsePositiveProbes, c1.FalsePositiveProbes)
	require.Equal(t, m1.Gets, c1.Gets)
}

// TestRemoteCacheTakesBlockCacheAsItFills: the remote cache takes its
// memory from the block cache only as fixes fill it. A store of about 5
// MiB of blocks behind an 8 MiB block cache, half of which may go to
// remote chunks, reads its keys twice without fixing anything: the second
// pass finds its blocks cached (had the remote cache taken its 4 MiB at
// Open, the blocks would not fit and nearly every read would miss). Then
// fixes fill the remote cache, and it holds memory for them.
func TestRemoteCacheTakesBlockCacheAsItFills(t *testing.T) {
	opts := &Options{FS: vfs.NewMem(), FilterPolicy: "aprefix", FixInline: true, KnownNegatives: -1,
		FixRule: FixEvery, BlockCacheSize: 8 << 20, RemoteCacheSize: 4 << 20}
	db, err := Open("db", opts)
	require.NoError(t, err)
	defer db.Close()
	const n = 40_000
	value := make([]byte, 120)
	for i := range n {
		for j := 0; j < len(value); j += 8 { // incompressible
			binary.LittleEndian.PutUint64(value[j:], (uint64(i)*15+uint64(j)+1)*0x9E3779B97F4A7C15^uint64(j)*0xBF58476D1CE4E5B9)
		}
		require.NoError(t, db.Set(stateTestKey(2*i), value, NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	var size uint64
	for _, l := range db.Metrics().Levels {
		size += l.Size
	}
	require.Greater(t, size, uint64(4<<20), "more than the block cache would keep with 4 MiB taken")
	require.Less(t, size, uint64(7<<20))
	readAll := func() (misses int64) {
		m0 := db.Metrics()
		for i := range n {
			_, err := db.Get(stateTestKey(2 * i))
			require.NoError(t, err)
		}
		return db.Metrics().BlockCacheMisses - m0.BlockCacheMisses
	}
	first := readAll()
	second := readAll()
	t.Logf("block cache misses: %d on the first pass, %d on the second", first, second)
	require.Zero(t, db.Metrics().RemoteCacheBytes, "no fix, no remote chunk: nothing taken")
	require.Less(t, second, first/20, "the blocks stay cached")

	for i := range 50_000 { // absent keys: false positives, fixed at once
		_, err := db.Get(stateTestKey(2*i + 1))
		require.ErrorIs(t, err, ErrNotFound)
	}
	m := db.Metrics()
	require.Positive(t, m.Adaptations)
	require.Positive(t, m.RemoteCacheBytes, "fixes cached remote chunks")
	require.LessOrEqual(t, m.RemoteCacheBytes, opts.RemoteCacheSize)
	require.Contains(t, m.String(), "remote reads")
}

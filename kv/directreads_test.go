package kv

import (
	"fmt"
	"testing"

	"github.com/adaptkv/adaptkv/internal/directio"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestDirectReads: with Options.DirectReads a store on the OS file system
// reads its tables around the page cache: every key reads back (Gets,
// an iterator, a compaction, after a reopen), absent keys stay absent,
// and the reads are counted as aligned device reads; without it the same
// counters count page-cache reads of exactly the bytes asked for.
func TestDirectReads(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			dir := t.TempDir()
			opts := &Options{DirectReads: direct, MemTableSize: 64 << 10, BlockCacheSize: 64 << 10, FilterPolicy: "taf"}
			db, err := Open(dir, opts)
			if direct && err != nil {
				require.ErrorIs(t, err, ErrInvalidOptions)
				t.Skipf("no O_DIRECT in %s: %v", dir, err)
			}
			require.NoError(t, err)
			const n = 20000
			for i := range n {
				require.NoError(t, db.Set(fmt.Appendf(nil, "key%06d", i), fmt.Appendf(nil, "value%d", i), NoSync))
			}
			require.NoError(t, db.Flush())
			require.NoError(t, db.Compact(nil, nil))
			require.Positive(t, db.Metrics().CompactionReads, "compaction inputs read through the counting file system")
			require.NoError(t, db.Close())

			db, err = Open(dir, opts)
			require.NoError(t, err)
			defer db.Close()
			m0 := db.Metrics()
			for i := 0; i < n; i += 7 {
				v, err := db.Get(fmt.Appendf(nil, "key%06d", i))
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("value%d", i), string(v))
				_, err = db.Get(fmt.Appendf(nil, "key%06d!", i))
				require.ErrorIs(t, err, ErrNotFound)
			}
			it, err := db.NewIter(nil)
			require.NoError(t, err)
			count := 0
			for ok := it.First(); ok; ok = it.Next() {
				count++
			}
			require.NoError(t, it.Close())
			require.Equal(t, n, count)
			m := db.Metrics()
			reads, bytes := m.TableReads-m0.TableReads, m.TableReadBytes-m0.TableReadBytes
			require.Positive(t, reads, "a 64 KiB block cache misses")
			require.GreaterOrEqual(t, reads, m.DataBlockReads-m0.DataBlockReads, "every data block the cache missed is a file read")
			if direct {
				require.Zero(t, bytes%directio.Align, "direct reads read whole aligned blocks")
				require.GreaterOrEqual(t, bytes, reads*directio.Align)
			}
		})
	}
}

// TestDirectReadsRejected: DirectReads needs the operating system's file
// system.
func TestDirectReadsRejected(t *testing.T) {
	_, err := Open("db", &Options{FS: vfs.NewMem(), DirectReads: true})
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.ErrorIs(t, (&Options{FS: vfs.NewMem(), DirectReads: true}).Validate(), ErrInvalidOptions)

}

// TestFixCachedDirectReads: with DirectReads the default rules (FixCached,
// RecordAuto) cache a false positive at its key's first sight, no fix and
// no remote read, and mark the key in the known-negative record (a
// doorkeeper bit: the window's stream of new keys turned the doorkeeper
// on), while a store that is only read records none of its other absent
// Gets (RecordAuto records while tables are rewritten). A key whose bit
// another key set takes a slot, but is not fixed: only a key the record
// holds is (Sketch.SeenHeld). The key's return while its table's cache
// holds it costs no probe and no fix, and takes it its slot; its return
// after the cache let it go is fixed, and from then on it ends at the
// filter. Stored keys are all found.
func TestFixCachedDirectReads(t *testing.T) {
	const present, absent, flood = 100_000, 20_000, 200_000
	opts := &Options{DirectReads: true, Filter: seededPolicy(t, "aprefix", 7), KnownNegatives: 8192, knownNegSeed: 7}
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		require.ErrorIs(t, err, ErrInvalidOptions)
		t.Skipf("no O_DIRECT: %v", err)
	}
	defer db.Close()
	knFill(t, db, 0, present)
	require.NoError(t, db.Compact(nil, nil))
	require.Equal(t, FixCached, db.opts.FixRule)
	require.Equal(t, RecordWhileRewriting, db.recordRule())
	// The window the compaction opened closes once the record has counted
	// about as many absent Gets as it holds keys.
	askAbsentFrom(t, db, 1_000_000, 4*8192)
	require.False(t, db.kn.Recording(), "nothing rewritten: the window closed")

	// The first round, key by key: which keys meet a false positive.
	m0 := db.Metrics()
	var fpKeys []int
	for i := range absent {
		before := db.tc.fpProbes.Load()
		_, err := db.Get(knKey(2*i + 1))
		require.ErrorIs(t, err, ErrNotFound)
		if db.tc.fpProbes.Load() > before {
			fpKeys = append(fpKeys, i)
		}
	}
	db.tc.waitFixes()
	m1 := db.Metrics()
	first := m1.FalsePositiveProbes - m0.FalsePositiveProbes
	require.Greater(t, len(fpKeys), 20)
	require.Zero(t, m1.Adaptations-m0.Adaptations, "first sight: no fix")
	require.Equal(t, first, m1.FalsePositivesCached-m0.FalsePositivesCached, "first sight: cached")
	require.Equal(t, m0.RemoteReads, m1.RemoteReads, "no fix, no remote read")
	// A key whose doorkeeper bit another key set takes a slot: about the
	// share of bits set, under 2% here; a tenth is far in the tail.
	held := 0
	for _, i := range fpKeys {
		if db.kn.Contains(knKey(2*i + 1)) {
			held++
		}
	}
	require.LessOrEqual(t, held, len(fpKeys)/10+2, "first sights: doorkeeper bits, (nearly) no slots")

	second := askAbsent(t, db, absent)
	m2 := db.Metrics()
	require.LessOrEqual(t, second, first/4, "the cache answers: no probe")
	require.LessOrEqual(t, m2.Adaptations-m1.Adaptations, uint64(held), "fixed: only keys that held a slot")
	// Every key of the first round takes its slot now: its return to the
	// cache, or its false positive after the cache let it go.
	for _, i := range fpKeys {
		require.True(t, db.kn.Contains(knKey(2*i+1)), "key %d held after its second sight", i)
	}

	// Other absent keys push the first ones out of the tables' caches; the
	// first ones come back: fixed, held by the record.
	askAbsentFrom(t, db, 2_000_000, flood)
	m3 := db.Metrics()
	third := askAbsent(t, db, absent)
	m4 := db.Metrics()
	t.Logf("false positives of %d absent keys: %d, %d, after %d others %d", absent, first, second, flood, third)
	require.Greater(t, third, first/2, "the caches let most go")
	fixed := m4.Adaptations - m3.Adaptations
	require.LessOrEqual(t, fixed, third)
	require.GreaterOrEqual(t, fixed*10, third*9, "returning keys the record saw: fixed")
	require.Positive(t, m4.RemoteReads-m3.RemoteReads)

	fourth := askAbsent(t, db, absent)
	require.LessOrEqual(t, fourth, third/10, "fixed keys end at the filters")
	for i := 0; i < present; i += 3 {
		_, err := db.Get(knKey(2 * i))
		require.NoError(t, err, "no false negative: key %d", i)
	}
}

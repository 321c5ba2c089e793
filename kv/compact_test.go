package kv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/adaptkv/adaptkv/internal/merging"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestCompactDropsTombstones: deleting everything and compacting the whole
// range leaves no table at all (shadowed versions and bottommost
// tombstones are dropped) and deletes the files of the old tables.
func TestCompactDropsTombstones(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, MemTableSize: 32 << 10})
	require.NoError(t, err)
	defer db.Close()
	for i := 0; i < 3000; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%05d", i), []byte("value"), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	m := db.Metrics()
	require.Positive(t, m.Levels[6].NumFiles)
	for i := 0; i < 3000; i++ {
		require.NoError(t, db.Delete(fmt.Appendf(nil, "k%05d", i), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	m = db.Metrics()
	for lvl, l := range m.Levels {
		require.Zero(t, l.NumFiles, "L%d", lvl)
	}
	names, err := fs.List("db")
	require.NoError(t, err)
	for _, n := range names {
		ft, _ := parseFileName(n)
		require.NotEqual(t, fileTypeTable, ft, "obsolete table %s not deleted", n)
		require.NotEqual(t, fileTypeState, ft, "obsolete state file %s not deleted", n)
	}
}

// TestSnapshotSurvivesCompaction: a snapshot keeps seeing the versions it
// saw through overwrites, deletes, flushes and full compactions; after it is
// closed a compaction drops them.
func TestSnapshotSurvivesCompaction(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set([]byte("a"), []byte("v1"), nil))
	require.NoError(t, db.Set([]byte("b"), []byte("v1"), nil))
	snap := db.NewSnapshot()
	require.NoError(t, db.Set([]byte("a"), []byte("v2"), nil))
	require.NoError(t, db.Delete([]byte("b"), nil))
	require.NoError(t, db.Set([]byte("c"), []byte("v2"), nil))
	it, err := db.NewIter(nil) // implicit snapshot, taken before the compaction
	require.NoError(t, err)
	require.NoError(t, db.Compact(nil, nil))
	require.NoError(t, db.Set([]byte("d"), []byte("v3"), nil))

	check := func(get func([]byte) ([]byte, error), key, want string) {
		v, err := get([]byte(key))
		if want == "" {
			require.ErrorIs(t, err, ErrNotFound, key)
			return
		}
		require.NoError(t, err, key)
		require.Equal(t, want, string(v), key)
	}
	check(snap.Get, "a", "v1")
	check(snap.Get, "b", "v1")
	check(snap.Get, "c", "")
	check(db.Get, "a", "v2")
	check(db.Get, "b", "")
	check(db.Get, "c", "v2")
	var keys []string
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, string(it.Key())+"="+string(it.Value()))
	}
	require.NoError(t, it.Close())
	require.Equal(t, []string{"a=v2", "c=v2"}, keys, "the iterator ignores writes after its creation")
	sit, err := snap.NewIter(nil)
	require.NoError(t, err)
	keys = nil
	for ok := sit.Last(); ok; ok = sit.Prev() {
		keys = append(keys, string(sit.Key())+"="+string(sit.Value()))
	}
	require.NoError(t, sit.Close())
	require.Equal(t, []string{"b=v1", "a=v1"}, keys)
	require.NoError(t, snap.Close())
	require.NoError(t, db.Compact(nil, nil))
	check(db.Get, "a", "v2")
	check(db.Get, "b", "")
	check(db.Get, "d", "v3")
}

// TestMetricsAfterReopen: the level shape and the filter size survive a
// restart (tables are loaded by the background pass after Open).
func TestMetricsAfterReopen(t *testing.T) {
	fs := vfs.NewMem()
	opts := &Options{FS: fs, MemTableSize: 32 << 10, TargetFileSize: 16 << 10}
	db, err := Open("db", opts)
	require.NoError(t, err)
	for i := 0; i < 5000; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%05d", i), []byte("value"), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	before := db.Metrics()
	require.Positive(t, before.FilterBitsPerKey)
	require.Positive(t, before.FilterMemoryBytes)
	require.Greater(t, before.Levels[6].NumFiles, 1)
	require.NoError(t, db.Close())

	db, err = Open("db", opts)
	require.NoError(t, err)
	defer db.Close()
	require.Eventually(t, func() bool {
		return db.Metrics().FilterMemoryBytes == before.FilterMemoryBytes
	}, 10*time.Second, 10*time.Millisecond)
	after := db.Metrics()
	require.Equal(t, before.Levels, after.Levels)
	require.InDelta(t, before.FilterBitsPerKey, after.FilterBitsPerKey, 1e-9)
}

// TestL0StopWrites: under a write burst, flushes wait for compactions once
// L0 holds L0StopWritesThreshold tables, so L0 never grows past it.
func TestL0StopWrites(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, MemTableSize: 8 << 10, L0CompactionThreshold: 2, L0StopWritesThreshold: 3, MaxImmutableMemTables: 2})
	require.NoError(t, err)
	defer db.Close()
	n := 20000
	if testing.Short() {
		n = 5000
	}
	done := make(chan struct{})
	maxL0 := 0
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			if err := db.Set(fmt.Appendf(nil, "k%07d", (i*7919)%n), []byte("some value bytes"), NoSync); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(time.Millisecond):
		}
		maxL0 = max(maxL0, db.Metrics().Levels[0].NumFiles)
	}
	m := db.Metrics()
	t.Logf("max L0 %d, flushes %d, compactions %d", maxL0, m.Flushes, m.Compactions)
	require.LessOrEqual(t, maxL0, 3)
	require.Positive(t, m.Flushes)
	for i := 0; i < n; i++ {
		_, err := db.Get(fmt.Appendf(nil, "k%07d", i))
		require.NoError(t, err)
	}
}

// TestWriteAmplificationMetrics: flushes and compactions count the table
// bytes they write (and read), write amplification is their ratio to the
// bytes flushed, and a fully compacted store owes no compaction debt.
func TestWriteAmplificationMetrics(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 32 << 10, TargetFileSize: 16 << 10})
	require.NoError(t, err)
	defer db.Close()
	m := db.Metrics()
	require.Zero(t, m.WriteAmplification())
	require.Equal(t, manifest.NumLevels-1, m.BaseLevel, "an empty store compacts L0 into the last level")
	for i := range 20_000 {
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%06d", (i*7919)%20_000), make([]byte, 40), NoSync))
	}
	require.NoError(t, db.Flush())
	require.NoError(t, db.Compact(nil, nil))
	m = db.Metrics()
	t.Logf("flushed %d bytes, compactions read %d and wrote %d, write amplification %.2f, base level %d, debt %d",
		m.BytesFlushed, m.BytesCompactedIn, m.BytesCompacted, m.WriteAmplification(), m.BaseLevel, m.CompactionDebt)
	require.Positive(t, m.BytesFlushed)
	require.Positive(t, m.BytesCompacted)
	require.GreaterOrEqual(t, m.BytesCompactedIn, m.BytesCompacted/2)
	require.Greater(t, m.WriteAmplification(), 1.0)
	require.InDelta(t, float64(m.BytesFlushed+m.BytesCompacted)/float64(m.BytesFlushed), m.WriteAmplification(), 1e-9)
	require.Zero(t, m.CompactionDebt, "fully compacted")
}

// setCompactionHook installs a hook run at the start of every background
// compaction (see DB.testHookCompaction).
func setCompactionHook(db *DB, hook func(*compaction.Plan)) {
	db.compact.mu.Lock()
	db.testHookCompaction = hook
	db.compact.mu.Unlock()
}

// TestConcurrentCompactions: with an L0 compaction of one key range held
// mid-way, the flush of a disjoint range starts a second compaction (up to
// MaxConcurrentCompactions; with 1 it waits for the first), the two never
// share a table, and a manual Compact waits for both before it runs.
func TestConcurrentCompactions(t *testing.T) {
	for _, limit := range []int{2, 1} {
		t.Run(fmt.Sprintf("max=%d", limit), func(t *testing.T) {
			// L0CompactionThreshold 2: L0 scores 2 x depth / 2, so every
			// flush makes an L0 compaction due.
			db, err := Open("db", &Options{FS: vfs.NewMem(), L0CompactionThreshold: 2, MaxConcurrentCompactions: limit})
			require.NoError(t, err)
			defer db.Close()
			started := make(chan *compaction.Plan, 4)
			release := make(chan struct{})
			setCompactionHook(db, func(p *compaction.Plan) {
				started <- p
				<-release
			})
			write := func(prefix string) {
				for i := 0; i < 500; i++ {
					require.NoError(t, db.Set(fmt.Appendf(nil, "%s%05d", prefix, i), []byte("value"), NoSync))
				}
				require.NoError(t, db.Flush())
			}
			wait := func() *compaction.Plan { return waitCompactionStart(t, started) }
			write("a")
			first := wait()
			write("b")
			if limit == 1 {
				select {
				case p := <-started:
					t.Fatalf("a second compaction %v started with MaxConcurrentCompactions 1", p)
				case <-time.After(100 * time.Millisecond):
				}
				require.Equal(t, 1, db.Metrics().CompactionsRunning)
				close(release)
				wait()
			} else {
				second := wait()
				require.Equal(t, 2, db.Metrics().CompactionsRunning)
				for _, a := range first.Tables() {
					for _, b := range second.Tables() {
						require.NotEqual(t, a.FileNum, b.FileNum, "a table in two compactions")
					}
				}
				// A manual Compact waits for the running compactions.
				manual := make(chan error, 1)
				go func() { manual <- db.Compact(nil, nil) }()
				select {
				case err := <-manual:
					t.Fatalf("manual Compact returned (%v) while compactions ran", err)
				case <-time.After(100 * time.Millisecond):
				}
				close(release)
				require.NoError(t, <-manual)
				require.Zero(t, db.Metrics().Levels[0].NumFiles)
			}
			require.Eventually(t, func() bool { return db.Metrics().CompactionsRunning == 0 }, 10*time.Second, time.Millisecond)
			for _, prefix := range []string{"a", "b"} {
				for i := 0; i < 500; i++ {
					_, err := db.Get(fmt.Appendf(nil, "%s%05d", prefix, i))
					require.NoError(t, err)
				}
			}
		})
	}
}

// TestL0FileThreshold: flushes of sequential keys never overlap, so L0's
// depth stays 1 and never triggers a compaction; the table count does
// (L0CompactionFileThreshold), and flushes never stall on depth. Tables
// that overlap nothing below move down without a rewrite.
func TestL0FileThreshold(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 8 << 10, L0CompactionFileThreshold: 6})
	require.NoError(t, err)
	defer db.Close()
	n := 20000
	if testing.Short() {
		n = 8000
	}
	maxL0 := 0
	for i := 0; i < n; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%07d", i), []byte("some value bytes"), NoSync))
		if i%100 == 0 {
			m := db.Metrics()
			maxL0 = max(maxL0, m.Levels[0].NumFiles)
		}
	}
	m := db.Metrics()
	t.Logf("max L0 %d, flushes %d, compactions %d, moves %d", maxL0, m.Flushes, m.Compactions, m.TableMoves)
	require.Greater(t, m.Flushes, uint64(12), "enough flushes to pass the threshold twice")
	require.Positive(t, m.TableMoves, "tables overlapping nothing below move down")
	require.Less(t, m.Compactions, m.TableMoves, "most sequential tables move rather than get rewritten")
	require.LessOrEqual(t, maxL0, 2*6, "flushes wait at twice the file threshold")
	for i := 0; i < n; i += 7 {
		_, err := db.Get(fmt.Appendf(nil, "k%07d", i))
		require.NoError(t, err)
	}
}

// TestFlushSplit: a flush cuts its output at the base level's table
// boundaries (FlushSplitBytes), so no L0 table holds keys on both sides of
// one; with FlushSplitBytes < 0 a flush writes one table. Every key reads
// back either way.
func TestFlushSplit(t *testing.T) {
	for _, split := range []int64{1, -1} {
		t.Run(fmt.Sprintf("FlushSplitBytes=%d", split), func(t *testing.T) {
			db, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 1 << 20, TargetFileSize: 16 << 10,
				FlushSplitBytes: split, L0CompactionThreshold: 8})
			require.NoError(t, err)
			defer db.Close()
			key := func(i int) []byte { return fmt.Appendf(nil, "k%06d", (i*7919)%100_000) }
			for i := 0; i < 20_000; i++ {
				require.NoError(t, db.Set(key(i), []byte("bottom"), NoSync))
			}
			require.NoError(t, db.Compact(nil, nil))
			v := db.currentVersion()
			splits := compaction.FlushSplitKeys(v.Levels, db.compactionOptions())
			v.unref()
			require.Greater(t, len(splits), 4, "a base level of several tables")
			for i := 20_000; i < 22_000; i++ {
				require.NoError(t, db.Set(key(i), []byte("top"), NoSync))
			}
			require.NoError(t, db.Flush())
			v = db.currentVersion()
			l0 := v.Levels[0]
			v.unref()
			if split < 0 {
				require.Len(t, l0, 1)
			} else {
				require.Greater(t, len(l0), 4, "one table per slice")
				for _, tb := range l0 {
					for _, s := range splits {
						straddles := bytes.Compare(tb.Smallest.UserKey, s) <= 0 && bytes.Compare(tb.Largest.UserKey, s) > 0
						require.False(t, straddles, "table %d [%s, %s] straddles %s", tb.FileNum, tb.Smallest.UserKey, tb.Largest.UserKey, s)
					}
				}
			}
			for i := 0; i < 22_000; i++ {
				want := "bottom"
				if i >= 20_000 {
					want = "top"
				}
				v, err := db.Get(key(i))
				require.NoError(t, err)
				require.Equal(t, want, string(v))
			}
		})
	}
}

// TestMetricsReadAmp: L0's Sublevels is its depth (overlapping flushes
// stack), other levels count 1 when populated, and ReadAmp, their sum, is
// what an absent Get in the key range checks.
func TestMetricsReadAmp(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), L0CompactionThreshold: 16})
	require.NoError(t, err)
	defer db.Close()
	for f := 0; f < 3; f++ {
		for i := 0; i < 100; i++ {
			require.NoError(t, db.Set(fmt.Appendf(nil, "k%03d", 2*i), []byte("v"), NoSync))
		}
		require.NoError(t, db.Flush())
	}
	m := db.Metrics()
	require.Equal(t, 3, m.Levels[0].NumFiles)
	require.Equal(t, 3, m.Levels[0].Sublevels)
	require.Equal(t, 3, m.ReadAmp())
	_, err = db.Get([]byte("k101")) // absent, inside every table's range
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, uint64(m.ReadAmp()), db.Metrics().FilterChecks-m.FilterChecks)

	require.NoError(t, db.Compact(nil, nil))
	m = db.Metrics()
	require.Zero(t, m.Levels[0].Sublevels)
	require.Equal(t, 1, m.Levels[manifest.NumLevels-1].Sublevels)
	require.Equal(t, 1, m.ReadAmp())
	_, err = db.Get([]byte("k101"))
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, uint64(1), db.Metrics().FilterChecks-m.FilterChecks)
}

// TestCompactionInputsByLevel: a compaction of L0 into a level of many
// tables merges one iterator per L0 table and one for the whole level
// (which opens its tables one at a time), and that input yields exactly
// the entries, in the same order, as one iterator per table.
func TestCompactionInputsByLevel(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 1 << 20, TargetFileSize: 4 << 10,
		FlushSplitBytes: -1, L0CompactionThreshold: 100, L0CompactionFileThreshold: 100})
	require.NoError(t, err)
	defer db.Close()
	for i := 0; i < 3000; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%05d", i), []byte("a value of some bytes"), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	sets := 3000
	for round := 0; round < 2; round++ {
		for i := round; i < 3000; i += 7 {
			sets++
			require.NoError(t, db.Set(fmt.Appendf(nil, "k%05d", i), fmt.Appendf(nil, "round %d", round), NoSync))
		}
		require.NoError(t, db.Flush())
	}
	v := db.currentVersion()
	defer v.unref()
	l0, l6 := v.Levels[0], v.Levels[manifest.NumLevels-1]
	require.Len(t, l0, 2)
	require.Greater(t, len(l6), 5, "enough tables in the level to concatenate")
	plan := &compaction.Plan{Level: 0, OutputLevel: manifest.NumLevels - 1, Inputs: l0, Overlapping: l6}

	iters, err := db.compactionInputs(plan)
	require.NoError(t, err)
	require.Len(t, iters, len(l0)+1)
	var each []base.Iterator
	for _, t2 := range plan.Tables() {
		it, err := db.newCompactionIter(t2.FileNum)
		require.NoError(t, err)
		each = append(each, it)
	}
	got, want := merging.NewIter(iters...), merging.NewIter(each...)
	n := 0
	okGot, okWant := got.First(), want.First()
	for ; okGot && okWant; okGot, okWant = got.Next(), want.Next() {
		require.Equal(t, want.Key(), got.Key())
		require.Equal(t, want.Value(), got.Value())
		n++
	}
	require.Equal(t, okWant, okGot)
	require.NoError(t, got.Close())
	require.NoError(t, want.Close())
	require.Equal(t, sets, n, "every version: nothing is dropped in an iteration")
}

// TestBottommostSeqsZeroed: compactions into the bottommost level write the
// versions every reader sees with sequence number 0 (compaction.RunOptions
// ZeroSeqs), keep the sequence numbers a snapshot still tells apart, and
// every reader, a snapshot's included, reads what it read before, also after
// a reopen and newer writes.
func TestBottommostSeqsZeroed(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	key := func(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }
	for i := range 1000 {
		require.NoError(t, db.Set(key(i), []byte("v1"), NoSync))
	}
	snap := db.NewSnapshot()
	for i := range 500 {
		require.NoError(t, db.Set(key(i), []byte("v2"), NoSync))
	}
	for i := 900; i < 1000; i++ {
		require.NoError(t, db.Delete(key(i), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))

	// The bottommost entries, in order.
	type version struct {
		seq  uint64
		kind base.KeyKind
	}
	bottom := func() map[string][]version {
		v := db.currentVersion()
		defer v.unref()
		for l := 0; l < manifest.NumLevels-1; l++ {
			require.Empty(t, v.Levels[l], "L%d after Compact", l)
		}
		got := map[string][]version{}
		for _, m := range v.Levels[manifest.NumLevels-1] {
			it, err := db.newCompactionIter(m.FileNum)
			require.NoError(t, err)
			for ok := it.First(); ok; ok = it.Next() {
				k := it.Key()
				got[string(k.UserKey)] = append(got[string(k.UserKey)], version{k.Seq, k.Kind})
			}
			require.NoError(t, it.Close())
		}
		return got
	}
	got := bottom()
	require.Len(t, got, 1000)
	for i := range 1000 {
		vs := got[string(key(i))]
		switch {
		case i < 500: // v2 newer than the snapshot, v1 seen by it
			require.Len(t, vs, 2, "key %d", i)
			require.NotZero(t, vs[0].seq, "key %d: v2 is not seen by the snapshot", i)
			require.Equal(t, version{0, base.KeyKindSet}, vs[1], "key %d", i)
		case i < 900:
			require.Equal(t, []version{{0, base.KeyKindSet}}, vs, "key %d", i)
		default: // the tombstone hides v1 from the latest reader only
			require.Len(t, vs, 2, "key %d", i)
			require.Equal(t, base.KeyKindDelete, vs[0].kind)
			require.NotZero(t, vs[0].seq)
			require.Equal(t, version{0, base.KeyKindSet}, vs[1], "key %d", i)
		}
	}
	check := func(get func([]byte) ([]byte, error), latest bool) {
		t.Helper()
		for i := range 1000 {
			v, err := get(key(i))
			switch {
			case !latest:
				require.NoError(t, err, "key %d", i)
				require.Equal(t, "v1", string(v), "key %d", i)
			case i < 500:
				require.NoError(t, err, "key %d", i)
				require.Equal(t, "v2", string(v), "key %d", i)
			case i < 900:
				require.NoError(t, err, "key %d", i)
				require.Equal(t, "v1", string(v), "key %d", i)
			default:
				require.ErrorIs(t, err, ErrNotFound, "key %d", i)
			}
		}
	}
	check(db.Get, true)
	check(snap.Get, false)

	// Without the snapshot every version left is seen by every reader.
	require.NoError(t, snap.Close())
	require.NoError(t, db.Compact(nil, nil))
	got = bottom()
	require.Len(t, got, 900)
	for k, vs := range got {
		require.Equal(t, []version{{0, base.KeyKindSet}}, vs, "key %s", k)
	}
	check(db.Get, true)

	// After a reopen, newer writes still win over the zeroed versions.
	require.NoError(t, db.Close())
	db, err = Open("db", &Options{FS: fs})
	require.NoError(t, err)
	defer db.Close()
	check(db.Get, true)
	require.NoError(t, db.Set(key(600), []byte("v3"), NoSync))
	require.NoError(t, db.Delete(key(700), NoSync))
	for round := range 2 {
		v, err := db.Get(key(600))
		require.NoError(t, err, "round %d", round)
		require.Equal(t, "v3", string(v))
		_, err = db.Get(key(700))
		require.ErrorIs(t, err, ErrNotFound, "round %d", round)
		require.NoError(t, db.Compact(nil, nil))
	}
}

// TestCompactionYields: a compaction leaves its P to the goroutines readied
// on it every few tens of microseconds of work (tableOutput.Add). On one P,
// while a Compact runs, a goroutine wakes two others (the second takes the
// slot the scheduler runs next, the first waits in the run queue, as the
// writers a WAL sync round wakes do); the first runs soon after. Without
// the yields it waited for the runtime to preempt the compaction, whose
// table writer and block-writing goroutine take turns in that slot (10 ms).
func TestCompactionYields(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	db, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 1 << 20})
	require.NoError(t, err)
	defer db.Close()
	r := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 1<<10)
	for i := 0; i < 16<<10; i++ {
		for j := range value {
			value[j] = byte(r.Uint32())
		}
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%06d", r.IntN(1<<20)), value, NoSync))
	}
	require.NoError(t, db.Flush())
	done := make(chan error, 1)
	go func() { done <- db.Compact(nil, nil) }()
	first, second := make(chan time.Time), make(chan time.Time)
	waits := make(chan time.Duration, 1)
	go func() {
		for sent := range first {
			waits <- time.Since(sent)
		}
	}()
	go func() {
		for range second {
		}
	}()
	defer close(first)
	defer close(second)
	var wait []time.Duration
	for running := true; running; {
		select {
		case err := <-done:
			require.NoError(t, err)
			running = false
		default:
			time.Sleep(100 * time.Microsecond)
			first <- time.Now()
			second <- time.Now()
			wait = append(wait, <-waits)
		}
	}
	slices.Sort(wait)
	t.Logf("%d wakes during the compaction; wait median %v, max %v", len(wait), wait[len(wait)/2], wait[len(wait)-1])
	require.GreaterOrEqual(t, len(wait), 5, "too few wakes to judge")
	require.Less(t, wait[len(wait)/2], 3*time.Millisecond, "median wait of a goroutine queued on the compaction's P")
}

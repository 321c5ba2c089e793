package kv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// intraL0Key is key i of the intra-L0 tests.
func intraL0Key(i int) []byte { return fmt.Appendf(nil, "key%05d", i) }

// requireIntraL0Values checks every key of want (nil: deleted) with Get
// and with an iterator over the whole store.
func requireIntraL0Values(t *testing.T, db *DB, want map[string][]byte, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		k := intraL0Key(i)
		got, err := db.Get(k)
		if w := want[string(k)]; w == nil {
			require.ErrorIs(t, err, ErrNotFound, "key %s", k)
		} else {
			require.NoError(t, err, "key %s", k)
			require.Equal(t, string(w), string(got), "key %s", k)
		}
	}
	it, err := db.NewIter(nil)
	require.NoError(t, err)
	seen := 0
	for ok := it.First(); ok; ok = it.Next() {
		w := want[string(it.Key())]
		require.NotNil(t, w, "iterator returned deleted or unknown key %s", it.Key())
		require.Equal(t, string(w), string(it.Value()), "key %s", it.Key())
		seen++
	}
	require.NoError(t, it.Close())
	live := 0
	for _, v := range want {
		if v != nil {
			live++
		}
	}
	require.Equal(t, live, seen)
}

// intraL0Keys is the number of keys the intra-L0 tests load first.
const intraL0Keys = 20000

// intraL0Store opens a store on opts holding intraL0Keys keys (values of
// 16 random bytes: the base level is large next to L0, as intra-L0
// compactions need) compacted into the last level, and returns it with
// those keys.
func intraL0Store(t *testing.T, opts *Options) (*DB, map[string][]byte) {
	t.Helper()
	db, err := Open("db", opts)
	require.NoError(t, err)
	want := map[string][]byte{}
	rng := rand.NewChaCha8([32]byte{})
	for i := 0; i < intraL0Keys; i++ {
		v := make([]byte, 16)
		_, _ = rng.Read(v)
		require.NoError(t, db.Set(intraL0Key(i), v, NoSync))
		want[string(intraL0Key(i))] = v
	}
	require.NoError(t, db.Compact(nil, nil))
	return db, want
}

// reopenChecked closes db, opens the store again and checks want, over
// the keys intraL0Key(0..n-1), in it.
func reopenChecked(t *testing.T, db *DB, opts *Options, want map[string][]byte, n int) *DB {
	t.Helper()
	require.NoError(t, db.Close())
	db, err := Open("db", opts)
	require.NoError(t, err)
	requireIntraL0Values(t, db, want, n)
	return db
}

// waitCompactionStart returns the next plan a compaction hook sends on
// started, failing after 10 seconds.
func waitCompactionStart(t *testing.T, started <-chan *compaction.Plan) *compaction.Plan {
	t.Helper()
	select {
	case p := <-started:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no compaction started")
		return nil
	}
}

// TestIntraL0FlushDuringCompaction: L0 three deep over a few keys while
// the one compaction slot is taken, so that the next pick merges them
// within L0; that compaction is held while a flush writes newer versions
// (and deletions) of the same keys. Once it installs, reads see the
// flush's versions (its output is numbered before the flush's table, and
// L0 is read newest first by number), before any other compaction merges
// them, after, and after a reopen.
func TestIntraL0FlushDuringCompaction(t *testing.T) {
	opts := &Options{FS: vfs.NewMem(), MemTableSize: 64 << 10, FlushSplitBytes: -1, MaxConcurrentCompactions: 1, intraL0Ratio: 2}
	db, want := intraL0Store(t, opts)
	defer func() { db.Close() }()
	const n = intraL0Keys
	set := func(i int, v string) {
		require.NoError(t, db.Set(intraL0Key(i), []byte(v), NoSync))
		want[string(intraL0Key(i))] = []byte(v)
	}

	// Compaction k (from 0) waits for releases[min(k, 2)].
	started := make(chan *compaction.Plan, 16)
	var releases [3]chan struct{}
	var onces [3]sync.Once
	for i := range releases {
		releases[i] = make(chan struct{})
		defer onces[i].Do(func() { close(releases[i]) }) // a failed test still closes the store
	}
	release := func(i int) { onces[i].Do(func() { close(releases[i]) }) }
	calls := 0
	setCompactionHook(db, func(p *compaction.Plan) {
		k := min(calls, 2) // under compact.mu
		calls++
		select {
		case started <- p:
		default:
		}
		<-releases[k]
	})
	// Compaction 0 takes the slot: two flushes of keys above the rest.
	for f := 0; f < 2; f++ {
		for i := 0; i < 10; i++ {
			k := fmt.Appendf(nil, "zz%d", i)
			require.NoError(t, db.Set(k, []byte("z"), NoSync))
			want[string(k)] = []byte("z")
		}
		require.NoError(t, db.Flush())
	}
	require.False(t, waitCompactionStart(t, started).IsIntraL0())
	// Three small flushes over a few base-level keys: L0 three deep there.
	for _, r := range [][2]int{{0, 100}, {50, 150}, {25, 125}} {
		for i := r[0]; i < r[1]; i++ {
			set(i, fmt.Sprintf("v%d", r[0]))
		}
		require.NoError(t, db.Flush())
	}
	release(0)
	p := waitCompactionStart(t, started)
	require.True(t, p.IsIntraL0(), "plan %v", p)
	require.Len(t, p.Inputs, 3)

	// Newer versions of the same keys, flushed while it is held.
	for i := 0; i < 150; i++ {
		if i%3 == 0 {
			require.NoError(t, db.Delete(intraL0Key(i), NoSync))
			want[string(intraL0Key(i))] = nil
		} else {
			set(i, "newest")
		}
	}
	require.NoError(t, db.Flush())
	requireIntraL0Values(t, db, want, n)
	release(1)
	require.Eventually(t, func() bool { return db.Metrics().IntraL0Compactions == 1 }, 10*time.Second, time.Millisecond)
	// Installed; L0 holds the flushed newer versions and the output, and
	// no other compaction has merged them yet.
	requireIntraL0Values(t, db, want, n)
	release(2)
	require.Eventually(t, func() bool { return db.Metrics().CompactionsRunning == 0 }, 10*time.Second, time.Millisecond)
	requireIntraL0Values(t, db, want, n)
	db = reopenChecked(t, db, opts, want, intraL0Keys)
}

// TestIntraL0ConcurrentWriters: overwrites and deletions of a small key
// range from several goroutines, with flushes, intra-L0 and base
// compactions running under them; afterwards, and after a reopen, every
// key reads as its last write. Run with -race.
func TestIntraL0ConcurrentWriters(t *testing.T) {
	// No merged flushes: every memtable deepens L0, so that it gets deep
	// enough for intra-L0 compactions.
	opts := &Options{FS: vfs.NewMem(), MemTableSize: 32 << 10, FlushSplitBytes: -1, intraL0Ratio: 1, MergeFlushL0Depth: -1}
	db, want := intraL0Store(t, opts)
	defer func() { db.Close() }()
	// An L0 -> base compaction waits (while the writers run) until the L0
	// tables it does not take are 4 deep, or L0 stops flushes, as when the
	// base level is slow: an intra-L0 compaction is due when it ends (none
	// can start while it runs, every L0 table here overlapping its
	// inputs), whatever the timing.
	writing := make(chan struct{})
	setCompactionHook(db, func(p *compaction.Plan) {
		if p.Level != 0 || p.IsIntraL0() {
			return
		}
		inputs := map[uint64]bool{}
		for _, t := range p.Inputs {
			inputs[t.FileNum] = true
		}
		deep := func() bool {
			db.mu.Lock()
			defer db.mu.Unlock()
			return db.l0StalledLocked() || manifest.L0Depth(db.mu.current.Levels[0], func(fn uint64) bool { return inputs[fn] }) >= 4
		}
		for deadline := time.Now().Add(10 * time.Second); !deep() && time.Now().Before(deadline); {
			select {
			case <-writing:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})

	// Each writer owns the keys i with i % writers == w, so the last write
	// of each key is known without ordering writers against each other.
	// The writers run again (up to 10 times) until an intra-L0 compaction
	// has run. The hot keys are spread over the loaded ones, so that the
	// base level under an L0 compaction is the whole of it.
	const writers, rounds, hot = 4, 40, 400
	wants := make([]map[string][]byte, writers)
	for w := range wants {
		wants[w] = map[string][]byte{}
	}
	for pass := 0; pass < 10 && db.Metrics().IntraL0Compactions == 0; pass++ {
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), uint64(7+pass)))
				for r := 0; r < rounds; r++ {
					for j := 0; j < 60; j++ {
						i := rng.IntN(hot/writers)*writers + w
						k := intraL0Key(i * (intraL0Keys / hot))
						var err error
						if rng.IntN(5) == 0 {
							err = db.Delete(k, NoSync)
							wants[w][string(k)] = nil
						} else {
							v := fmt.Appendf(nil, "w%d-p%d-r%d-%d-%s", w, pass, r, j, make([]byte, 200))
							err = db.Set(k, v, NoSync)
							wants[w][string(k)] = v
						}
						if err != nil {
							errs[w] = err
							return
						}
					}
					if r%4 == w {
						if err := db.Flush(); err != nil {
							errs[w] = err
							return
						}
					}
				}
			}(w)
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
	}
	close(writing)
	for _, m := range wants {
		for k, v := range m {
			want[k] = v
		}
	}
	require.NoError(t, db.Flush())
	require.Eventually(t, func() bool { return db.Metrics().CompactionsRunning == 0 }, 30*time.Second, time.Millisecond)
	m := db.Metrics()
	t.Logf("flushes %d, compactions %d (intra-L0 %d)", m.Flushes, m.Compactions, m.IntraL0Compactions)
	require.Positive(t, m.IntraL0Compactions)
	requireIntraL0Values(t, db, want, intraL0Keys)
	db = reopenChecked(t, db, opts, want, intraL0Keys)
}

// TestIntraL0OutputReservation: an intra-L0 output number is taken only
// from the current version, with no flush under way or as the number a
// running flush left free below its tables (once), and it is above every
// table's number.
func TestIntraL0OutputReservation(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set([]byte("a"), []byte("1"), NoSync))
	require.NoError(t, db.Flush())

	v := db.currentVersion()
	num := db.reserveIntraL0Output(v)
	require.NotZero(t, num)
	for _, ts := range v.Levels {
		for _, tb := range ts {
			require.Greater(t, num, tb.FileNum)
		}
	}
	require.Greater(t, db.allocFileNum(), num)

	db.mu.Lock()
	db.mu.flushing = true
	db.mu.Unlock()
	require.Zero(t, db.reserveIntraL0Output(v), "a flush is under way")
	spare := db.allocFileNum()
	db.mu.Lock()
	db.mu.l0Spare = spare
	db.mu.Unlock()
	require.Equal(t, spare, db.reserveIntraL0Output(v), "a flush is under way and left a number free")
	require.Zero(t, db.reserveIntraL0Output(v), "a flush is under way and its spare number is taken")
	db.mu.Lock()
	db.mu.flushing, db.mu.l0Spare = false, 0
	db.mu.Unlock()

	require.NoError(t, db.Set([]byte("b"), []byte("2"), NoSync))
	require.NoError(t, db.Flush())
	require.Zero(t, db.reserveIntraL0Output(v), "v is no longer current")
	v.unref()
}

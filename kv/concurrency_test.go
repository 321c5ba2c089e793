package kv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// TestConcurrency runs 8 goroutines mixing Get, Set, Delete, batches and
// iterators while flushes and compactions run. Each goroutine owns a key
// range and checks read-your-writes on it exactly (Get, and iterators,
// which must show exactly its model since it does not write while it
// iterates); keys of the other ranges must be well-formed with a value
// that matches the key (no phantom or torn entries).
func TestConcurrency(t *testing.T) {
	const workers = 8
	ops := 4000
	if testing.Short() {
		ops = 1000
	}
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, MemTableSize: 32 << 10, L0CompactionThreshold: 2,
		TargetFileSize: 16 << 10, MaxOpenFiles: 8})
	require.NoError(t, err)
	defer db.Close()

	valueOf := func(k string, ver int) []byte { return fmt.Appendf(nil, "%s@%d", k, ver) }
	checkForeign := func(k, v []byte) error {
		if !bytes.HasPrefix(v, append(bytes.Clone(k), '@')) {
			return fmt.Errorf("key %q has foreign value %q", k, v)
		}
		return nil
	}
	var stop atomic.Bool
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { // manual flushes and compactions on top of the background ones
		defer bg.Done()
		for i := 0; !stop.Load(); i++ {
			time.Sleep(2 * time.Millisecond)
			if i%4 == 3 {
				if err := db.Compact(nil, nil); err != nil {
					t.Error(err)
					return
				}
			} else if err := db.Flush(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			own := map[string][]byte{}
			key := func(i int) string { return fmt.Sprintf("w%d-%04d", w, i) }
			fail := func(format string, args ...any) {
				errs <- fmt.Errorf("worker %d: "+format, append([]any{w}, args...)...)
			}
			for op := 0; op < ops; op++ {
				switch r := rng.IntN(100); {
				case r < 35:
					k := key(rng.IntN(300))
					v := valueOf(k, op)
					if err := db.Set([]byte(k), v, NoSync); err != nil {
						fail("set: %v", err)
						return
					}
					own[k] = v
				case r < 45:
					k := key(rng.IntN(300))
					if err := db.Delete([]byte(k), NoSync); err != nil {
						fail("delete: %v", err)
						return
					}
					delete(own, k)
				case r < 50:
					b := NewBatch()
					staged := map[string][]byte{}
					for n := 0; n < 10; n++ {
						k := key(rng.IntN(300))
						v := valueOf(k, op)
						_ = b.Set([]byte(k), v)
						staged[k] = v
					}
					if err := db.Apply(b, Sync); err != nil {
						fail("apply: %v", err)
						return
					}
					for k, v := range staged {
						own[k] = v
					}
				case r < 80:
					k := key(rng.IntN(300))
					v, err := db.Get([]byte(k))
					want, ok := own[k]
					if !ok && err != ErrNotFound {
						fail("get %s: want not found, got %q %v", k, v, err)
						return
					}
					if ok && (err != nil || !bytes.Equal(v, want)) {
						fail("get %s: want %q, got %q %v", k, want, v, err)
						return
					}
					// A foreign key: any well-formed answer.
					fk := fmt.Appendf(nil, "w%d-%04d", rng.IntN(workers), rng.IntN(300))
					if v, err := db.Get(fk); err == nil {
						if e := checkForeign(fk, v); e != nil {
							fail("%v", e)
							return
						}
					} else if err != ErrNotFound {
						fail("get %s: %v", fk, err)
						return
					}
				default:
					it, err := db.NewIter(nil)
					if err != nil {
						fail("new iter: %v", err)
						return
					}
					seen := 0
					prefix := fmt.Sprintf("w%d-", w)
					var prev []byte
					for ok := it.First(); ok; ok = it.Next() {
						k := it.Key()
						if prev != nil && bytes.Compare(prev, k) >= 0 {
							fail("iterator out of order: %q then %q", prev, k)
							return
						}
						prev = append(prev[:0], k...)
						if e := checkForeign(k, it.Value()); e != nil {
							fail("iter: %v", e)
							return
						}
						if strings.HasPrefix(string(k), prefix) {
							want, ok := own[string(k)]
							if !ok || !bytes.Equal(want, it.Value()) {
								fail("iter: own key %s = %q, model %q (present %v)", k, it.Value(), want, ok)
								return
							}
							seen++
						}
					}
					if err := it.Close(); err != nil {
						fail("iter: %v", err)
						return
					}
					if seen != len(own) {
						fail("iter saw %d own keys, model has %d (lost keys)", seen, len(own))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	m := db.Metrics()
	t.Logf("flushes %d compactions %d levels %v", m.Flushes, m.Compactions, m.Levels)
	require.Positive(t, m.Flushes)
	require.Positive(t, m.Compactions)
}

// TestGroupCommit: concurrent Sync writers share fsyncs (one leader writes
// and syncs the batches queued behind it), and every write is durable.
func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, nil)
	require.NoError(t, err)
	const writers, per = 8, 100
	syncWrites(t, db, writers, per)
	groups, syncs := db.walGroups.Load(), db.walSyncs.Load()
	t.Logf("%d synced writes in %d commit groups, %d fsyncs", writers*per, groups, syncs)
	require.Less(t, syncs, uint64(writers*per), "no write shared an fsync")
	require.NoError(t, db.Close())
	db, err = Open(dir, nil)
	require.NoError(t, err)
	defer db.Close()
	for w := 0; w < writers; w++ {
		for i := 0; i < per; i++ {
			_, err := db.Get(fmt.Appendf(nil, "w%d-%04d", w, i))
			require.NoError(t, err)
		}
	}
}

// syncWrites has writers goroutines each write per Sync keys
// "w<writer>-<i>" (value "v") and waits for them.
func syncWrites(t *testing.T, db *DB, writers, per int) {
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if err := db.Set(fmt.Appendf(nil, "w%d-%04d", w, i), []byte("v"), Sync); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestGroupCommitOneP: on one P, the writers a WAL sync round wakes share
// the next fsync. The last writer woken and the syncer wake each other into
// the scheduler's next slot; unless the syncer yields before a round, the
// two take turns, one write per fsync, while the other writers wait in the
// run queue until the runtime preempts the pair (see walSyncLoop).
func TestGroupCommitOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	db, err := Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer db.Close()
	const writers, per = 16, 100
	syncWrites(t, db, writers, per)
	syncs := db.walSyncs.Load()
	t.Logf("%d synced writes, %d fsyncs", writers*per, syncs)
	// A round takes the groups of every writer it woke (15-16 writes per
	// fsync); without the yield, 4-5.
	require.GreaterOrEqual(t, float64(writers*per)/float64(syncs), float64(writers)/2,
		"writes per fsync with %d Sync writers on one P", writers)
}

// TestSnapshotsStableUnderWrites takes snapshots while four writers commit
// two-key batches, with small memtables that rotate and flush meanwhile.
// Each snapshot shows, of each writer's batches (committed one after
// another), a prefix, whole batches only, at least every batch committed
// before it was taken, and the same again when read a second time: a later
// batch is never visible before an earlier one, and nothing appears in a
// snapshot after it was taken. Reads check the batches around each writer's
// frontier with Gets, and now and then the whole snapshot with an iterator.
func TestSnapshotsStableUnderWrites(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 64 << 10})
	require.NoError(t, err)
	defer db.Close()
	const writers = 4
	per := 20000
	if testing.Short() {
		per = 5000 // CI's -race -short run
	}
	key := func(w, i int, half string) []byte { return fmt.Appendf(nil, "w%d-%06d-%s", w, i, half) }
	var done [writers]atomic.Int64 // batches committed, per writer
	var wg sync.WaitGroup
	var left atomic.Int32
	left.Store(writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer left.Add(-1)
			var b Batch
			for i := range per {
				b.Reset()
				_ = b.Set(key(w, i, "a"), []byte("v"))
				_ = b.Set(key(w, i, "b"), []byte("v"))
				if err := db.Apply(&b, NoSync); err != nil {
					t.Error(err)
					return
				}
				done[w].Store(int64(i + 1))
			}
		}()
	}
	// frontier returns how many of writer w's batches in [lo, hi) s shows
	// beyond lo, checking that they are a prefix, whole.
	frontier := func(s *Snapshot, w, lo, hi int) int {
		n := 0
		for i := lo; i < hi; i++ {
			_, errA := s.Get(key(w, i, "a"))
			_, errB := s.Get(key(w, i, "b"))
			require.Equal(t, errA, errB, "writer %d batch %d torn", w, i)
			if errA != nil {
				require.ErrorIs(t, errA, ErrNotFound)
				for j := i + 1; j < hi; j++ {
					_, err := s.Get(key(w, j, "a"))
					require.ErrorIs(t, err, ErrNotFound, "writer %d: batch %d visible, %d not", w, j, i)
				}
				break
			}
			n++
		}
		return n
	}
	// scan returns, per writer, how many of its batches s shows, checking
	// that they are its first ones, whole.
	scan := func(s *Snapshot) [writers]int {
		it, err := s.NewIter(nil)
		require.NoError(t, err)
		defer it.Close()
		var n [writers]int
		for ok := it.First(); ok; ok = it.Next() {
			var w, i int
			var half string
			_, err := fmt.Sscanf(string(it.Key()), "w%d-%06d-%s", &w, &i, &half)
			require.NoError(t, err)
			require.Equal(t, n[w], i, "writer %d: batch %d visible before batch %d", w, i, n[w])
			require.Equal(t, "a", half)
			require.True(t, it.Next(), "batch %d of writer %d torn", i, w)
			require.Equal(t, string(key(w, i, "b")), string(it.Key()))
			n[w]++
		}
		require.NoError(t, it.Error())
		return n
	}
	snaps := 0
	for ; left.Load() > 0; snaps++ {
		var before, after [writers]int
		for w := range writers {
			before[w] = int(done[w].Load())
		}
		s := db.NewSnapshot()
		for w := range writers {
			after[w] = int(done[w].Load())
		}
		var seen [writers]int
		for w := range writers {
			// Batches before before[w] were committed before s was taken;
			// those after after[w]+1 began after it.
			lo := max(before[w]-1, 0)
			seen[w] = frontier(s, w, lo, min(after[w]+2, per))
			require.GreaterOrEqual(t, lo+seen[w], before[w], "writer %d: a committed batch is missing", w)
		}
		runtime.Gosched()
		for w := range writers {
			lo := max(before[w]-1, 0)
			require.Equal(t, seen[w], frontier(s, w, lo, min(after[w]+2, per)), "writer %d: a snapshot changed", w)
		}
		if snaps%64 == 0 {
			first := scan(s)
			require.Equal(t, first, scan(s), "a snapshot changed")
		}
		require.NoError(t, s.Close())
	}
	wg.Wait()
	t.Logf("%d snapshots read", snaps)
	s := db.NewSnapshot()
	defer s.Close()
	require.Equal(t, [writers]int{per, per, per, per}, scan(s))
}

// gate holds the goroutines that reach it while it is closed, until it is
// released (once).
type gate struct {
	closed  atomic.Bool
	entered chan struct{} // a goroutine reached the closed gate
	open    chan struct{} // closed to open the gate
	opened  sync.Once
}

func newGate() gate { return gate{entered: make(chan struct{}, 1), open: make(chan struct{})} }

// pass waits at the gate while it is closed, and says so on entered.
func (g *gate) pass() {
	if g.closed.Load() {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		<-g.open
	}
}

// release opens the gate (once).
func (g *gate) release() {
	g.opened.Do(func() {
		g.closed.Store(false)
		close(g.open)
	})
}

// walSyncGate is a file system whose WAL fsyncs wait at the gate syncs
// while it is closed, and fail while fail is set; its WAL writes wait at
// the gate writes, and it counts them.
type walSyncGate struct {
	syncs, writes gate
	fail          atomic.Bool
	walWrites     atomic.Int64
}

func newWALSyncGate() *walSyncGate { return &walSyncGate{syncs: newGate(), writes: newGate()} }

func (g *walSyncGate) fs() vfs.FS {
	return errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileWrite:
			g.walWrites.Add(1)
			g.writes.pass()
		case errorfs.OpFileSync, errorfs.OpFileSyncData:
			g.syncs.pass()
			if g.fail.Load() {
				return errorfs.ErrInjected
			}
		}
		return nil
	}))
}

// setAsync sets key to "v" on a goroutine of its own; the channel gets
// Set's result.
func setAsync(db *DB, key string, o *WriteOptions) chan error {
	done := make(chan error, 1)
	go func() { done <- db.Set([]byte(key), []byte("v"), o) }()
	return done
}

// TestWALSyncOffLeaderPath: while one commit group's fsync runs, the next
// group is written to the WAL (the fsync is the WAL syncer's, not the
// leader's), and a group is published only when it and every group before
// it are durable: a Sync write waiting for its fsync is invisible, and so
// is a NoSync write committed after it, which also waits to return. If the
// fsync fails, none of them is acknowledged or visible and the store's
// writes stop with the error.
func TestWALSyncOffLeaderPath(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			g := newWALSyncGate()
			db, err := Open("db", &Options{FS: g.fs()})
			require.NoError(t, err)
			defer db.Close()
			defer g.syncs.release() // before Close, should the test fail
			g.syncs.closed.Store(true)
			// A group is written and queued for the syncer (a group's
			// records may take more than one write).
			queued := func() int {
				db.walSync.mu.Lock()
				defer db.walSync.mu.Unlock()
				return len(db.walSync.queue)
			}
			done1 := setAsync(db, "k1", Sync)
			<-g.syncs.entered // k1's fsync waits at the gate
			writes := g.walWrites.Load()
			done2 := setAsync(db, "k2", Sync)
			require.Eventually(t, func() bool { return g.walWrites.Load() > writes && queued() == 1 },
				10*time.Second, time.Millisecond, "the next group was not written while an fsync ran")
			writes = g.walWrites.Load()
			done3 := setAsync(db, "k3", NoSync)
			require.Eventually(t, func() bool { return g.walWrites.Load() > writes && queued() == 2 },
				10*time.Second, time.Millisecond, "a NoSync group was not written while an fsync ran")
			for _, k := range []string{"k1", "k2", "k3"} {
				_, err := db.Get([]byte(k))
				require.ErrorIs(t, err, ErrNotFound, "%s visible before k1's fsync ended", k)
			}
			for i, done := range []chan error{done1, done2, done3} {
				select {
				case err := <-done:
					t.Fatalf("write %d returned (%v) before k1's fsync ended", i+1, err)
				default:
				}
			}
			g.fail.Store(fail)
			g.syncs.release()
			for i, done := range []chan error{done1, done2, done3} {
				err := <-done
				if fail {
					require.ErrorIs(t, err, errorfs.ErrInjected, "write %d", i+1)
				} else {
					require.NoError(t, err, "write %d", i+1)
				}
			}
			for _, k := range []string{"k1", "k2", "k3"} {
				_, err := db.Get([]byte(k))
				if fail {
					require.ErrorIs(t, err, ErrNotFound, "%s visible after its fsync failed", k)
				} else {
					require.NoError(t, err, k)
				}
			}
			if fail {
				require.ErrorIs(t, db.Set([]byte("k4"), []byte("v"), NoSync), errorfs.ErrInjected)
			}
		})
	}
}

// TestNoSyncWriteAfterFailedSync: a NoSync group whose WAL write runs while
// the fsync of a group before it fails, and which reaches publishing after
// the syncer is done with the failure (its queue empty, nothing for it to
// wait for), is not acknowledged: its write follows one that may not be
// durable, and publishing it would show the failed Sync write as well.
func TestNoSyncWriteAfterFailedSync(t *testing.T) {
	g := newWALSyncGate()
	db, err := Open("db", &Options{FS: g.fs()})
	require.NoError(t, err)
	defer db.Close()
	defer g.writes.release()
	defer g.syncs.release()
	g.syncs.closed.Store(true)
	done1 := setAsync(db, "k1", Sync)
	<-g.syncs.entered // k1's fsync waits at the gate
	g.writes.closed.Store(true)
	done2 := setAsync(db, "k2", NoSync)
	<-g.writes.entered // k2's WAL write waits at the write gate
	g.fail.Store(true)
	g.syncs.release()
	// k1's writer is woken after the syncer's round ended: the syncer is
	// idle with an empty queue when k2's write goes on.
	require.ErrorIs(t, <-done1, errorfs.ErrInjected)
	g.writes.release()
	require.ErrorIs(t, <-done2, errorfs.ErrInjected)
	for _, k := range []string{"k1", "k2"} {
		_, err := db.Get([]byte(k))
		require.ErrorIs(t, err, ErrNotFound, "%s visible after k1's fsync failed", k)
	}
	require.ErrorIs(t, db.Set([]byte("k3"), []byte("v"), NoSync), errorfs.ErrInjected)
}

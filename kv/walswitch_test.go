package kv

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestWALSwitchOffWritersPath holds a memtable switch's second half (the
// old WAL's fsync) and checks, on the store's real directory (the WAL
// mapped on Linux):
//   - other writers go on writing meanwhile; a Sync write waits for it,
//     and Metrics counts the wait and the second half's time;
//   - a copy of the directory taken then (what a killed process leaves:
//     the old WAL not cut, not fsynced) opens with every acknowledged
//     write, those in the new WAL included;
//   - the same copy with the old WAL torn (a machine crash before its
//     fsync) opens with a prefix of the old WAL's writes and none of the
//     new WAL's.
func TestWALSwitchOffWritersPath(t *testing.T) {
	dir := t.TempDir()
	h := holdFirstSwitch(t, dir, Options{})
	db, acked, aDone, keyA, keyB := h.db, &h.acked, h.aDone, switchKeyA, switchKeyB
	heldSince := time.Now()
	// The others write on, into the new WAL.
	const nb = 100
	bDone := make(chan error, 1)
	go func() {
		for i := range nb {
			if err := db.Set(keyB(i), crashValue(keyB(i)), NoSync); err != nil {
				bDone <- err
				return
			}
		}
		bDone <- nil
	}()
	select {
	case err := <-bDone:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the other writers wait for the switch")
	}
	// A Sync write is durable only with the old WAL: it waits.
	syncDone := make(chan error, 1)
	go func() { syncDone <- db.Set([]byte("s"), []byte("sync"), Sync) }()
	select {
	case err := <-syncDone:
		t.Fatalf("a Sync write returned before the old WAL was fsynced (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}

	// A killed process leaves the files as they are.
	killed := cloneFS(t, vfs.Default, dir)
	na := int(acked.Load())
	wals := walFiles(t, killed, dir)
	slices.Sort(wals)
	require.Len(t, wals, 2, "the old WAL and the new one")
	db2, err := Open(dir, &Options{FS: killed})
	require.NoError(t, err)
	for i := 0; i < na; i++ {
		v, err := db2.Get(keyA(i))
		require.NoError(t, err, "acknowledged key a%d lost", i)
		require.Equal(t, crashValue(keyA(i)), v)
	}
	for i := range nb {
		_, err := db2.Get(keyB(i))
		require.NoError(t, err, "acknowledged key b%d (in the new WAL) lost", i)
	}
	require.NoError(t, db2.Close())

	// A machine crash took the old WAL's end before the switch fsynced it.
	for _, keep := range []float64{0.5, 0.99} {
		torn := cloneFS(t, vfs.Default, dir)
		old := torn.PathJoin(dir, wals[0])
		data, err := readFile(torn, old)
		require.NoError(t, err)
		end := len(data)
		for end > 0 && data[end-1] == 0 {
			end-- // the zero tail of a mapped WAL
		}
		rewriteFile(t, torn, old, data[:int(float64(end)*keep)])
		db3, err := Open(dir, &Options{FS: torn})
		require.NoError(t, err, "a WAL torn before its switch finished is a crash, not corruption")
		it, err := db3.NewIter(nil)
		require.NoError(t, err)
		var got []string
		for ok := it.First(); ok; ok = it.Next() {
			got = append(got, string(it.Key()))
		}
		require.NoError(t, it.Close())
		require.NotEmpty(t, got)
		require.Less(t, len(got), na, "keep %v: the torn end is gone", keep)
		for i, k := range got {
			require.Equal(t, string(keyA(i)), k, "keep %v: a prefix of the old WAL's writes, none of the new WAL's", keep)
		}
		require.NoError(t, db3.Close())
	}

	held := time.Since(heldSince)
	h.release()
	h.releaseFlushes()
	require.NoError(t, <-aDone)
	require.NoError(t, <-syncDone)
	m := db.Metrics()
	require.GreaterOrEqual(t, m.WALSwitches, uint64(1))
	require.GreaterOrEqual(t, m.WALSwitchSyncTime, held, "the held second half's time")
	require.GreaterOrEqual(t, m.WALSwitchWaits, uint64(1), "the Sync write's wait")
	require.Positive(t, m.WALSwitchWaitTime)
	require.NoError(t, db.Close())
}

// TestSyncAfterDurableWAL: a Sync write after a switch whose old WAL was
// fsynced to its end when sealed (its writers sync) waits for the switch's
// directory sync only, not for the old WAL's cut and fsync; after a switch
// away from a WAL of NoSync writes it waits for both. The second half is
// held between the two.
func TestSyncAfterDurableWAL(t *testing.T) {
	for _, synced := range []bool{true, false} {
		t.Run(fmt.Sprintf("old WAL synced %v", synced), func(t *testing.T) {
			db, err := Open(t.TempDir(), &Options{MemTableSize: 64 << 10})
			require.NoError(t, err)
			named, release := make(chan struct{}), make(chan struct{})
			var namedOnce, releaseOnce sync.Once
			free := func() { releaseOnce.Do(func() { close(release) }) }
			defer func() { free(); require.NoError(t, db.Close()) }()
			db.switchNamed = func() {
				namedOnce.Do(func() { close(named); <-release }) // the first switch only
			}
			aDone := make(chan error, 1)
			go func() {
				for i := 0; ; i++ {
					if err := db.Set(switchKeyA(i), crashValue(switchKeyA(i)), &WriteOptions{Sync: synced}); err != nil {
						aDone <- err
						return
					}
					select {
					case <-named:
						aDone <- nil
						return
					default:
					}
				}
			}()
			select {
			case <-named:
			case err := <-aDone:
				t.Fatalf("the writer stopped before a switch: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("no memtable switch")
			}
			syncDone := make(chan error, 1)
			go func() { syncDone <- db.Set([]byte("s"), []byte("sync"), Sync) }()
			if synced {
				select {
				case err := <-syncDone:
					require.NoError(t, err)
				case <-time.After(30 * time.Second):
					t.Fatal("a Sync write waits for the cut and fsync of an old WAL that was durable")
				}
				free()
			} else {
				select {
				case err := <-syncDone:
					t.Fatalf("a Sync write returned before the old WAL of NoSync writes was fsynced (err %v)", err)
				case <-time.After(100 * time.Millisecond):
				}
				free()
				require.NoError(t, <-syncDone)
			}
			require.NoError(t, <-aDone)
		})
	}
}

// TestReplaySealedWAL: replayWAL of a WAL whose end the next WAL's switch
// record gives. Its zero tail (a mapped WAL not cut) is where it ends; a
// file cut before that end is a WAL torn before its switch fsynced it
// (errSwitchTorn, the records before the tear replayed); a bad record
// that a later record says was fsynced, or a record after the sealed end,
// is corruption.
func TestReplaySealedWAL(t *testing.T) {
	fs := vfs.NewMem()
	w, err := createWAL(fs, "wal", 1, 0, false, 0)
	require.NoError(t, err)
	const n, syncedAfter = 200, 120
	b := &Batch{}
	for i := range n {
		b.Reset()
		require.NoError(t, b.Set(fmt.Appendf(nil, "k%04d", i), make([]byte, 100)))
		require.NoError(t, w.add(b.data))
		require.NoError(t, w.flush(i == syncedAfter))
	}
	require.NoError(t, w.seal())
	end := w.size()
	require.NoError(t, w.finish())
	data, err := readFile(fs, "wal")
	require.NoError(t, err)
	require.Equal(t, int(end), len(data))

	replay := func(content []byte, sealedAt int64) (int, error) {
		rewriteFile(t, fs, "wal", slices.Clone(content)) // MemFS may scribble on what it was given (Pebble invariants)
		count := 0
		_, err := replayWAL(fs, "wal", false, sealedAt, func([]byte) error { count++; return nil })
		return count, err
	}
	count, err := replay(data, end)
	require.NoError(t, err)
	require.Equal(t, n, count)
	count, err = replay(append(slices.Clone(data), make([]byte, 8192)...), end)
	require.NoError(t, err, "the zero tail of a WAL not cut")
	require.Equal(t, n, count)
	count, err = replay(data[:end-30], end)
	require.ErrorIs(t, err, errSwitchTorn)
	require.Equal(t, n-1, count)
	_, err = replay(data, -1)
	require.NoError(t, err, "a WAL read to its end")

	// Inside the part a later record says was fsynced: corruption.
	bad := slices.Clone(data)
	bad[len(bad)/4] ^= 0x5a
	_, err = replay(bad, end)
	require.ErrorIs(t, err, ErrCorruption)
	// Past the part known fsynced, a bad record may be a machine crash.
	bad = slices.Clone(data)
	bad[len(bad)*9/10] ^= 0x5a
	_, err = replay(bad, end)
	require.ErrorIs(t, err, errSwitchTorn)
	// Records beyond the sealed end: not the WAL the switch record names.
	_, err = replay(data, end/2)
	require.ErrorIs(t, err, ErrCorruption)
}

// TestSwitchRecord: a switch record parses back and is no batch's record.
func TestSwitchRecord(t *testing.T) {
	prev, end, ok := parseSwitchRecord(switchRecord(42, 12345))
	require.True(t, ok)
	require.Equal(t, uint64(42), prev)
	require.Equal(t, int64(12345), end)
	b := &Batch{}
	require.NoError(t, b.Set([]byte("k"), []byte("v")))
	_, _, ok = parseSwitchRecord(b.data)
	require.False(t, ok)
	_, _, ok = parseSwitchRecord(make([]byte, switchRecordLen))
	require.False(t, ok, "no magic")
}

// TestWALSwitchMetrics: every memtable switch gives the store a new WAL
// and is counted once, whether a full memtable or Flush made it.
func TestWALSwitchMetrics(t *testing.T) {
	db, err := Open(t.TempDir(), &Options{MemTableSize: 64 << 10})
	require.NoError(t, err)
	defer db.Close()
	for i := range 5000 {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%06d", i), make([]byte, 100), NoSync))
	}
	require.NoError(t, db.Flush())
	m := db.Metrics()
	t.Logf("%d switches, second halves %v; %d waits, %v", m.WALSwitches, m.WALSwitchSyncTime, m.WALSwitchWaits, m.WALSwitchWaitTime)
	require.Greater(t, m.WALSwitches, uint64(3), "5000 writes of 100 bytes fill several 64 KiB memtables")
	require.Equal(t, m.Flushes, m.WALSwitches, "one switch per memtable flushed")
	require.Positive(t, m.WALSwitchSyncTime)
	require.LessOrEqual(t, m.WALSwitchWaits, m.WALSwitches)
	require.Contains(t, m.String(), fmt.Sprintf("WAL switches %d", m.WALSwitches))
}

// TestWALSwitchChain holds the first switch's second half (the old WAL not
// fsynced) and checks that the next switches do not wait for it: another
// writer fills several more memtables meanwhile, none of its writes waits,
// and recovery over the chain of WALs keeps a prefix of the writes when a
// machine crash took the first one's end or a later one's directory entry,
// and everything when only the process died. A Sync write waits for the
// held second half.
func TestWALSwitchChain(t *testing.T) {
	dir := t.TempDir()
	// Flushes are held, so that every WAL stays; 16 memtables may queue.
	h := holdFirstSwitch(t, dir, Options{MaxImmutableMemTables: 16})
	db, aDone, keyA, keyB := h.db, h.aDone, switchKeyA, switchKeyB
	// Writer B fills three more memtables while the first switch is held.
	nb := 0
	bDone := make(chan error, 1)
	go func() {
		for db.Metrics().WALSwitches < 4 {
			if err := db.Set(keyB(nb), crashValue(keyB(nb)), NoSync); err != nil {
				bDone <- err
				return
			}
			nb++
		}
		bDone <- nil
	}()
	select {
	case err := <-bDone:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the next switch waits for the held one's second half")
	}
	require.Zero(t, db.Metrics().WALSwitchWaits, "no write waited for a switch")
	syncDone := make(chan error, 1)
	go func() { syncDone <- db.Set([]byte("s"), []byte("sync"), Sync) }()
	select {
	case err := <-syncDone:
		t.Fatalf("a Sync write returned before the first old WAL was fsynced (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}

	na := int(h.acked.Load())
	killed := cloneFS(t, vfs.Default, dir)
	wals := walFiles(t, killed, dir)
	slices.Sort(wals)
	require.GreaterOrEqual(t, len(wals), 5, "the first WAL and four after it")
	// keys opens a copy of the store in fs and returns its keys in order.
	keys := func(fs vfs.FS) []string {
		db2, err := Open(dir, &Options{FS: fs})
		require.NoError(t, err)
		defer func() { require.NoError(t, db2.Close()) }()
		it, err := db2.NewIter(nil)
		require.NoError(t, err)
		var got []string
		for ok := it.First(); ok; ok = it.Next() {
			got = append(got, string(it.Key()))
		}
		require.NoError(t, it.Close())
		return got
	}
	// prefixOfA checks that got is a0, a1, ... (at most most keys): no
	// write of a later WAL without every one before it.
	prefixOfA := func(got []string, most int, what string) {
		require.LessOrEqual(t, len(got), most, what)
		for i, k := range got {
			require.Equal(t, string(keyA(i)), k, what)
		}
	}

	// The process died: every acknowledged write is there (and those in
	// flight may be: A's, held in the switch, and the Sync write).
	got := keys(killed)
	have := make(map[string]bool, len(got))
	for _, k := range got {
		have[k] = true
	}
	for i := range na {
		require.True(t, have[string(keyA(i))], "acknowledged key a%d lost", i)
	}
	for i := range nb {
		require.True(t, have[string(keyB(i))], "acknowledged key b%d lost", i)
	}
	// The machine died before the first switch's fsync: the first WAL torn.
	torn := cloneFS(t, vfs.Default, dir)
	path := torn.PathJoin(dir, wals[0])
	data, err := readFile(torn, path)
	require.NoError(t, err)
	end := len(data)
	for end > 0 && data[end-1] == 0 {
		end-- // the zero tail of a mapped WAL
	}
	rewriteFile(t, torn, path, data[:end/2])
	got = keys(torn)
	require.NotEmpty(t, got)
	prefixOfA(got, na-1, "the first WAL torn: its end gone, and every later WAL")
	// ... or lost the directory entry of the second WAL.
	gone := cloneFS(t, vfs.Default, dir)
	require.NoError(t, gone.Remove(gone.PathJoin(dir, wals[1])))
	got = keys(gone)
	require.NotEmpty(t, got)
	prefixOfA(got, na, "the second WAL gone: the first one's writes only")

	h.release()
	require.NoError(t, <-aDone)
	require.NoError(t, <-syncDone)
	require.GreaterOrEqual(t, db.Metrics().WALSwitchWaits, uint64(1), "the Sync write's wait")
	// Once a Sync write has returned, a missing WAL is damage, not a
	// crash: the WAL after it says it was fsynced (the synced offset in
	// the records written after the fsync).
	require.NoError(t, db.Set([]byte("t"), []byte("after the sync"), NoSync))
	damaged := cloneFS(t, vfs.Default, dir)
	h.releaseFlushes()
	require.NoError(t, db.Close())
	syncedWALs := walFiles(t, damaged, dir)
	slices.Sort(syncedWALs)
	require.NoError(t, damaged.Remove(damaged.PathJoin(dir, syncedWALs[len(syncedWALs)-2])))
	_, err = Open(dir, &Options{FS: damaged})
	require.ErrorIs(t, err, ErrCorruption)
}

func switchKeyA(i int) []byte { return fmt.Appendf(nil, "a%06d", i) }
func switchKeyB(i int) []byte { return fmt.Appendf(nil, "b%06d", i) }

// heldSwitch is a store one of whose memtable switches is held in its
// second half (the old WAL not fsynced) and whose flushes are held, so that
// its WALs stay: writer A's write that made that switch has not returned.
type heldSwitch struct {
	db                      *DB
	acked                   atomic.Int64 // writer A's acknowledged writes (keys switchKeyA(0..))
	aDone                   chan error   // writer A's end, once released
	release, releaseFlushes func()       // each closes its gate once
}

// holdFirstSwitch is holdSwitch of the first switch.
func holdFirstSwitch(t *testing.T, dir string, opts Options) *heldSwitch {
	return holdSwitch(t, dir, opts, 1)
}

// holdSwitch opens a store in dir with opts, 64 KiB memtables and flushes
// held (opts.EventListener's other callbacks kept), and has writer A write
// until its write makes the n-th switch and that switch's second half is
// held (the others go on). Both gates are opened at the end of the test if
// it did not.
func holdSwitch(t *testing.T, dir string, opts Options, n int32) *heldSwitch {
	release, flushes := make(chan struct{}), make(chan struct{})
	var releaseOnce, flushOnce sync.Once
	h := &heldSwitch{aDone: make(chan error, 1),
		release:        func() { releaseOnce.Do(func() { close(release) }) },
		releaseFlushes: func() { flushOnce.Do(func() { close(flushes) }) }}
	t.Cleanup(h.releaseFlushes)
	t.Cleanup(h.release)
	opts.MemTableSize = 64 << 10
	var l EventListener
	if opts.EventListener != nil {
		l = *opts.EventListener
	}
	l.FlushBegin = func(FlushInfo) { <-flushes }
	opts.EventListener = &l
	db, err := Open(dir, &opts)
	require.NoError(t, err)
	h.db = db
	finishing := make(chan struct{})
	var switches atomic.Int32
	db.switchFinishing = func() {
		if switches.Add(1) == n { // this switch only: the others go on
			close(finishing)
			<-release
		}
	}
	go func() {
		for i := 0; ; i++ {
			if err := db.Set(switchKeyA(i), crashValue(switchKeyA(i)), NoSync); err != nil {
				h.aDone <- err
				return
			}
			h.acked.Store(int64(i + 1))
			select {
			case <-finishing:
				h.aDone <- nil
				return
			default:
			}
		}
	}()
	select {
	case <-finishing:
	case err := <-h.aDone:
		t.Fatalf("writer A stopped before a switch: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no memtable switch")
	}
	return h
}

// TestFlushIgnoresLaterSwitches: a flush installs its tables once the
// switches away from the WALs it deletes have finished (the last of them
// made its next WAL's directory entry durable); a later switch still in
// its second half (its old WAL's fsync) does not hold the install, nor the
// writers a stall would hold with it.
func TestFlushIgnoresLaterSwitches(t *testing.T) {
	flushed := make(chan FlushInfo, 16)
	// The second switch (its old WAL the second memtable's) is held in its
	// second half; the first one finishes.
	h := holdSwitch(t, t.TempDir(), Options{MergeFlushL0Depth: -1,
		EventListener: &EventListener{FlushEnd: func(i FlushInfo) { flushed <- i }}}, 2)
	// The first memtable's flush (next WAL: the second memtable's) installs
	// while the second switch is held.
	h.releaseFlushes()
	select {
	case i := <-flushed:
		require.NoError(t, i.Err)
		require.Equal(t, 1, i.Memtables)
	case <-time.After(30 * time.Second):
		t.Fatal("the flush waited for a later switch")
	}
	h.release()
	require.NoError(t, <-h.aDone)
	require.NoError(t, h.db.Close())
}

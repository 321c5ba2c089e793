package kv

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// blockedRemoves wraps an in-memory file system so that every Remove of a
// table or WAL waits until the gate is closed, and counts the Removes that
// started.
type blockedRemoves struct {
	fs      vfs.FS
	gate    chan struct{}
	started atomic.Int64
}

func newBlockedRemoves() *blockedRemoves {
	b := &blockedRemoves{gate: make(chan struct{})}
	b.fs = errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpRemove && (strings.HasSuffix(op.Path, ".sst") || strings.HasSuffix(op.Path, ".log")) {
			b.started.Add(1)
			<-b.gate
		}
		return nil
	}))
	return b
}

// liveTables returns the file numbers of the tables of db's current
// version.
func liveTables(db *DB) map[uint64]bool {
	live := map[uint64]bool{}
	v := db.currentVersion()
	defer v.unref()
	for _, ts := range v.Levels {
		for _, tm := range ts {
			live[tm.FileNum] = true
		}
	}
	return live
}

// obsoleteFiles lists the tables and WALs in dir that the store's current
// version and WAL do not use. It pauses background compactions and waits
// for the queued removals first: a compaction under way has outputs no
// version lists yet, and one just finished has inputs still queued.
func obsoleteFiles(t *testing.T, db *DB, fs vfs.FS) []string {
	t.Helper()
	defer db.pauseCompactions()()
	db.waitDeletions()
	live := map[string]bool{}
	for fn := range liveTables(db) {
		live[tableFileName(fn)] = true
	}
	db.mu.Lock()
	live[walFileName(db.mu.mem.walNum)] = true
	for _, m := range db.mu.imm {
		live[walFileName(m.walNum)] = true
	}
	db.mu.Unlock()
	names, err := fs.List("db")
	require.NoError(t, err)
	var out []string
	for _, n := range names {
		if ft, _ := parseFileName(n); (ft == fileTypeTable || ft == fileTypeWAL) && !live[n] {
			out = append(out, n)
		}
	}
	return out
}

// TestDeletionsOffTheFlushPath: with every Remove blocked, flushes and
// background compactions go on (the old WALs and replaced tables wait in
// the queue), reads and writes see every key; once Removes run again the
// queue drains, and Compact returns with no obsolete table or WAL left.
// (When the flush removed its WAL itself, the second Flush waited for the
// first WAL's removal forever.)
func TestDeletionsOffTheFlushPath(t *testing.T) {
	b := newBlockedRemoves()
	db, err := Open("db", &Options{FS: b.fs, MemTableSize: 16 << 10, L0CompactionThreshold: 2, TargetFileSize: 8 << 10})
	require.NoError(t, err)
	defer db.Close()
	const n = 3000
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if err := db.Set(fmt.Appendf(nil, "k%05d", i), fmt.Appendf(nil, "v%d", i), NoSync); err != nil {
				done <- err
				return
			}
			if i%500 == 499 {
				if err := db.Flush(); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		close(b.gate) // so that Close can finish
		t.Fatal("writes and flushes waited for a blocked Remove")
	}
	require.Positive(t, db.Metrics().Flushes, "no flush ran")
	require.Eventually(t, func() bool { return b.started.Load() > 0 }, time.Minute, time.Millisecond, "nothing was queued for removal")
	for i := 0; i < n; i++ {
		v, err := db.Get(fmt.Appendf(nil, "k%05d", i))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("v%d", i), string(v))
	}
	close(b.gate)
	require.NoError(t, db.Compact(nil, nil))
	require.Empty(t, obsoleteFiles(t, db, b.fs), "obsolete files left after Compact")
}

// TestCloseDrainsDeletions: Close waits for the queued removals (the
// directory lock is released only after them), and a version an iterator
// releases after Close deletes nothing (the next Open does).
func TestCloseDrainsDeletions(t *testing.T) {
	b := newBlockedRemoves()
	opts := &Options{FS: b.fs, MemTableSize: 16 << 10, L0CompactionThreshold: 2, TargetFileSize: 8 << 10}
	db, err := Open("db", opts)
	require.NoError(t, err)
	for i := 0; i < 2000; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%05d", i), []byte("v"), NoSync))
	}
	require.NoError(t, db.Flush())
	it, err := db.NewIter(nil) // holds the version of the first tables
	require.NoError(t, err)
	first := liveTables(db)
	for i := 0; i < 2000; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%05d", i), []byte("w"), NoSync))
	}
	require.NoError(t, db.Flush())
	// Wait for a compaction to replace a table the iterator holds, and for
	// a removal to be under way.
	require.Eventually(t, func() bool {
		now := liveTables(db)
		for fn := range first {
			if !now[fn] {
				return b.started.Load() > 0
			}
		}
		return false
	}, time.Minute, time.Millisecond)

	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with removals still blocked", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(b.gate)
	require.NoError(t, <-closed)
	before, err := b.fs.List("db")
	require.NoError(t, err)
	_ = it.Close() // releases the first tables' version after Close
	after, err := b.fs.List("db")
	require.NoError(t, err)
	require.ElementsMatch(t, before, after, "a version released after Close removed files")

	db, err = Open("db", opts)
	require.NoError(t, err)
	defer db.Close()
	require.Empty(t, obsoleteFiles(t, db, b.fs), "obsolete files left after reopen")
	// The iterator held tables a compaction had replaced; Open removed them.
	now, err := b.fs.List("db")
	require.NoError(t, err)
	var held []string
	for _, n := range after {
		if ft, _ := parseFileName(n); ft == fileTypeTable && !slices.Contains(now, n) {
			held = append(held, n)
		}
	}
	require.NotEmpty(t, held, "the iterator held no replaced table: the test checks nothing")
	v, err := db.Get([]byte("k00007"))
	require.NoError(t, err)
	require.Equal(t, "w", string(v))
}

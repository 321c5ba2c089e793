package kv

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestCompactInvalidRange: Compact with start > end fails with an error
// wrapping kv's ErrInvalidOptions (it used to wrap only the compaction
// package's sentinel), before it flushes anything.
func TestCompactInvalidRange(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set([]byte("k"), []byte("v"), Sync))
	err = db.Compact([]byte("z"), []byte("a"))
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.Zero(t, db.Metrics().Flushes, "an invalid Compact does nothing")
	require.NoError(t, db.Compact([]byte("a"), []byte("a")), "start == end is one key")
}

// TestCompactCanceledByClose: a manual Compact that Close cancels fails
// with an error wrapping ErrClosed (it used to wrap only
// compaction.ErrCanceled), and the store reopens with its keys.
//
// The compaction's inputs start with more tombstones than the compaction's
// cancel check interval, which a bottommost compaction drops, so it is
// canceled before it creates an output table. (Aborting an output table
// mid-write is a data race in package sstable, reported separately.)
func TestCompactCanceledByClose(t *testing.T) {
	mem := vfs.NewMem()
	g := newGateFS(mem)
	db, err := Open("db", &Options{FS: g})
	require.NoError(t, err)
	const n = 10000 // more than the compaction's cancel check interval
	for i := 0; i < n; i++ {
		require.NoError(t, db.Delete(fmt.Appendf(nil, "key%05d", i), NoSync))
		if i == n/2 {
			require.NoError(t, db.Flush())
		}
	}
	require.NoError(t, db.Set([]byte("zz"), []byte("v"), NoSync))
	require.NoError(t, db.Flush())
	l0 := db.mu.current.Levels[0]
	require.Len(t, l0, 2)
	// Wait until both tables are in the table cache: the next Open of the
	// newest one is the compaction's, for its input.
	require.Eventually(t, func() bool {
		db.tc.mu.Lock()
		defer db.tc.mu.Unlock()
		for _, m := range l0 {
			if e := db.tc.m[m.FileNum]; e == nil || e.r == nil {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(g.release) }) }
	defer release()
	g.target.Store(tableFileName(l0[1].FileNum))
	compacted := make(chan error, 1)
	go func() { compacted <- db.Compact(nil, nil) }()
	<-g.entered
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	<-db.closeCh // Close has canceled compactions
	release()
	err = <-compacted
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, err, compaction.ErrCanceled)
	require.NoError(t, <-closed)

	db, err = Open("db", &Options{FS: mem})
	require.NoError(t, err)
	defer db.Close()
	v, err := db.Get([]byte("zz"))
	require.NoError(t, err)
	require.Equal(t, "v", string(v))
	_, err = db.Get([]byte("key00007"))
	require.ErrorIs(t, err, ErrNotFound)
}

package kv

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// nextWALValue is the value the next-WAL tests write for key i.
func nextWALValue(i int) []byte { return bytes.Repeat(fmt.Appendf(nil, "v%d-", i), 8) }

// writeNextWALKeys writes keys [from, to) with NoSync.
func writeNextWALKeys(t *testing.T, db *DB, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%07d", i), nextWALValue(i), NoSync))
	}
}

// requireNextWALKeys opens the store in dir, requires keys [0, n) and no
// prepared WAL left after Open.
func requireNextWALKeys(t *testing.T, dir string, n int) {
	t.Helper()
	db, err := Open(dir, nil)
	require.NoError(t, err)
	requireNextWALKeysIn(t, db, n)
	require.NoError(t, db.Close())
	requireNoFile(t, dir, nextWALFileName)
}

// requireNextWALKeysIn requires keys [0, n) in db.
func requireNextWALKeysIn(t *testing.T, db *DB, n int) {
	t.Helper()
	for i := range n {
		v, err := db.Get(fmt.Appendf(nil, "key%07d", i))
		require.NoError(t, err, "key %d", i)
		require.Equal(t, nextWALValue(i), v, "key %d", i)
	}
}

// openWithPreparedWAL opens a store with small memtables in dir, writes
// keys [0, 1000) and flushes them (the first rotation), and returns it with
// the preparation that rotation started, finished.
func openWithPreparedWAL(t *testing.T, dir string, opts *Options) (*DB, *walPrep) {
	t.Helper()
	opts.MemTableSize = 256 << 10
	db, err := Open(dir, opts)
	require.NoError(t, err)
	require.Nil(t, db.walNext, "no WAL is prepared before the first rotation")
	writeNextWALKeys(t, db, 0, 1000)
	require.NoError(t, db.Flush())
	p := db.walNext
	require.NotNil(t, p, "NoSync writers: the rotation prepared the next WAL")
	<-p.done
	return db, p
}

func skipUnlessWALPrepared(t *testing.T) {
	if !walMappingSupported {
		t.Skip("the next WAL is prepared for mapped WALs, on Linux only")
	}
}

func requireNoFile(t *testing.T, dir, name string) {
	t.Helper()
	_, err := vfs.Default.Stat(vfs.Default.PathJoin(dir, name))
	require.ErrorIs(t, err, os.ErrNotExist, "%s left in the store", name)
}

// TestNextWALPrepared: a rotation prepares the WAL after the new one, and
// the next rotation takes it under its number. Records written to it survive
// a process killed while the store holds a prepared WAL (the directory
// copied while open), Close removes the prepared file, and Open removes one
// a crash left.
func TestNextWALPrepared(t *testing.T) {
	skipUnlessWALPrepared(t)
	dir := t.TempDir()
	// No compaction, so that only the WALs change while the store is copied.
	db, p := openWithPreparedWAL(t, dir, &Options{L0CompactionThreshold: 100, L0CompactionFileThreshold: 100})
	require.NoError(t, p.err)
	prepared := p.w
	require.NotNil(t, prepared.mapped, "a prepared WAL is mapped")
	fi, err := vfs.Default.Stat(vfs.Default.PathJoin(dir, nextWALFileName))
	require.NoError(t, err)
	require.EqualValues(t, db.walPreallocateSize(), fi.Size(), "allocated ahead")

	writeNextWALKeys(t, db, 1000, 2000)
	require.NoError(t, db.Flush()) // rotation 2 takes the prepared WAL
	require.Same(t, prepared, db.wal)
	require.NotNil(t, db.walNext, "and prepares another")
	<-db.walNext.done
	require.NotSame(t, prepared, db.walNext.w)
	_, err = vfs.Default.Stat(vfs.Default.PathJoin(dir, walFileName(db.wal.num)))
	require.NoError(t, err, "the prepared WAL has its number's name")
	writeNextWALKeys(t, db, 2000, 3000) // into the renamed WAL, not flushed

	crashed := t.TempDir() // the copy holds a prepared WAL too
	db.waitDeletions()     // the flushed WALs' removals, queued by the flushes
	copyStoreFiles(t, vfs.Default, dir, vfs.Default, crashed)
	_, err = vfs.Default.Stat(vfs.Default.PathJoin(crashed, nextWALFileName))
	require.NoError(t, err, "the copy holds the prepared WAL")
	requireNextWALKeys(t, crashed, 3000)

	require.NoError(t, db.Close())
	requireNoFile(t, dir, nextWALFileName)
	requireNextWALKeys(t, dir, 3000)
}

// TestNextWALFallbacks: a WAL that cannot be prepared, or whose prepared
// file is gone at the rotation, is created by the rotation as before,
// and nothing written is lost.
func TestNextWALFallbacks(t *testing.T) {
	skipUnlessWALPrepared(t)
	t.Run("prepare fails", func(t *testing.T) {
		dir := t.TempDir()
		// A directory in the prepared file's place (not empty, so no one
		// removes it): every preparation fails.
		blocker := vfs.Default.PathJoin(dir, nextWALFileName)
		require.NoError(t, vfs.Default.MkdirAll(blocker, 0o755))
		f, err := vfs.Default.Create(vfs.Default.PathJoin(blocker, "x"), vfs.WriteCategoryUnspecified)
		require.NoError(t, err)
		require.NoError(t, f.Close())

		db, p := openWithPreparedWAL(t, dir, &Options{})
		require.Error(t, p.err, "round 0")
		for r := 1; r < 3; r++ {
			writeNextWALKeys(t, db, r*1000, (r+1)*1000)
			require.NoError(t, db.Flush())
			p := db.walNext
			require.NotNil(t, p)
			<-p.done
			require.Error(t, p.err, "round %d", r)
		}
		writeNextWALKeys(t, db, 3000, 4000)
		require.NoError(t, db.Close())
		db, err = Open(dir, nil)
		require.NoError(t, err)
		requireNextWALKeysIn(t, db, 4000)
		require.NoError(t, db.Close())
	})
	t.Run("prepared file gone", func(t *testing.T) {
		dir := t.TempDir()
		db, p := openWithPreparedWAL(t, dir, &Options{})
		require.NoError(t, p.err)
		require.NoError(t, vfs.Default.Remove(vfs.Default.PathJoin(dir, nextWALFileName)))
		writeNextWALKeys(t, db, 1000, 2000)
		require.NoError(t, db.Flush()) // the rename fails: a new WAL instead
		require.NotSame(t, p.w, db.wal)
		writeNextWALKeys(t, db, 2000, 3000)
		require.NoError(t, db.Close())
		requireNoFile(t, dir, nextWALFileName)
		requireNextWALKeys(t, dir, 3000)
	})
}

// TestNextWALOnlyForNoSync: a WAL whose writers sync is not prepared (its
// pages are populated by windows); a prepared WAL whose rotation comes after
// the writers began to sync is not used, and its file is removed.
func TestNextWALOnlyForNoSync(t *testing.T) {
	skipUnlessWALPrepared(t)
	dir := t.TempDir()
	db, p := openWithPreparedWAL(t, dir, &Options{})
	require.NoError(t, p.err)
	for i := 1000; i < 1100; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%07d", i), nextWALValue(i), Sync))
	}
	require.NoError(t, db.Flush())
	require.NotSame(t, p.w, db.wal, "the WAL after Sync writes is populated by windows, not prepared whole")
	require.Nil(t, db.walNext, "and none is prepared after it")
	requireNoFile(t, dir, nextWALFileName)
	require.NoError(t, db.Close())
	requireNextWALKeys(t, dir, 1100)
}

// TestNextWALConcurrentWriters: writers on several goroutines through many
// rotations, each taking a prepared WAL (run with -race); every write is
// there after a reopen.
func TestNextWALConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, &Options{MemTableSize: 64 << 10})
	require.NoError(t, err)
	const writers, each = 4, 5000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := g * each; i < (g+1)*each; i++ {
				if err := db.Set(fmt.Appendf(nil, "key%07d", i), nextWALValue(i), NoSync); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Greater(t, db.Metrics().Flushes, uint64(10), "many rotations")
	require.NoError(t, db.Close())
	requireNextWALKeys(t, dir, writers*each)
}

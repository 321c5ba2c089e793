package kv

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/filter/prefix"
	"github.com/adaptkv/adaptkv/filter/quotient"
	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func TestErrors(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)

	// Keys and values.
	require.ErrorIs(t, db.Set(nil, []byte("v"), nil), ErrEmptyKey)
	require.ErrorIs(t, db.Set([]byte{}, []byte("v"), nil), ErrEmptyKey)
	require.ErrorIs(t, db.Delete(nil, nil), ErrEmptyKey)
	_, err = db.Get(nil)
	require.ErrorIs(t, err, ErrEmptyKey)
	big := bytes.Repeat([]byte("k"), MaxKeySize+1)
	require.ErrorIs(t, db.Set(big, nil, nil), ErrKeyTooLarge)
	require.ErrorIs(t, db.Delete(big, nil), ErrKeyTooLarge)
	_, err = db.Get(big)
	require.ErrorIs(t, err, ErrKeyTooLarge)
	require.NoError(t, db.Set(big[:MaxKeySize], []byte("max key"), nil))
	require.ErrorIs(t, db.Set([]byte("k"), make([]byte, MaxValueSize+1), nil), ErrValueTooLarge)
	b := NewBatch()
	require.ErrorIs(t, b.Set(nil, nil), ErrEmptyKey)
	require.ErrorIs(t, b.Delete(big), ErrKeyTooLarge)
	require.ErrorIs(t, b.Set([]byte("k"), make([]byte, MaxValueSize+1)), ErrValueTooLarge)
	require.Zero(t, b.Count())
	_, err = db.Get([]byte("absent"))
	require.ErrorIs(t, err, ErrNotFound)

	// A second open of a locked directory.
	_, err = Open("db", &Options{FS: fs})
	require.ErrorIs(t, err, ErrLocked)

	// Use after Close.
	snap := db.NewSnapshot()
	it, err := db.NewIter(nil)
	require.NoError(t, err)
	require.NoError(t, it.Close())
	require.ErrorIs(t, it.Close(), ErrClosed)
	require.False(t, it.First())
	require.ErrorIs(t, it.Error(), ErrClosed)
	require.NoError(t, snap.Close())
	require.ErrorIs(t, snap.Close(), ErrClosed)
	_, err = snap.Get([]byte("k"))
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, db.Close())
	require.ErrorIs(t, db.Close(), ErrClosed)
	require.ErrorIs(t, db.Set([]byte("k"), nil, nil), ErrClosed)
	require.ErrorIs(t, db.Delete([]byte("k"), nil), ErrClosed)
	require.ErrorIs(t, db.Apply(b, nil), ErrClosed)
	_, err = db.Get([]byte("k"))
	require.ErrorIs(t, err, ErrClosed)
	_, err = db.NewIter(nil)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, db.Flush(), ErrClosed)
	require.ErrorIs(t, db.Compact(nil, nil), ErrClosed)

	// The lock is released by Close.
	db, err = Open("db", &Options{FS: fs})
	require.NoError(t, err)
	v, err := db.Get(big[:MaxKeySize])
	require.NoError(t, err)
	require.Equal(t, "max key", string(v))
	require.NoError(t, db.Close())

	// Read-only.
	ro, err := Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	require.ErrorIs(t, ro.Set([]byte("k"), nil, nil), ErrReadOnly)
	require.ErrorIs(t, ro.Delete([]byte("k"), nil), ErrReadOnly)
	b = NewBatch()
	require.NoError(t, b.Set([]byte("k"), nil))
	require.ErrorIs(t, ro.Apply(b, nil), ErrReadOnly)
	require.ErrorIs(t, ro.Flush(), ErrReadOnly)
	require.ErrorIs(t, ro.Compact(nil, nil), ErrReadOnly)
	v, err = ro.Get(big[:MaxKeySize])
	require.NoError(t, err)
	require.Equal(t, "max key", string(v))
	require.NoError(t, ro.Close())
	_, err = Open("nowhere", &Options{FS: fs, ReadOnly: true})
	require.Error(t, err)

	// Options.
	_, err = Open("db2", &Options{FS: fs, FilterPolicy: "no-such-filter"})
	require.ErrorIs(t, err, filterpolicy.ErrUnknownPolicy)
	require.ErrorIs(t, err, ErrUnknownPolicy)
	for _, o := range []Options{{MemTableSize: -1}, {L0CompactionFileThreshold: -1}, {MaxConcurrentCompactions: -1}, {TableFormat: sstable.FormatRow + 1},
		{RemoteCacheSize: 4<<20 + 1}, {BlockCacheSize: 1 << 20, RemoteCacheSize: 1 << 20}, {FixRule: FixCached + 1}, {RecordAbsent: RecordWhileRewriting + 1}} {
		o.FS = fs
		_, err = Open("db2", &o)
		require.ErrorIs(t, err, ErrInvalidOptions, "%+v", o)
	}
	_, err = Open("db2", &Options{FS: fs, KnownNegatives: MaxKnownNegatives + 1})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

// TestLockedRealFS checks the file lock on the OS file system.
func TestLockedRealFS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := Open(dir, nil)
	require.NoError(t, err)
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, ErrLocked)
	require.NoError(t, db.Set([]byte("a"), []byte("b"), nil))
	require.NoError(t, db.Close())
	db, err = Open(dir, &Options{Filter: filterpolicy.NewBloom(12)})
	require.NoError(t, err)
	v, err := db.Get([]byte("a"))
	require.NoError(t, err)
	require.Equal(t, "b", string(v))
	require.NoError(t, db.Close())
}

const lockEnvDir = "KV_LOCK_CHILD_DIR"

// TestLockedOtherProcess holds the store open in a child process: Open in
// this process fails with ErrLocked until the child dies.
func TestLockedOtherProcess(t *testing.T) {
	if dir := os.Getenv(lockEnvDir); dir != "" {
		db, err := Open(dir, nil)
		if err != nil {
			fmt.Println("open failed:", err)
			os.Exit(2)
		}
		fmt.Println("locked")
		time.Sleep(time.Minute) // killed by the parent
		db.Close()
		return
	}
	dir := filepath.Join(t.TempDir(), "db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockedOtherProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockEnvDir+"="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(out)
	locked := false
	for sc.Scan() {
		if sc.Text() == "locked" {
			locked = true
			break
		}
	}
	require.True(t, locked, "child did not open the store")
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, ErrLocked)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	db, err := Open(dir, nil)
	require.NoError(t, err, "the lock dies with its process")
	require.NoError(t, db.Close())
}

// TestReadOnly: a read-only open replays the WAL into memory, serves reads
// and iterators, and leaves every file as it was.
func TestReadOnly(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, MemTableSize: 16 << 10})
	require.NoError(t, err)
	for i := 0; i < 2000; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%05d", i), fmt.Appendf(nil, "v%d", i), NoSync))
	}
	require.NoError(t, db.Close()) // the last memtable stays in the WAL
	listing := func() map[string]int64 {
		names, err := fs.List("db")
		require.NoError(t, err)
		out := map[string]int64{}
		for _, n := range names {
			st, err := fs.Stat(fs.PathJoin("db", n))
			require.NoError(t, err)
			out[n] = st.Size()
		}
		return out
	}
	before := listing()
	require.NotEmpty(t, walFiles(t, fs, "db"))
	ro, err := Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	for i := 0; i < 2000; i++ {
		v, err := ro.Get(fmt.Appendf(nil, "k%05d", i))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("v%d", i), string(v))
	}
	it, err := ro.NewIter(nil)
	require.NoError(t, err)
	n := 0
	for ok := it.Last(); ok; ok = it.Prev() {
		n++
	}
	require.NoError(t, it.Close())
	require.Equal(t, 2000, n)
	require.NoError(t, ro.Close())
	require.Equal(t, before, listing(), "a read-only open must not change files")
}

// TestOneCorruptionError checks that every package's corruption sentinel is
// recognized as the store's ErrCorruption, so a caller needs one errors.Is
// whichever layer found the damage, and that the sentinels stay apart.
func TestOneCorruptionError(t *testing.T) {
	kinds := map[string]error{
		"sstable":      sstable.ErrCorrupt,
		"quotient":     quotient.ErrCorrupt,
		"prefix":       prefix.ErrCorrupt,
		"filter":       filter.ErrCorrupt,
		"filterpolicy": filterpolicy.ErrCorruptBlock,
	}
	for name, sentinel := range kinds {
		wrapped := fmt.Errorf("open table 7: %w: block 3", sentinel)
		require.ErrorIs(t, wrapped, ErrCorruption, name)
		require.ErrorIs(t, wrapped, sentinel, name)
		for other, o := range kinds {
			if other != name {
				require.NotErrorIs(t, wrapped, o, "%s is not %s", name, other)
			}
		}
	}
	require.NotErrorIs(t, ErrCorruption, sstable.ErrCorrupt)
}

// TestOneInvalidOptionsAndClosedError: every package's ErrInvalidOptions
// and ErrClosed are the module's one value of each, so one errors.Is
// answers whichever layer rejected an option or was closed; a value a
// lower layer rejects reaches the caller with one mention of the sentinel.
func TestOneInvalidOptionsAndClosedError(t *testing.T) {
	for name, e := range map[string]error{
		"sstable": sstable.ErrInvalidOptions, "compaction": compaction.ErrInvalidOptions,
		"filterpolicy": filterpolicy.ErrInvalidOptions, "filter": filter.ErrInvalidOptions,
		"quotient": quotient.ErrInvalidOptions,
	} {
		require.Same(t, ErrInvalidOptions, e, name)
	}
	require.Same(t, ErrClosed, sstable.ErrClosed)
	require.Same(t, ErrClosed, base.ErrClosed)
	require.NotErrorIs(t, ErrInvalidOptions, ErrClosed)

	// A filter kind's own range check (adaptive's RemainderBits), through the
	// registry: kv's sentinel matches, mentioned once.
	_, err := filterpolicy.New("taf", filterpolicy.Options{RemainderBits: 99})
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.Equal(t, 1, strings.Count(err.Error(), "invalid options"), err.Error())
}

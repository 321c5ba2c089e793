package kv

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// liveWAL returns the path and the bytes of the one WAL of the store in dir
// (OS file system), read while the store may still have it open.
func liveWAL(t *testing.T, dir string) (string, []byte) {
	names, err := vfs.Default.List(dir)
	require.NoError(t, err)
	var wals []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			wals = append(wals, n)
		}
	}
	require.Len(t, wals, 1, "files: %v", names)
	path := vfs.Default.PathJoin(dir, wals[0])
	data, err := readFile(vfs.Default, path)
	require.NoError(t, err)
	return path, data
}

// TestWALMappedSurvivesProcess: with the WAL mapped (the default on Linux),
// NoSync writes are in the file's page cache when they return. The test
// copies the open store's files, as a process killed at that moment would
// leave them, and opens the copy: every write is there, read from a WAL
// whose allocated tail is zeros (the end of the log, not damage). A batch
// larger than the WAL's allocation step grows the mapping. Close cuts the
// zeros off. TestCrashKill kills a real process.
func TestWALMappedSurvivesProcess(t *testing.T) {
	if !walMappingSupported {
		t.Skip("the WAL is mapped on Linux only")
	}
	dir := t.TempDir()
	// No flush: the WAL is the only file that changes while it is copied.
	opts := &Options{MemTableSize: 1 << 20}
	db, err := Open(dir, opts)
	require.NoError(t, err)
	const n = 3000
	for i := range n {
		k := fmt.Appendf(nil, "key%06d", i)
		require.NoError(t, db.Set(k, bytes.Repeat(k, 4), NoSync))
	}
	step := db.walPreallocateSize()
	_, data := liveWAL(t, dir)
	require.Equal(t, step, len(data), "the WAL is allocated a step ahead")
	big := NewBatch() // about 1.5 steps in one record
	for i := range 700 {
		k := fmt.Appendf(nil, "big%06d", i)
		require.NoError(t, big.Set(k, bytes.Repeat([]byte{'v'}, 2400)))
	}
	require.NoError(t, db.Apply(big, NoSync)) // the last write: the next would switch memtables
	path, data := liveWAL(t, dir)
	require.Greater(t, len(data), step, "the mapping grew")
	end := bytes.LastIndexFunc(data, func(r rune) bool { return r != 0 }) + 1
	require.Less(t, end, len(data), "a zero tail follows the records")

	crashed := t.TempDir()
	copyStoreFiles(t, vfs.Default, dir, vfs.Default, crashed)
	copyDB, err := Open(crashed, opts)
	require.NoError(t, err)
	for i := range n {
		k := fmt.Appendf(nil, "key%06d", i)
		v, err := copyDB.Get(k)
		require.NoError(t, err, "key %d", i)
		require.Equal(t, bytes.Repeat(k, 4), v)
	}
	v, err := copyDB.Get([]byte("big000699"))
	require.NoError(t, err)
	require.Len(t, v, 2400)
	require.NoError(t, copyDB.Close())

	require.NoError(t, db.Close())
	closed, err := readFile(vfs.Default, path)
	require.NoError(t, err)
	require.Equal(t, data[:end], closed[:end], "Close keeps every record")
	require.NotZero(t, closed[len(closed)-1], "Close cut the zero tail")
	good, err := replayWAL(vfs.Default, path, false, -1, func([]byte) error { return nil })
	require.NoError(t, err, "a closed WAL reads to its end, even as an older WAL")
	require.Equal(t, int64(len(closed)), good)
}

// TestWALMappingOptions: the WAL is mapped only by default on the OS file
// system; DisableWALMapping and WALBufferNoSync write it with write(2), so
// its size is what was written, not a step allocated ahead.
func TestWALMappingOptions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   Options
		mapped bool
	}{
		{"default", Options{}, walMappingSupported},
		{"DisableWALMapping", Options{DisableWALMapping: true}, false},
		{"WALBufferNoSync", Options{WALBufferNoSync: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, &tc.opts)
			require.NoError(t, err)
			require.NoError(t, db.Set([]byte("k"), []byte("v"), Sync))
			_, data := liveWAL(t, dir)
			if tc.mapped {
				require.Equal(t, db.walPreallocateSize(), len(data))
			} else {
				require.Less(t, len(data), 100, "only the record was written")
			}
			require.NoError(t, db.Close())
			db, err = Open(dir, &tc.opts)
			require.NoError(t, err)
			v, err := db.Get([]byte("k"))
			require.NoError(t, err)
			require.Equal(t, []byte("v"), v)
			require.NoError(t, db.Close())
		})
	}
}

// TestAllZeroWAL: an all-zero WAL is a WAL that got no record (a mapped WAL
// is allocated before its first record), so it neither makes a directory
// without CURRENT a damaged store nor counts as the newest WAL with data;
// one nonzero byte does.
func TestAllZeroWAL(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("db", 0o755))
	writeFile(t, fs, "db/"+walFileName(5), make([]byte, 4096))
	db, err := Open("db", &Options{FS: fs})
	require.NoError(t, err, "zeros are no data")
	require.NoError(t, db.Close())

	fs = vfs.NewMem()
	require.NoError(t, fs.MkdirAll("db", 0o755))
	junk := make([]byte, 4096)
	junk[100] = 1
	writeFile(t, fs, "db/"+walFileName(5), junk)
	_, err = Open("db", &Options{FS: fs})
	require.ErrorIs(t, err, ErrCorruption, "a WAL with data and no CURRENT")
}

// walHasData reads a WAL a block at a time: a nonzero byte anywhere, in
// the first block or past several, is data; zeros to the end are not.
func TestWALHasData(t *testing.T) {
	fs := vfs.NewMem()
	for _, c := range []struct {
		size, nonzero int
		want          bool
	}{
		{0, -1, false}, {1, -1, false}, {200 << 10, -1, false},
		{1, 0, true}, {4096, 100, true}, {200 << 10, 200<<10 - 1, true}, {200 << 10, 64 << 10, true},
	} {
		b := make([]byte, c.size)
		if c.nonzero >= 0 {
			b[c.nonzero] = 7
		}
		writeFile(t, fs, "wal", b)
		has, err := walHasData(fs, "wal")
		require.NoError(t, err)
		require.Equal(t, c.want, has, "size %d, nonzero byte at %d", c.size, c.nonzero)
	}
	_, err := walHasData(fs, "missing")
	require.Error(t, err)
}

// TestWALPopulateReach: a WAL mapping faults its pages in ahead of the
// writer, the whole mapping or a window that keeps up with the writer and
// never runs more than its reach ahead (across a growth of the mapping
// too); a WAL whose commit groups synced (one in eight or more) gives the
// next WAL's mapping a window, so that a Sync commit does not write a
// mapping's worth of zero pages, and a WAL written without Sync gives the
// next one the whole mapping again. The first WAL after Open starts with a
// window and widens to the whole mapping after widenAfterGroups groups
// without a sync; one Sync group among them keeps the window.
func TestWALPopulateReach(t *testing.T) {
	t.Run("populateReach", func(t *testing.T) {
		for _, tc := range []struct {
			groups, syncGroups int
			want               int
		}{
			{0, 0, populateWhole},
			{100, 0, populateWhole},
			{100, 12, populateWhole},
			{100, 13, populateWindow},
			{1, 1, populateWindow},
			{100, 100, populateWindow},
		} {
			w := &walWriter{groups: tc.groups, syncGroups: tc.syncGroups}
			require.Equal(t, tc.want, w.populateReach(), "%d of %d groups synced", tc.syncGroups, tc.groups)
		}
	})
	if !walMappingSupported {
		t.Skip("the WAL is mapped on Linux only")
	}
	t.Run("mapping", func(t *testing.T) {
		const size = 1<<20 + 100
		for _, reach := range []int{populateWhole, populateWindow} {
			f, err := vfs.Default.Create(vfs.Default.PathJoin(t.TempDir(), "wal"), vfs.WriteCategoryUnspecified)
			require.NoError(t, err)
			m, err := mapWAL(f, size, reach)
			require.NoError(t, err)
			record := bytes.Repeat([]byte{7}, 1000)
			for m.off < 3*size {
				_, err := m.Write(record)
				require.NoError(t, err)
				require.LessOrEqual(t, m.populated, len(m.data))
				require.GreaterOrEqual(t, m.populated, min(m.off+reach/2, len(m.data)), "reach %d: behind the writer", reach)
				if reach == populateWhole {
					require.Equal(t, len(m.data), m.populated)
				} else {
					require.LessOrEqual(t, m.populated-m.off, reach, "too far ahead")
				}
			}
			require.Greater(t, len(m.data), size, "the mapping grew")
			require.NoError(t, m.unmap())
			require.NoError(t, f.Close())
		}
	})
	t.Run("first WAL", func(t *testing.T) {
		for _, syncAt := range []int{-1, 0, widenAfterGroups - 2} {
			db, err := Open(t.TempDir(), nil)
			require.NoError(t, err)
			require.NotNil(t, db.wal.mapped, "the WAL is not mapped")
			require.Equal(t, populateWindow, db.wal.mapped.reach, "a new store's first WAL")
			for i := 0; i < widenAfterGroups+10; i++ {
				o := NoSync
				if i == syncAt {
					o = Sync
				}
				require.NoError(t, db.Set([]byte(fmt.Sprintf("k%06d", i)), []byte("v"), o))
				want := populateWindow
				if syncAt < 0 && i >= widenAfterGroups-1 {
					want = populateWhole
				}
				require.Equal(t, want, db.wal.mapped.reach, "after write %d (a Sync write at %d)", i, syncAt)
			}
			if syncAt < 0 {
				db.wal.mapped.populating.Wait()
				require.Equal(t, len(db.wal.mapped.data), db.wal.mapped.populated, "widened, not populated whole")
			}
			require.NoError(t, db.Close())
		}
	})
	t.Run("store", func(t *testing.T) {
		db, err := Open(t.TempDir(), &Options{MemTableSize: 64 << 10})
		require.NoError(t, err)
		defer func() { require.NoError(t, db.Close()) }()
		require.NotNil(t, db.wal.mapped, "the WAL is not mapped")
		value := bytes.Repeat([]byte{1}, 1000)
		// writeUntilRotated writes until the store is on its next WAL.
		writeUntilRotated := func(o *WriteOptions) {
			num := db.wal.num
			for i := 0; db.wal.num == num; i++ {
				require.NoError(t, db.Set([]byte(fmt.Sprintf("k%06d", i)), value, o))
			}
		}
		writeUntilRotated(Sync)
		require.Equal(t, populateWindow, db.wal.mapped.reach, "after a WAL of Sync writes")
		// The next WAL's first group is the Sync write that filled the
		// last one; the rest do not sync.
		writeUntilRotated(NoSync)
		require.Equal(t, populateWhole, db.wal.mapped.reach, "after a WAL of NoSync writes")
	})
}

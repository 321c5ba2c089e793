package kv

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// damageStore writes keys, flushes them (the flush's edit is the
// manifest's last record, and its WAL is deleted once the edit is
// durable), writes more keys that stay in the WAL, and closes.
func damageStore(t *testing.T) (vfs.FS, string) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, KnownNegatives: -1})
	require.NoError(t, err)
	for i := range 500 {
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%05d", i), []byte("flushed"), NoSync))
	}
	require.NoError(t, db.Flush())
	for i := 500; i < 600; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%05d", i), []byte("wal"), Sync))
	}
	require.NoError(t, db.Close())
	cur, err := readFile(fs, "db/"+currentFileName)
	require.NoError(t, err)
	return fs, "db/" + strings.TrimSpace(string(cur))
}

// requireAllOrCorruption opens the store: it must fail with ErrCorruption
// or hold every acknowledged key, never open without some.
func requireAllOrCorruption(t *testing.T, fs vfs.FS, what string) (opened bool) {
	db, err := Open("db", &Options{FS: fs, KnownNegatives: -1})
	if err != nil {
		require.ErrorIs(t, err, ErrCorruption, what)
		return false
	}
	defer db.Close()
	for i := range 600 {
		_, err := db.Get(fmt.Appendf(nil, "key%05d", i))
		require.NoError(t, err, "%s: key %d lost", what, i)
	}
	return true
}

// A damaged last MANIFEST record whose edit was acted on (the flush's WAL
// is gone) is corruption, not a torn write: before, the store opened
// without the 500 flushed keys. A record torn by a crash (appended and cut
// before anything acted on it) is still tolerated.
func TestDamagedLastManifestRecord(t *testing.T) {
	fs, _ := damageStore(t)
	require.True(t, requireAllOrCorruption(t, fs, "undamaged"), "the undamaged store opens")

	for name, damage := range map[string]func([]byte) []byte{
		"last byte flipped":  func(b []byte) []byte { return flipByte(b, len(b)-1) },
		"last record cut":    func(b []byte) []byte { return b[:len(b)-3] },
		"last record halved": func(b []byte) []byte { return b[:len(b)-8] },
	} {
		fs, man := damageStore(t)
		good, err := readFile(fs, man)
		require.NoError(t, err)
		writeFile(t, fs, man, damage(good))
		opened := requireAllOrCorruption(t, fs, name)
		require.False(t, opened, "%s: the store must report the lost edit", name)
	}

	// A torn write: a new record cut short after the last good one; the
	// state before it is whole, so the store opens with everything.
	fs, man := damageStore(t)
	good, err := readFile(fs, man)
	require.NoError(t, err)
	torn := append(append([]byte{}, good...), []byte{0x12, 0x34, 0x56, 0x78, 0x10, 0x00}...)
	writeFile(t, fs, man, torn)
	require.True(t, requireAllOrCorruption(t, fs, "torn tail"), "a torn tail is tolerated")
}

// Other damage: each damaged file gives ErrCorruption or every key, never
// a store that opens without acknowledged data.
func TestDamagedFilesNeverLoseData(t *testing.T) {
	for _, c := range []struct {
		name   string
		file   func(fs vfs.FS) string
		damage func([]byte) []byte
	}{
		{"CURRENT garbage", func(vfs.FS) string { return "db/" + currentFileName }, func([]byte) []byte { return []byte("MANIFEST-x\n") }},
		{"CURRENT empty", func(vfs.FS) string { return "db/" + currentFileName }, func([]byte) []byte { return nil }},
		{"MANIFEST first byte", func(fs vfs.FS) string { return manifestOf(t, fs) }, func(b []byte) []byte { return flipByte(b, 0) }},
		{"MANIFEST middle", func(fs vfs.FS) string { return manifestOf(t, fs) }, func(b []byte) []byte { return flipByte(b, len(b)/2) }},
		{"table middle", func(fs vfs.FS) string { return firstWithSuffix(t, fs, ".sst") }, func(b []byte) []byte { return flipByte(b, len(b)/3) }},
		{"table truncated", func(fs vfs.FS) string { return firstWithSuffix(t, fs, ".sst") }, func(b []byte) []byte { return b[:len(b)/2] }},
		{"WAL middle", func(fs vfs.FS) string { return firstWithSuffix(t, fs, ".log") }, func(b []byte) []byte { return flipByte(b, len(b)/2) }},
	} {
		fs, _ := damageStore(t)
		path := c.file(fs)
		b, err := readFile(fs, path)
		require.NoError(t, err, c.name)
		writeFile(t, fs, path, c.damage(b))
		db, err := Open("db", &Options{FS: fs, KnownNegatives: -1})
		if err != nil {
			require.ErrorIs(t, err, ErrCorruption, c.name)
			continue
		}
		for i := range 600 {
			_, err := db.Get(fmt.Appendf(nil, "key%05d", i))
			if err != nil {
				require.ErrorIs(t, err, ErrCorruption, "%s: key %d", c.name, i)
			}
		}
		require.NoError(t, db.Close())
	}
}

func manifestOf(t *testing.T, fs vfs.FS) string {
	cur, err := readFile(fs, "db/"+currentFileName)
	require.NoError(t, err)
	return "db/" + strings.TrimSpace(string(cur))
}

func firstWithSuffix(t *testing.T, fs vfs.FS, suffix string) string {
	names, err := fs.List("db")
	require.NoError(t, err)
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			return "db/" + n
		}
	}
	t.Fatalf("no %s file", suffix)
	return ""
}

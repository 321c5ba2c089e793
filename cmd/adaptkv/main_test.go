package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adaptkv/adaptkv/kv"
	"github.com/stretchr/testify/require"
)

// testStore writes a closed store in a temporary directory: keys k0000..
// k1999 in the last level, 100 more and a range deletion in L0, a key with
// non-printable bytes, and absent Gets, each asked twice, so the adaptive
// filters fixed false positives (saved with their states).
func testStore(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := kv.Open(dir, &kv.Options{FilterPolicy: "aprefix"})
	require.NoError(t, err)
	for i := 0; i < 2000; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%04d", 2*i), fmt.Appendf(nil, "v%d", i), kv.NoSync))
	}
	require.NoError(t, db.Set([]byte{0, 1, 0xff}, []byte{0xfe}, kv.NoSync))
	require.NoError(t, db.Compact(nil, nil))
	for i := 0; i < 100; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%04d", 2*i+1), []byte("odd"), kv.NoSync))
	}
	require.NoError(t, db.DeleteRange([]byte("k0300"), []byte("k0400"), kv.NoSync))
	require.NoError(t, db.Flush())
	for range 2 { // a false positive is cached at its key's first sight, fixed at the second
		for i := 0; i < 2000; i++ {
			_, _ = db.Get(fmt.Appendf(nil, "k%04d!", 2*i))
		}
	}
	require.NoError(t, db.Close())
	return dir
}

// runCmd runs a command line and returns its exit status and outputs.
func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestLSM(t *testing.T) {
	dir := testStore(t)
	code, out, errOut := runCmd("lsm", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "2 tables")
	require.Contains(t, out, "L0: 1 table, 2.6 KiB, read amplification 1")
	require.Contains(t, out, "L6: 1 table")
	require.Contains(t, out, "+range dels")
	require.Contains(t, out, "aprefix")
	require.Contains(t, out, "[hex:0001ff, k3998]", "a non-printable key prints as hex")
	t.Log("\n" + out)
	// The fixes saved with the states show: a row has a non-zero fix count.
	var fixes int
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, ".sst") {
			f := strings.Fields(line)
			var n int
			_, err := fmt.Sscan(f[len(f)-2], &n)
			require.NoError(t, err, line)
			fixes += n
		}
	}
	require.Positive(t, fixes)
}

func TestGetAndScan(t *testing.T) {
	dir := testStore(t)
	code, out, _ := runCmd("get", dir, "k0010")
	require.Equal(t, 0, code)
	require.Equal(t, "v5\n", out)
	code, out, errOut := runCmd("get", dir, "k0350") // range-deleted
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "not found")
	code, out, _ = runCmd("get", dir, "hex:0001ff")
	require.Equal(t, 0, code)
	require.Equal(t, "hex:fe\n", out)
	code, _, errOut = runCmd("get", dir, "hex:zz")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "hex:zz")

	code, out, _ = runCmd("scan", dir, "k0000", "k0006")
	require.Equal(t, 0, code)
	require.Equal(t, "k0000 v0\nk0001 odd\nk0002 v1\nk0003 odd\nk0004 v2\nk0005 odd\n", out)
	code, out, _ = runCmd("scan", "--keys-only", dir, "k0296", "--limit", "3")
	require.Equal(t, 0, code)
	require.Equal(t, "k0296\nk0298\nk0400\n", out, "flags anywhere; the deleted range skipped")
	code, out, _ = runCmd("scan", dir, "--limit", "1")
	require.Equal(t, 0, code)
	require.Equal(t, "hex:0001ff hex:fe\n", out)

	code, _, errOut = runCmd("scan")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "usage: adaptkv scan")
	code, _, _ = runCmd("nonsense")
	require.Equal(t, 2, code)
}

func TestManifest(t *testing.T) {
	dir := testStore(t)
	code, out, errOut := runCmd("manifest", dir)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^MANIFEST-\d+: \d+ edits\n#0 log \d+, next file \d+, last seq \d+\n`, out)
	require.Contains(t, out, "added   L6")
	require.Contains(t, out, "+range dels")
	require.Regexp(t, `added   L6 \d+\.sst [0-9.]+ [KM]?i?B \[.*\] \(remote [0-9.]+ KiB\)`, out, "aprefix tables have remote sections")
}

func TestCheckAndSSTable(t *testing.T) {
	dir := testStore(t)
	code, out, errOut := runCmd("check", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "ok: manifest, WALs, 2 tables")
	require.Contains(t, out, "2101 keys") // 2000 + 100 + the binary one

	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	require.NoError(t, err)
	require.Len(t, tables, 2)
	code, out, errOut = runCmd(append([]string{"sstable"}, tables...)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "columnar blocks")
	require.Contains(t, out, "row blocks", "the flush wrote row blocks")
	require.Contains(t, out, "range tombstones  1 fragments over [k0300, k0400)")
	require.Contains(t, out, "checksums")
	require.Contains(t, out, "fixes")

	// One flipped byte in the biggest table's data: check and sstable
	// both exit 1 and name it.
	big := tables[0]
	for _, p := range tables {
		if fileSize(t, p) > fileSize(t, big) {
			big = p
		}
	}
	data, err := os.ReadFile(big)
	require.NoError(t, err)
	data[300] ^= 0xff
	require.NoError(t, os.WriteFile(big, data, 0o644))
	code, _, errOut = runCmd("check", dir)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, filepath.Base(big))
	require.Contains(t, errOut, "damaged")
	code, out, errOut = runCmd("sstable", big)
	require.Equal(t, 1, code)
	require.Contains(t, out, big+": damaged")
	require.Contains(t, errOut, filepath.Base(big))
}

func TestLockedStore(t *testing.T) {
	dir := testStore(t)
	db, err := kv.Open(dir, nil) // a running process
	require.NoError(t, err)
	defer db.Close()
	code, _, errOut := runCmd("lsm", dir)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "in use by a running process")
	code, _, errOut = runCmd("lsm", filepath.Join(t.TempDir(), "none"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not a store")
}

func fileSize(t *testing.T, path string) int64 {
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Size()
}

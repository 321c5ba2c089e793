package atomicfile

import (
	"errors"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func read(t *testing.T, fs vfs.FS, path string) string {
	f, err := fs.Open(path)
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return string(b)
}

func TestWriteReplaces(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("d", 0o755))
	require.NoError(t, Write(fs, "d/f", "d/f.tmp", []byte("one")))
	require.Equal(t, "one", read(t, fs, "d/f"))
	require.NoError(t, Write(fs, "d/f", "d/f.tmp", []byte("two")))
	require.Equal(t, "two", read(t, fs, "d/f"))
	names, err := fs.List("d")
	require.NoError(t, err)
	require.Equal(t, []string{"f"}, names, "no temporary file left")
}

// A crash after Write returned keeps the new contents; a failed write
// leaves the old ones and no temporary file.
func TestWriteDurableAndFailureKeepsOld(t *testing.T) {
	mem := vfs.NewCrashableMem()
	require.NoError(t, mem.MkdirAll("d", 0o755))
	require.NoError(t, SyncDir(mem, "."))
	require.NoError(t, Write(mem, "d/f", "d/f.tmp", []byte("durable")))
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	require.Equal(t, "durable", read(t, crashed, "d/f"))

	failing := renameFails{FS: mem}
	err := Write(failing, "d/f", "d/f.tmp", []byte("lost"))
	require.ErrorIs(t, err, errRename)
	require.Equal(t, "durable", read(t, mem, "d/f"))
	_, err = mem.Stat("d/f.tmp")
	require.Error(t, err, "the temporary file is removed")
}

var errRename = errors.New("rename fails")

type renameFails struct{ vfs.FS }

func (renameFails) Rename(string, string) error { return errRename }

package directio

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestOpenedWithODirect: in direct mode a table's reads go through a
// descriptor the kernel holds with O_DIRECT.
func TestOpenedWithODirect(t *testing.T) {
	dir := t.TempDir()
	writeRandom(t, filepath.Join(dir, "t.sst"), 2*Align)
	fs, err := New(vfs.Default, true, nil)
	require.NoError(t, err)
	f, err := fs.Open(filepath.Join(dir, "t.sst"))
	require.NoError(t, err)
	defer f.Close()
	d := f.(*file).direct.(*fdFile)
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(d.fd), syscall.F_GETFL, 0)
	require.Zero(t, errno)
	require.NotZero(t, flags&syscall.O_DIRECT)
}

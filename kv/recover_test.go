package kv

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

const tornKeys = 300

// tornWALStore writes tornKeys synced keys that stay in the WAL, then cuts
// the WAL in its last record (a torn tail, as a machine crash leaves it).
func tornWALStore(t *testing.T, fs vfs.FS) string {
	path := writeWALOnly(t, fs, tornKeys)
	data, err := readFile(fs, path)
	require.NoError(t, err)
	rewriteFile(t, fs, path, data[:len(data)-20])
	require.NoError(t, syncDir(fs, "db")) // the new file survives crashes
	return path
}

// requireTornRecovery checks that the store in fs opens with every key of
// tornWALStore but the torn last one, and stays writable.
func requireTornRecovery(t *testing.T, fs vfs.FS, msg string) {
	db, err := Open("db", &Options{FS: fs})
	require.NoError(t, err, msg)
	defer func() { require.NoError(t, db.Close()) }()
	for i := 0; i < tornKeys-1; i++ {
		k := fmt.Appendf(nil, "key%06d", i)
		v, err := db.Get(k)
		require.NoError(t, err, "%s: key %d", msg, i)
		require.Equal(t, crashValue(k), v)
	}
	_, err = db.Get(fmt.Appendf(nil, "key%06d", tornKeys-1))
	require.ErrorIs(t, err, ErrNotFound, "%s: the torn record must be dropped", msg)
	require.NoError(t, db.Set([]byte("after"), []byte("x"), Sync))
}

// TestRecoveryRetriesAfterManifestFailure: recovery of a torn WAL fails
// because its new manifest cannot be created (e.g. ENOSPC). It used to have
// created its new, empty WAL already, so the retry saw the torn WAL as an
// older one and reported its tail as ErrCorruption on every Open.
func TestRecoveryRetriesAfterManifestFailure(t *testing.T) {
	mem := vfs.NewMem()
	tornWALStore(t, mem)
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpCreate && strings.Contains(op.Path, "MANIFEST-") {
			return errorfs.ErrInjected
		}
		return nil
	})
	_, err := Open("db", &Options{FS: errorfs.Wrap(mem, inj)})
	require.ErrorIs(t, err, errorfs.ErrInjected)
	requireTornRecovery(t, mem, "retry after the fault")
}

// TestRecoveryFailingAtEveryStep fails each write operation of the recovery
// of a torn WAL in turn. Every failed Open closes every file it opened, and
// both a retry on the same files and a retry after a machine crash at that
// point (unsynced data lost) recover the same keys.
func TestRecoveryFailingAtEveryStep(t *testing.T) {
	for k := 1; ; k++ {
		mem := vfs.NewCrashableMem()
		tornWALStore(t, mem)
		cfs := &fileCountFS{FS: mem}
		var ops, fired atomic.Int64
		var armed atomic.Bool
		armed.Store(true)
		inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if armed.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && ops.Add(1) == int64(k) {
				fired.Add(1)
				return errorfs.ErrInjected
			}
			return nil
		})
		db, err := Open("db", &Options{FS: errorfs.Wrap(cfs, inj)})
		armed.Store(false) // only recovery's writes fail
		if err == nil {
			require.NoError(t, db.Close())
			if fired.Load() == 0 {
				require.Greater(t, k, 5, "recovery performs several writes")
				t.Logf("failed each of %d writes of recovery in turn", k-1)
				return // every write of the recovery was failed once
			}
			continue // a failure Open may ignore (deleting an old file)
		}
		msg := fmt.Sprintf("write %d failed", k)
		require.ErrorIs(t, err, errorfs.ErrInjected, msg)
		require.Zero(t, cfs.open.Load(), "%s: Open left files open", msg)
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(uint64(k), 1))})
		requireTornRecovery(t, mem, msg+", retry")
		requireTornRecovery(t, crashed, msg+", crash, retry")
	}
}

// TestTornTailBeforeEmptyWAL: a torn WAL followed only by an empty WAL (as
// a crash in an earlier version's recovery left it, between creating its
// new WAL and its manifest) is still the newest WAL with data, so its torn
// tail is tolerated; corruption inside its synced part is still reported.
func TestTornTailBeforeEmptyWAL(t *testing.T) {
	addEmptyWAL := func(fs vfs.FS) {
		rewriteFile(t, fs, fs.PathJoin("db", walFileName(1000)), nil)
		require.NoError(t, syncDir(fs, "db"))
	}
	mem := vfs.NewMem()
	tornWALStore(t, mem)
	addEmptyWAL(mem)
	requireTornRecovery(t, mem, "torn WAL, then an empty one")

	mem = vfs.NewMem()
	path := writeWALOnly(t, mem, tornKeys)
	data, err := readFile(mem, path)
	require.NoError(t, err)
	data[len(data)/2] ^= 0x5a
	rewriteFile(t, mem, path, data)
	addEmptyWAL(mem)
	_, err = Open("db", &Options{FS: mem})
	require.ErrorIs(t, err, ErrCorruption)
}

package kv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adaptkv/adaptkv/compaction"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// partsEvents records the flushes and compactions a store reports.
type partsEvents struct {
	mu      sync.Mutex
	flushes []FlushInfo
	comps   []CompactionInfo
}

func (e *partsEvents) listener() *EventListener {
	return &EventListener{
		FlushEnd: func(i FlushInfo) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.flushes = append(e.flushes, i)
		},
		CompactionEnd: func(i CompactionInfo) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.comps = append(e.comps, i)
		},
	}
}

// flush returns the i-th flush (0-based) once it is reported: FlushEnd
// runs after the flush's tables are installed, so after Flush may return.
func (e *partsEvents) flush(t *testing.T, i int) FlushInfo {
	t.Helper()
	var f FlushInfo
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		if len(e.flushes) <= i {
			return false
		}
		f = e.flushes[i]
		return true
	}, 10*time.Second, time.Millisecond)
	return f
}

// compactions returns the compactions reported so far.
func (e *partsEvents) compactions() []CompactionInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.comps)
}

// fillParts writes n keys in random order, overwrites every third and
// deletes every seventh, and returns what each key reads.
func fillParts(t *testing.T, db *DB, n int) map[string]string {
	model := map[string]string{}
	rng := rand.New(rand.NewPCG(3, 4))
	val := make([]byte, 100)
	set := func(i int, version string) {
		k := fmt.Sprintf("key%08d", i)
		for j := range val {
			val[j] = byte(rng.Uint32())
		}
		v := version + string(val)
		require.NoError(t, db.Set([]byte(k), []byte(v), NoSync))
		model[k] = v
	}
	for _, i := range rng.Perm(n) {
		set(i, "v1")
	}
	for i := 0; i < n; i += 3 {
		set(i, "v2")
	}
	for i := 0; i < n; i += 7 {
		k := fmt.Sprintf("key%08d", i)
		require.NoError(t, db.Delete([]byte(k), NoSync))
		delete(model, k)
	}
	return model
}

func checkModel(t *testing.T, db *DB, model map[string]string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("key%08d", i)
		v, err := db.Get([]byte(k))
		want, ok := model[k]
		if !ok {
			require.ErrorIs(t, err, ErrNotFound, k)
			continue
		}
		require.NoError(t, err, k)
		require.Equal(t, want, string(v), k)
	}
}

// requireDisjoint checks that tables, in key order, share no user key.
func requireDisjoint(t *testing.T, tables []TableInfo) {
	t.Helper()
	for i := 1; i < len(tables); i++ {
		require.Negative(t, bytes.Compare(tables[i-1].Largest, tables[i].Smallest),
			"table %d ends at %q, table %d starts at %q", tables[i-1].FileNum, tables[i-1].Largest,
			tables[i].FileNum, tables[i].Smallest)
	}
}

// TestFlushAndCompactInParts: a flush of a large memtable writes its key
// ranges at once into L0 tables that share no user key; a Compact writes
// them to the last level in parts at once too, and once (it does not
// rewrite the last level it just wrote into itself); a second Compact
// rewrites the last level, in parts. Every key reads its newest value
// throughout. A small flush, and a large one holding a range tombstone,
// write one range.
func TestFlushAndCompactInParts(t *testing.T) {
	ev := &partsEvents{}
	const n = 60_000
	db, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 32 << 20, TargetFileSize: 32 << 10,
		flushPartBytes: 1 << 20, EventListener: ev.listener()})
	require.NoError(t, err)
	defer db.Close()
	model := fillParts(t, db, n)
	require.NoError(t, db.Flush())
	f := ev.flush(t, 0)
	require.Equal(t, maxFlushParts, f.Parts, "some 12 MiB of memtable in parts of 1 MiB: the most parts")
	require.Len(t, f.Output, f.Parts, "a table a part")
	requireDisjoint(t, f.Output)
	require.Contains(t, f.String(), fmt.Sprintf("in %d key ranges at once", f.Parts))
	checkModel(t, db, model, n)

	require.NoError(t, db.Compact(nil, nil))
	comps := ev.compactions()
	require.Len(t, comps, 1, "L0 into L6, and no rewrite of L6 into itself: %v", comps)
	c := comps[0]
	require.True(t, c.Manual)
	require.Equal(t, 0, c.Input[0].Level)
	require.Equal(t, 6, c.Output.Level)
	require.Greater(t, c.Parts, 1)
	requireDisjoint(t, c.Output.Tables)
	checkModel(t, db, model, n)
	v := db.currentVersion()
	require.NoError(t, compaction.CheckLevels(v.Levels))
	require.Len(t, v.Levels[6], len(c.Output.Tables))
	v.unref()

	require.NoError(t, db.Compact(nil, nil))
	comps = ev.compactions()
	require.Len(t, comps, 2, "a second Compact rewrites the last level")
	c = comps[1]
	require.Equal(t, 6, c.Input[0].Level)
	require.Greater(t, c.Parts, 1)
	requireDisjoint(t, c.Output.Tables)
	checkModel(t, db, model, n)

	// A small flush: one range.
	require.NoError(t, db.Set([]byte("key00000001"), []byte("small"), NoSync))
	model["key00000001"] = "small"
	require.NoError(t, db.Flush())
	f = ev.flush(t, 1)
	require.Equal(t, 1, f.Parts)
	require.Len(t, f.Output, 1)
	// A large flush with a range tombstone: one range.
	for i := 0; i < n; i += 2 {
		k := fmt.Sprintf("key%08d", i)
		require.NoError(t, db.Set([]byte(k), bytes.Repeat([]byte("x"), 100), NoSync))
		model[k] = strings.Repeat("x", 100)
	}
	require.NoError(t, db.DeleteRange([]byte("key00000100"), []byte("key00000200"), NoSync))
	for i := 100; i < 200; i++ {
		delete(model, fmt.Sprintf("key%08d", i))
	}
	require.NoError(t, db.Flush())
	f = ev.flush(t, 2)
	require.Equal(t, 1, f.Parts)
	require.Len(t, f.Output, 1)
	require.Greater(t, f.Output[0].Size, uint64(512<<10), "a large flush (its values compress well)")
	checkModel(t, db, model, n)
}

// TestCompactPartFails: when one part of a Compact fails (a table file
// cannot be created), Compact returns the error, the tables the other
// parts wrote are removed, the store reads what it read before, and a
// Compact after the fault succeeds.
func TestCompactPartFails(t *testing.T) {
	var creates atomic.Int64
	var on atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if on.Load() && op.Kind == errorfs.OpCreate && strings.HasSuffix(op.Path, ".sst") && creates.Add(1) == 5 {
			return errorfs.ErrInjected
		}
		return nil
	}))
	const n = 60_000
	db, err := Open("db", &Options{FS: fs, MemTableSize: 32 << 20, TargetFileSize: 32 << 10, flushPartBytes: 1 << 20})
	require.NoError(t, err)
	defer db.Close()
	model := fillParts(t, db, n)
	require.NoError(t, db.Flush())
	tablesBefore := tableFiles(t, fs)
	on.Store(true)
	err = db.Compact(nil, nil)
	require.ErrorIs(t, err, errorfs.ErrInjected)
	on.Store(false)
	db.waitDeletions()
	require.ElementsMatch(t, tablesBefore, tableFiles(t, fs), "the parts' tables removed")
	checkModel(t, db, model, n)
	require.NoError(t, db.Compact(nil, nil))
	checkModel(t, db, model, n)
	v := db.currentVersion()
	defer v.unref()
	for l := 0; l < 6; l++ {
		require.Empty(t, v.Levels[l], "L%d", l)
	}
	require.NotEmpty(t, v.Levels[6])
}

// tableFiles lists the table files in the store's directory.
func tableFiles(t *testing.T, fs vfs.FS) []string {
	names, err := fs.List("db")
	require.NoError(t, err)
	var out []string
	for _, name := range names {
		if ft, _ := parseFileName(name); ft == fileTypeTable {
			out = append(out, name)
		}
	}
	return out
}

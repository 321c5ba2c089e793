package kv

import (
	"fmt"
	"sync"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/kv/internal/memtable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// withMaxBatchMem lowers the batch bound (MaxBatchSize) for one test.
func withMaxBatchMem(t *testing.T, n int64) {
	old := maxBatchMem
	maxBatchMem = n
	t.Cleanup(func() { maxBatchMem = old })
}

// TestBatchTooLarge: a batch whose memtable bytes would exceed the bound
// is refused with ErrBatchTooLarge and leaves nothing behind; one within
// it commits; a MemTableSize past MaxMemTableSize is an invalid option; a
// closed or read-only store reports that before the batch's size.
func TestBatchTooLarge(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	defer db.Close()

	b := NewBatch()
	for i := range 10 {
		require.NoError(t, b.Set(fmt.Appendf(nil, "k%d", i), make([]byte, 100)))
	}
	withMaxBatchMem(t, b.memSize()-1)
	require.ErrorIs(t, db.Apply(b, Sync), ErrBatchTooLarge)
	_, err = db.Get([]byte("k0"))
	require.ErrorIs(t, err, ErrNotFound, "a refused batch wrote nothing")

	maxBatchMem = b.memSize()
	require.NoError(t, db.Apply(b, Sync))
	_, err = db.Get([]byte("k9"))
	require.NoError(t, err)
	// The bound counts each entry's worst-case node besides its bytes.
	require.Equal(t, int64(b.Len())+10*int64(BatchEntryOverhead), b.memSize())

	_, err = Open("db2", &Options{FS: fs, MemTableSize: MaxMemTableSize + 1})
	require.ErrorIs(t, err, ErrInvalidOptions)

	// The store's state is reported before the batch's size.
	withMaxBatchMem(t, b.memSize()-1)
	require.NoError(t, db.Close())
	ro, err := Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	require.ErrorIs(t, ro.Apply(b, Sync), ErrReadOnly)
	require.NoError(t, ro.Close())
	require.ErrorIs(t, ro.Apply(b, Sync), ErrClosed)
}

// TestGroupLen checks where a commit group is cut: before the batch that
// takes the group's memtable bytes past the bound, never before the
// first, and flush requests (no batch) count nothing.
func TestGroupLen(t *testing.T) {
	b := NewBatch()
	require.NoError(t, b.Set([]byte("k"), make([]byte, 100)))
	one := b.memSize()
	withMaxBatchMem(t, 3*one)
	reqs := func(n int) []*commitReq {
		out := make([]*commitReq, n)
		for i := range out {
			out[i] = &commitReq{batch: b}
		}
		return out
	}
	require.Equal(t, 0, groupLen(nil))
	require.Equal(t, 2, groupLen(reqs(2)))
	require.Equal(t, 3, groupLen(reqs(3)))
	require.Equal(t, 3, groupLen(reqs(7)))
	withFlush := append([]*commitReq{{flush: true}}, reqs(4)...)
	require.Equal(t, 4, groupLen(withFlush))

	maxBatchMem = one / 2 // each batch alone is over: groups of one
	require.Equal(t, 1, groupLen(reqs(5)))
}

// TestCappedGroupsCommitEverything runs writers whose batches make groups
// that must be cut (the bound is three batches): the requests left over
// lead the next group, and every batch commits, whole.
func TestCappedGroupsCommitEverything(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 32 << 10})
	require.NoError(t, err)
	defer db.Close()
	probe := NewBatch()
	require.NoError(t, probe.Set([]byte("w0-0000-a"), make([]byte, 64)))
	require.NoError(t, probe.Set([]byte("w0-0000-b"), make([]byte, 64)))
	withMaxBatchMem(t, 3*probe.memSize())

	const writers, per = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := NewBatch()
			for i := range per {
				b.Reset()
				v := fmt.Appendf(make([]byte, 0, 64), "%d-%d", w, i)
				v = v[:64]
				if err := b.Set(fmt.Appendf(nil, "w%d-%04d-a", w, i), v); err != nil {
					t.Error(err)
					return
				}
				if err := b.Set(fmt.Appendf(nil, "w%d-%04d-b", w, i), v); err != nil {
					t.Error(err)
					return
				}
				if err := db.Apply(b, NoSync); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for w := range writers {
		for i := range per {
			for _, s := range []string{"a", "b"} {
				v, err := db.Get(fmt.Appendf(nil, "w%d-%04d-%s", w, i, s))
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("%d-%d", w, i), string(v[:len(fmt.Sprintf("%d-%d", w, i))]))
			}
		}
	}
}

// TestReplaySplitsIntoMemtables writes more than one small memtable holds
// into a store with large memtables, closes it (the writes stay in the
// WAL) and reopens it with small ones: recovery replays into memtables of
// the new MemTableSize, so each stays within what a memtable can hold, and
// flushes each to an L0 table of its own; read-only, it keeps them all in
// memory. Every write reads back either way.
func TestReplaySplitsIntoMemtables(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, MemTableSize: 4 << 20})
	require.NoError(t, err)
	const n = 3000
	val := func(i int) []byte { return fmt.Appendf(make([]byte, 0, 200), "%0200d", i) }
	for i := range n {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%05d", i), val(i), NoSync))
	}
	require.NoError(t, db.Close())

	check := func(db *DB) {
		for i := range n {
			v, err := db.Get(fmt.Appendf(nil, "k%05d", i))
			require.NoError(t, err)
			require.Equal(t, val(i), v)
		}
	}
	small := &Options{FS: fs, MemTableSize: 64 << 10, ReadOnly: true}
	ro, err := Open("db", small)
	require.NoError(t, err)
	ro.mu.Lock()
	imm := len(ro.mu.imm)
	ro.mu.Unlock()
	require.GreaterOrEqual(t, imm, 5, "about 700 KB of writes in 64 KiB memtables")
	check(ro)
	require.NoError(t, ro.Close())

	small.ReadOnly = false
	small.L0CompactionThreshold = 100 // keep L0 as recovery left it
	small.L0CompactionFileThreshold = 100
	db, err = Open("db", small)
	require.NoError(t, err)
	defer db.Close()
	require.Equal(t, imm+1, db.Metrics().Levels[0].NumFiles)
	check(db)
}

// TestApplyBatch: a batch's point entries and range tombstones reach the
// memtable at their sequence numbers, whether one entry or many; the
// scratch space comes back cleared (no hold on the batch's bytes), and
// not at all after a batch larger than maxScratchEntries.
func TestApplyBatch(t *testing.T) {
	mt := memtable.New()
	b := NewBatch()
	require.NoError(t, b.Set([]byte("a"), []byte("1")))
	require.NoError(t, b.DeleteRange([]byte("b"), []byte("d")))
	require.NoError(t, b.Delete([]byte("c")))
	require.NoError(t, b.Set([]byte("e"), []byte("2")))
	b.setSeq(10)
	es := applyBatch(mt, b.data, nil)
	require.Empty(t, es)
	for _, e := range es[:cap(es)] {
		require.Zero(t, e, "scratch cleared")
	}
	check := func(key string, seq uint64, kind base.KeyKind, value string) {
		t.Helper()
		v, k, s, ok := mt.GetVersion([]byte(key), seq+1)
		require.True(t, ok, key)
		require.Equal(t, seq, s, key)
		require.Equal(t, kind, k, key)
		require.Equal(t, value, string(v), key)
	}
	check("a", 10, base.KeyKindSet, "1")
	check("c", 12, base.KeyKindDelete, "")
	check("e", 13, base.KeyKindSet, "2")
	require.Equal(t, uint64(11), mt.RangeDels().Covering([]byte("c"), 12))

	one := NewBatch()
	require.NoError(t, one.Set([]byte("f"), []byte("3")))
	one.setSeq(20)
	es = applyBatch(mt, one.data, es)
	check("f", 20, base.KeyKindSet, "3")

	big := NewBatch()
	for i := range maxScratchEntries + 1 {
		require.NoError(t, big.Set(fmt.Appendf(nil, "k%05d", i), []byte("v")))
	}
	big.setSeq(100)
	require.Nil(t, applyBatch(mt, big.data, es), "a huge batch's scratch is dropped")
	check("k00000", 100, base.KeyKindSet, "v")
	check(fmt.Sprintf("k%05d", maxScratchEntries), 100+maxScratchEntries, base.KeyKindSet, "v")
	require.Equal(t, 3+1+maxScratchEntries+1, mt.Len(), "every point entry once")
}

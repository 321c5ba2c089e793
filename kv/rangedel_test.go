package kv

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func TestDeleteRangeErrors(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	big := make([]byte, MaxKeySize+1)
	for _, c := range []struct {
		start, end string
		want       error
	}{
		{"b", "a", ErrInvalidRange},
		{"a", "a", ErrInvalidRange},
		{"", "a", ErrEmptyKey},
		{"a", "", ErrEmptyKey},
		{"a", string(big), ErrKeyTooLarge},
	} {
		require.ErrorIs(t, db.DeleteRange([]byte(c.start), []byte(c.end), NoSync), c.want, "[%.8q, %.8q)", c.start, c.end)
		require.ErrorIs(t, NewBatch().DeleteRange([]byte(c.start), []byte(c.end)), c.want)
	}
	require.NoError(t, db.DeleteRange([]byte("a"), []byte("b"), Sync))
	require.NoError(t, db.Close())
	require.ErrorIs(t, db.DeleteRange([]byte("a"), []byte("b"), NoSync), ErrClosed)

	ro, err := Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	require.ErrorIs(t, ro.DeleteRange([]byte("a"), []byte("b"), NoSync), ErrReadOnly)
	require.NoError(t, ro.Close())

	// A damaged range in a batch record is corruption, not a silent skip.
	b := NewBatch()
	require.NoError(t, b.DeleteRange([]byte("a"), []byte("b")))
	b.setSeq(1)
	b.data[len(b.data)-1] = 'A' // end "A" < start "a"
	_, _, err = decodeBatch(b.data, nil)
	require.ErrorIs(t, err, ErrCorruption)
}

// rdKeys lists the live keys of db (or of snapshot s) with the given prefix.
func rdKeys(t *testing.T, newIter func(*IterOptions) (*Iterator, error), prefix string) []string {
	it, err := newIter(&IterOptions{LowerBound: []byte(prefix), UpperBound: []byte(prefix + "\xff")})
	require.NoError(t, err)
	var ks []string
	for ok := it.First(); ok; ok = it.Next() {
		ks = append(ks, string(it.Key()))
	}
	require.NoError(t, it.Close())
	return ks
}

// TestDeleteRangeLifecycle follows range deletions from the memtable
// through recovery, a flush and compactions, with a snapshot that must
// keep seeing what they cover and a write after one in the same batch that
// must outlive it; at the bottom, with no snapshot left, the compaction
// drops the keys and the tombstones.
func TestDeleteRangeLifecycle(t *testing.T) {
	fs := vfs.NewMem()
	opts := &Options{FS: fs}
	db, err := Open("db", opts)
	require.NoError(t, err)
	defer func() { db.Close() }()
	key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	live := map[int]string{} // the model
	var snap *Snapshot
	var snapLive map[int]string
	takeSnapshot := func() {
		snap = db.NewSnapshot()
		snapLive = map[int]string{}
		for k, v := range live {
			snapLive[k] = v
		}
	}
	deleteRange := func(a, b int) {
		for i := a; i < b; i++ {
			delete(live, i)
		}
	}
	check := func(stage string) {
		t.Helper()
		for _, r := range []struct {
			get     func([]byte) ([]byte, error)
			newIter func(*IterOptions) (*Iterator, error)
			live    map[int]string
		}{{db.Get, db.NewIter, live}, {snapGet(snap), snapIter(snap), snapLive}} {
			if r.get == nil {
				continue
			}
			var want []string
			for i := 0; i < 100; i++ {
				v, err := r.get(key(i))
				if w, ok := r.live[i]; ok {
					want = append(want, string(key(i)))
					require.NoError(t, err, "%s: key %d", stage, i)
					require.Equal(t, w, string(v), "%s: key %d", stage, i)
				} else {
					require.ErrorIs(t, err, ErrNotFound, "%s: key %d", stage, i)
				}
			}
			require.Equal(t, want, rdKeys(t, r.newIter, "k"), stage)
		}
	}
	// Keys 0..99: 0..49 compacted to the bottom, 50..99 in the memtable.
	for i := 0; i < 100; i++ {
		require.NoError(t, db.Set(key(i), []byte("v"), NoSync))
		live[i] = "v"
		if i == 49 {
			require.NoError(t, db.Compact(nil, nil))
		}
	}
	takeSnapshot()
	b := NewBatch()
	require.NoError(t, b.DeleteRange(key(20), key(80)))
	require.NoError(t, b.Set(key(30), []byte("after"))) // later in the batch: lives
	require.NoError(t, db.Apply(b, Sync))
	deleteRange(20, 80)
	live[30] = "after"
	check("memtable")

	require.NoError(t, snap.Close())
	snap = nil
	require.NoError(t, db.Close())
	db, err = Open("db", opts) // the tombstone comes back from the WAL
	require.NoError(t, err)
	check("recovered")

	takeSnapshot()
	require.NoError(t, db.DeleteRange(key(85), key(90), NoSync))
	deleteRange(85, 90)
	check("second tombstone")
	require.NoError(t, db.Flush())
	check("flushed")
	require.NoError(t, db.Compact(nil, nil)) // the snapshot keeps keys 85..89 and their tombstone
	check("compacted under a snapshot")
	require.NoError(t, snap.Close())
	snap = nil
	require.NoError(t, db.Compact(nil, nil))
	check("compacted")

	// At the bottom with no snapshot, the covered keys and the tombstones
	// are gone: one table of the live keys.
	db.mu.Lock()
	var tables, withRangeDels int
	for _, ts := range db.mu.current.Levels {
		for _, tm := range ts {
			tables++
			if tm.HasRangeDels {
				withRangeDels++
			}
		}
	}
	db.mu.Unlock()
	require.Equal(t, 1, tables)
	require.Zero(t, withRangeDels)
	require.Len(t, live, 36)
}

func snapGet(s *Snapshot) func([]byte) ([]byte, error) {
	if s == nil {
		return nil
	}
	return s.Get
}

func snapIter(s *Snapshot) func(*IterOptions) (*Iterator, error) {
	if s == nil {
		return nil
	}
	return s.NewIter
}

// TestDeleteRangeKnownNegatives: a key a range deleted, whose value is
// still in a table below the tombstone, counts as absent for the record.
func TestDeleteRangeKnownNegatives(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), RecordAbsent: RecordAlways})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set([]byte("k1"), []byte("v"), NoSync))
	require.NoError(t, db.Set([]byte("k9"), []byte("v"), NoSync))
	require.NoError(t, db.Compact(nil, nil))
	require.NoError(t, db.DeleteRange([]byte("k0"), []byte("k5"), NoSync))
	require.NoError(t, db.Flush())
	for i := 0; i < 64; i++ {
		_, err := db.Get([]byte("k1"))
		require.ErrorIs(t, err, ErrNotFound)
	}
	require.True(t, db.kn.Contains([]byte("k1")))
	require.False(t, db.kn.Contains([]byte("k9")))
}

// TestDeleteRangeConcurrent: writers each write rounds of 50 keys in one
// batch and then delete them with one DeleteRange, through flushes and
// compactions, while readers check that a snapshot sees each round whole
// or not at all, and that Gets agree with it.
func TestDeleteRangeConcurrent(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 32 << 10, TargetFileSize: 16 << 10, L0CompactionThreshold: 2})
	require.NoError(t, err)
	defer db.Close()
	const writers, perRound = 2, 50
	rounds := 300
	if testing.Short() {
		rounds = 80
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				b := NewBatch()
				for i := 0; i < perRound; i++ {
					_ = b.Set(fmt.Appendf(nil, "w%d-r%04d-%03d", w, r, i), make([]byte, 100))
				}
				if err := db.Apply(b, NoSync); err != nil {
					t.Error(err)
					return
				}
				if r%3 != 0 { // every third round stays
					if err := db.DeleteRange(fmt.Appendf(nil, "w%d-r%04d-", w, r), fmt.Appendf(nil, "w%d-r%04d.", w, r), NoSync); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for !stop.Load() {
				s := db.NewSnapshot()
				counts := map[string]int{}
				for _, k := range rdKeys(t, s.NewIter, "w") {
					counts[k[:strings.LastIndexByte(k, '-')]]++
				}
				for round, n := range counts {
					require.Equal(t, perRound, n, "round %s seen in part", round)
					_, err := s.Get([]byte(round + "-007"))
					require.NoError(t, err)
				}
				require.NoError(t, s.Close())
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	readers.Wait()
	counts := map[string]int{}
	for _, k := range rdKeys(t, db.NewIter, "w") {
		counts[k[:strings.LastIndexByte(k, '-')]]++
	}
	require.Len(t, counts, writers*((rounds+2)/3))
	m := db.Metrics()
	require.Positive(t, m.Flushes)
	require.Positive(t, m.Compactions)
}

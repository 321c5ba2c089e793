package kv

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestMetricsCountTablesLeaving: a table removed from the table cache while
// a lookup holds it (a compaction deleted it) keeps counting in Metrics
// until its last user releases it, and after: the table counters never go
// back (kvbench subtracts two snapshots of them).
func TestMetricsCountTablesLeaving(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	for i := range 1001 { // the last one bounds the absent keys below
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%05d", i), []byte("v"), nil))
	}
	require.NoError(t, db.Flush())
	for i := range 1000 {
		_, err := db.Get(fmt.Appendf(nil, "key%05d", i))
		require.NoError(t, err)
		_, err = db.Get(fmt.Appendf(nil, "key%05dx", i))
		require.ErrorIs(t, err, ErrNotFound)
	}
	table := func(m Metrics) [4]uint64 {
		return [4]uint64{m.FilterChecks, m.FilterNegatives, m.FalsePositiveProbes, m.TruePositiveProbes}
	}
	before := table(db.Metrics())
	require.Equal(t, uint64(1000), before[3], "true positives")
	require.Equal(t, uint64(2000), before[0], "filter checks")

	v := db.currentVersion()
	require.Len(t, v.Levels[0], 1)
	fn := v.Levels[0][0].FileNum
	v.unref()
	h, err := db.tc.get(fn)
	require.NoError(t, err)
	db.tc.evict(fn)
	require.Equal(t, before, table(db.Metrics()), "removed, still in use")
	db.tc.release(h)
	require.Equal(t, before, table(db.Metrics()), "closed by its last user")
}

// TestTableSlots: a Get leaves each table's open entry in its metadata's
// slot, and later Gets use it; an entry leaves every slot when it closes
// (evicted for another table, or deleted while a read holds it), so a
// slot keeps no closed reader alive, and the next Get opens the table
// again through the map.
func TestTableSlots(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), MaxOpenFiles: 1})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	for table := range 2 { // two tables of disjoint ranges, one key each
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%d", table), []byte("v"), nil))
		require.NoError(t, db.Flush())
	}
	v := db.currentVersion()
	defer v.unref()
	metas := append(v.Levels[0][:0:0], v.Levels[0]...)
	require.Len(t, metas, 2)
	slot := func(i int) *tcEntry {
		e, _ := metas[i].Open.Load().(*tcEntry)
		return e
	}
	get := func(key string) {
		_, err := db.Get([]byte(key))
		require.NoError(t, err)
	}
	idx := func(key string) int { // which meta holds key
		for i, m := range metas {
			if string(m.Smallest.UserKey) == key {
				return i
			}
		}
		t.Fatalf("no table holds %s", key)
		return -1
	}
	a, b := idx("key0"), idx("key1")

	get("key0")
	e := slot(a)
	require.True(t, e != nil, "the Get left the entry in the slot")
	require.Same(t, e, db.tc.m[metas[a].FileNum])
	get("key0")
	require.Same(t, e, slot(a), "a second Get uses the slot")

	get("key1") // one table open at most: key0's closes
	require.True(t, slot(a) == nil, "a closed entry leaves its slot")
	require.True(t, slot(b) != nil)
	require.Nil(t, e.r, "the evicted reader is closed")
	get("key0")
	require.True(t, slot(a) != nil)
	require.NotSame(t, e, slot(a), "reopened through the map")

	// Deleted while a read holds it: the slot empties at the last release.
	e = slot(a)
	h, err := db.tc.getTable(metas[a])
	require.NoError(t, err)
	require.Same(t, e, h.tcEntry)
	db.tc.evict(metas[a].FileNum)
	require.Same(t, e, slot(a), "still in use")
	db.tc.release(h)
	require.True(t, slot(a) == nil, "the closed entry left the slot")
	require.Nil(t, e.r)

	// A Get does not take an entry leaving the cache from its slot.
	h, err = db.tc.getTable(metas[a]) // the file is still there: opened again
	require.NoError(t, err)
	e = slot(a)
	require.Same(t, e, h.tcEntry)
	db.tc.evict(metas[a].FileNum)
	h2, err := db.tc.getTable(metas[a])
	require.NoError(t, err)
	require.NotSame(t, e, h2.tcEntry)
	db.tc.release(h2)
	db.tc.release(h)
	require.Nil(t, e.r)
	require.NotSame(t, e, slot(a))
}

// TestTableSlotsConcurrent: Gets on four goroutines over eight tables with
// two open at most (tables close and reopen all the time) find every key,
// and afterwards a slot holds nothing or the table's open entry (run it
// with -race).
func TestTableSlotsConcurrent(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), MaxOpenFiles: 2})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	const tables, perTable = 8, 50
	key := func(table, i int) []byte { return fmt.Appendf(nil, "key%d-%03d", table, i) }
	for table := range tables {
		for i := range perTable {
			require.NoError(t, db.Set(key(table, i), key(table, i), nil))
		}
		require.NoError(t, db.Flush())
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 4000 {
				table, i := (n*7+g)%tables, (n*13+g)%perTable
				v, err := db.Get(key(table, i))
				if err == nil && !bytes.Equal(v, key(table, i)) {
					err = fmt.Errorf("Get(%s) = %s", key(table, i), v)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	v := db.currentVersion()
	defer v.unref()
	db.tc.mu.Lock()
	defer db.tc.mu.Unlock()
	open := 0
	for _, level := range v.Levels {
		for _, m := range level {
			if e, _ := m.Open.Load().(*tcEntry); e != nil {
				require.True(t, e == db.tc.m[m.FileNum] && e.r != nil, "table %d: a slot holds a closed entry", m.FileNum)
				open++
			}
		}
	}
	require.Positive(t, open)
	require.LessOrEqual(t, open, 2)
}

package kv

import (
	"fmt"
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

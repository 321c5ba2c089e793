package kv

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// wrappedPolicy is a Policy of a type of its own around a filterpolicy
// policy (e.g. to log or count its calls).
type wrappedPolicy struct{ filterpolicy.Policy }

// lyingPolicy claims to be one kind and builds another: tables cannot be
// written with it.
type lyingPolicy struct {
	filterpolicy.Policy
	other filterpolicy.Policy
}

func (l lyingPolicy) Kind() filter.Kind { return l.other.Kind() }

// TestOpenRejectsForeignFilterPolicy: an Options.Filter that cannot write
// tables (its kind is not what its name says) is rejected by Open, before
// it creates anything (it used to pass Open, and then the first flush
// failed, which made every later write fail with the sticky error). A
// policy of a type of its own that wraps a real one works (issue 11).
func TestOpenRejectsForeignFilterPolicy(t *testing.T) {
	bloom, err := filterpolicy.ByName("bloom")
	require.NoError(t, err)
	taf, err := filterpolicy.ByName("taf")
	require.NoError(t, err)
	fs := vfs.NewMem()
	_, err = Open("db", &Options{FS: fs, Filter: lyingPolicy{bloom, taf}})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = fs.Stat("db")
	require.ErrorIs(t, err, os.ErrNotExist, "a rejected Open creates nothing")

	// Policies that write tables: filterpolicy's own and wrappers of them.
	none, err := filterpolicy.ByName("none")
	require.NoError(t, err)
	for _, p := range []filterpolicy.Policy{bloom, filterpolicy.NewBloom(12), none, wrappedPolicy{none}, wrappedPolicy{bloom}, wrappedPolicy{taf}} {
		db, err := Open("db", &Options{FS: fs, Filter: p})
		require.NoError(t, err, "%T %s", p, p.Name())
		require.NoError(t, db.Set([]byte("a"), []byte("1"), Sync))
		require.NoError(t, db.Flush())
		require.NoError(t, db.Set([]byte("b"), []byte("2"), Sync), "no sticky flush error")
		v, err := db.Get([]byte("a"))
		require.NoError(t, err)
		require.Equal(t, "1", string(v))
		require.NoError(t, db.Close())
	}
}

// TestTableFormat: a store writes its flushes (with FlushInTableFormat)
// and compaction outputs in Options.TableFormat, reads tables of either
// layout, and reopened with the other layout compacts the two together
// with every key intact.
func TestTableFormat(t *testing.T) {
	fs := vfs.NewMem()
	formats := func(db *DB) map[sstable.Format]int { return tableFormats(t, db, 0, manifest.NumLevels) }
	write := func(db *DB, from, to int) {
		for i := from; i < to; i++ {
			require.NoError(t, db.Set(fmt.Appendf(nil, "k%06d", i), fmt.Appendf(nil, "v%d", i), NoSync))
		}
	}
	check := func(db *DB, n int) {
		for i := 0; i < n; i++ {
			v, err := db.Get(fmt.Appendf(nil, "k%06d", i))
			require.NoError(t, err, "key %d", i)
			require.Equal(t, fmt.Sprintf("v%d", i), string(v))
		}
		_, err := db.Get([]byte("k999999x"))
		require.ErrorIs(t, err, ErrNotFound)
	}
	o := &Options{FS: fs, MemTableSize: 64 << 10, TableFormat: sstable.FormatRow}
	db, err := Open("db", o)
	require.NoError(t, err)
	write(db, 0, 10000)
	require.NoError(t, db.Flush())
	require.NoError(t, db.Compact(nil, nil))
	check(db, 10000)
	require.Equal(t, []sstable.Format{sstable.FormatRow}, slices.Collect(maps.Keys(formats(db))))
	require.NoError(t, db.Close())

	db, err = Open("db", &Options{FS: fs, MemTableSize: 64 << 10, FlushInTableFormat: true}) // columnar, the default
	require.NoError(t, err)
	check(db, 10000)
	write(db, 10000, 20000)
	require.NoError(t, db.Flush())
	f := formats(db)
	require.Positive(t, f[sstable.FormatRow])
	require.Positive(t, f[sstable.FormatColumnar])
	check(db, 20000)
	require.NoError(t, db.Compact(nil, nil))
	require.Equal(t, []sstable.Format{sstable.FormatColumnar}, slices.Collect(maps.Keys(formats(db))))
	check(db, 20000)
	require.NoError(t, db.Close())
}

// tableFormats counts the tables of levels [from, to) of db's current
// version by block layout.
func tableFormats(t *testing.T, db *DB, from, to int) map[sstable.Format]int {
	v := db.currentVersion()
	defer v.unref()
	out := map[sstable.Format]int{}
	for _, ts := range v.Levels[from:to] {
		for _, tm := range ts {
			h, err := db.tc.get(tm.FileNum)
			require.NoError(t, err)
			out[h.r.Format()]++
			db.tc.release(h)
		}
	}
	return out
}

// TestFlushWritesRowBlocks: by default flushes (and recovery) write row
// blocks while compactions write Options.TableFormat; FlushInTableFormat
// makes flushes follow TableFormat. Every key reads back from either.
func TestFlushWritesRowBlocks(t *testing.T) {
	for _, inFormat := range []bool{false, true} {
		fs := vfs.NewMem()
		o := &Options{FS: fs, MemTableSize: 64 << 10, FlushInTableFormat: inFormat,
			L0CompactionThreshold: 100, L0CompactionFileThreshold: 100}
		db, err := Open("db", o)
		require.NoError(t, err)
		for i := range 3000 {
			require.NoError(t, db.Set(fmt.Appendf(nil, "k%06d", i), fmt.Appendf(nil, "v%d", i), NoSync))
		}
		require.NoError(t, db.Close()) // the last memtable stays in the WAL
		db, err = Open("db", o)        // recovery flushes it
		require.NoError(t, err)
		want := sstable.FormatRow
		if inFormat {
			want = sstable.FormatColumnar
		}
		l0 := tableFormats(t, db, 0, 1)
		require.Positive(t, l0[want])
		require.Len(t, l0, 1, "every L0 table in %v", want)
		require.Empty(t, tableFormats(t, db, 1, manifest.NumLevels), "no compaction ran")
		require.NoError(t, db.Compact(nil, nil))
		require.Equal(t, []sstable.Format{sstable.FormatColumnar}, slices.Collect(maps.Keys(tableFormats(t, db, 0, manifest.NumLevels))), "compaction outputs")
		for i := range 3000 {
			got, err := db.Get(fmt.Appendf(nil, "k%06d", i))
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("v%d", i), string(got))
		}
		require.NoError(t, db.Close())
	}
}

// TestValidateAndEnsureDefaults: EnsureDefaults fills exactly the zero
// options, with the defaults their docs state (some following others),
// and leaves set ones; Validate accepts zero values and rejects what Open
// rejects, with ErrInvalidOptions.
func TestValidateAndEnsureDefaults(t *testing.T) {
	var o Options
	require.NoError(t, o.Validate())
	o.EnsureDefaults()
	require.Equal(t, DefaultFilterPolicy, o.FilterPolicy)
	require.Equal(t, 4<<20, o.MemTableSize)
	require.Equal(t, 4, o.L0CompactionThreshold)
	require.Equal(t, 16, o.L0CompactionFileThreshold)
	require.Equal(t, 12, o.L0StopWritesThreshold)
	require.Equal(t, 4, o.MaxImmutableMemTables)
	require.Equal(t, 2, o.MergeFlushL0Depth)
	require.Equal(t, int64(-1), o.FlushSplitBytes, "one table a flush")
	require.Equal(t, 2, o.MaxConcurrentCompactions)
	require.Equal(t, 500, o.MaxOpenFiles)
	require.Equal(t, DefaultKnownNegatives, o.KnownNegatives)
	require.Equal(t, vfs.Default, o.FS)
	require.NoError(t, o.Validate())

	set := Options{MemTableSize: 1 << 20, L0CompactionThreshold: 8, MaxImmutableMemTables: 2}
	set.EnsureDefaults()
	require.Equal(t, 1<<20, set.MemTableSize)
	require.Equal(t, 32, set.L0CompactionFileThreshold, "follows L0CompactionThreshold")
	require.Equal(t, 24, set.L0StopWritesThreshold)
	require.Equal(t, 4, set.MergeFlushL0Depth)
	require.Equal(t, int64(-1), set.FlushSplitBytes)
	require.Equal(t, 2, set.MaxImmutableMemTables)

	for _, bad := range []Options{
		{MemTableSize: -1}, {MaxImmutableMemTables: -1}, {L0StopWritesThreshold: 2},
		{LevelSizeRatio: 1.5}, {TableFormat: 99},
	} {
		require.ErrorIs(t, bad.Validate(), ErrInvalidOptions, "%+v", bad)
		_, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: bad.MemTableSize,
			MaxImmutableMemTables: bad.MaxImmutableMemTables, L0StopWritesThreshold: bad.L0StopWritesThreshold,
			LevelSizeRatio: bad.LevelSizeRatio, TableFormat: bad.TableFormat})
		require.ErrorIs(t, err, ErrInvalidOptions, "Open rejects it too: %+v", bad)
	}
	var nilOpts *Options
	require.NoError(t, nilOpts.Validate())
}

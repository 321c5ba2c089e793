package kv

import (
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestOptionsText: String and ParseOptions round-trip every value option,
// defaults and random values alike; the names are snake case; bad text is
// ErrInvalidOptions and names the line.
func TestOptionsText(t *testing.T) {
	var d Options
	d.EnsureDefaults()
	text := d.String()
	for _, want := range []string{"[Options]\n", "  filter_policy=aprefix\n", "  block_cache_size=8388608\n",
		"  l0_compaction_threshold=4\n", "  wal_buffer_no_sync=false\n", "  table_format=columnar\n",
		"  fix_rule=cached\n", "  record_absent=auto\n", "  flush_split_bytes=-1\n", "  level_size_ratio=10\n"} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, "fs=")
	var back Options
	require.NoError(t, ParseOptions(text, &back))
	back.FS, back.intraL0Ratio = d.FS, d.intraL0Ratio // not options text names
	require.Equal(t, d, back)

	rng := rand.New(rand.NewPCG(5, 6))
	for range 50 {
		o := Options{FilterPolicy: filterpolicy.Names()[rng.IntN(len(filterpolicy.Names()))]}
		v := reflect.ValueOf(&o).Elem()
		for i := range v.NumField() {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() {
				continue
			}
			switch f.Interface().(type) {
			case sstable.Format:
				f.Set(reflect.ValueOf(sstable.Format(rng.IntN(2))))
				continue
			case FixRule:
				f.Set(reflect.ValueOf(FixRule(rng.IntN(int(FixCached) + 1))))
				continue
			case RecordRule:
				f.Set(reflect.ValueOf(RecordRule(rng.IntN(int(RecordWhileRewriting) + 1))))
				continue
			}
			switch f.Kind() {
			case reflect.Bool:
				f.SetBool(rng.IntN(2) == 0)
			case reflect.Int, reflect.Int64:
				f.SetInt(rng.Int64N(1<<40) - 1<<39)
			case reflect.Uint64:
				f.SetUint(rng.Uint64())
			case reflect.Float64:
				f.SetFloat(rng.Float64() * 100)
			}
		}
		var got Options
		require.NoError(t, ParseOptions(o.String(), &got))
		require.Equal(t, o, got)
	}

	// Text that names some options leaves the others alone.
	o := Options{MemTableSize: 1 << 20}
	require.NoError(t, ParseOptions("# tuned\nblock_cache_size = 1024\n\n", &o))
	require.Equal(t, Options{MemTableSize: 1 << 20, BlockCacheSize: 1024}, o)

	for _, bad := range []string{"no_such_option=1", "block_cache_size", "block_cache_size=lots", "table_format=diagonal",
		"fix_rule=sometimes", "record_absent=sometimes", "read_only=maybe", "[Options]\n  memtable_size=1\n  max_open_files=x"} {
		err := ParseOptions(bad, &Options{})
		require.ErrorIs(t, err, ErrInvalidOptions, bad)
		require.Contains(t, err.Error(), "options line", bad)
	}
	require.True(t, strings.HasPrefix(snakeCase("WALBufferNoSync"), "wal_buffer"), snakeCase("WALBufferNoSync"))
	require.Equal(t, "l0_stop_writes_threshold", snakeCase("L0StopWritesThreshold"))
	require.Equal(t, "max_immutable_mem_tables", snakeCase("MaxImmutableMemTables"))
}

// TestOptionsFile: a read-write Open writes the options it runs with, which
// ParseOptions reads back; a read-only Open leaves the file as it was.
func TestOptionsFile(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, MemTableSize: 1 << 20, FixRule: FixAuto})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	f, err := fs.Open("db/OPTIONS")
	require.NoError(t, err)
	data, err := io.ReadAll(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	var got Options
	require.NoError(t, ParseOptions(string(data), &got))
	want := Options{MemTableSize: 1 << 20, FixRule: FixAuto}
	want.EnsureDefaults()
	got.FS, got.intraL0Ratio = want.FS, want.intraL0Ratio
	require.Equal(t, want, got)

	ro, err := Open("db", &Options{FS: fs, ReadOnly: true, MemTableSize: 2 << 20})
	require.NoError(t, err)
	require.NoError(t, ro.Close())
	f, err = fs.Open("db/OPTIONS")
	require.NoError(t, err)
	again, err := io.ReadAll(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, data, again)
}

// TestMetricsString: the level table and the counters, as a store has them.
func TestMetricsString(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 64 << 10})
	require.NoError(t, err)
	defer db.Close()
	for i := range 5000 {
		require.NoError(t, db.Set(stateTestKey(i), make([]byte, 50), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	for i := range 1000 {
		_, err := db.Get(stateTestKey(5000 + i))
		require.ErrorIs(t, err, ErrNotFound)
	}
	m := db.Metrics()
	s := m.String()
	lines := strings.Split(s, "\n")
	require.Regexp(t, `^ *level +tables +size +read-amp *$`, lines[0])
	require.Regexp(t, `^ *6( \(base\))? +\d+ +[\d.]+ (KiB|MiB) +1 *$`, lines[7], "L6 holds the compacted tables")
	require.Regexp(t, fmt.Sprintf(`^ *total +%d `, m.Levels[6].NumFiles), lines[8])
	require.Contains(t, s, fmt.Sprintf("gets %d: filter checks %d,", m.Gets, m.FilterChecks))
	require.Contains(t, s, fmt.Sprintf("wasted probes %d ", m.FalsePositiveProbes))
	require.Contains(t, s, fmt.Sprintf("flushes %d ", m.Flushes))
	require.Contains(t, s, fmt.Sprintf("compactions %d ", m.Compactions))
	require.Contains(t, s, fmt.Sprintf("(hits %d, misses %d)", m.BlockCacheHits, m.BlockCacheMisses))
}

// TestMetricsBlockCache: a first read of a table's block misses the block
// cache, the same read again hits it.
func TestMetricsBlockCache(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer db.Close()
	for i := range 5000 {
		require.NoError(t, db.Set(stateTestKey(i), make([]byte, 50), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	before := db.Metrics()
	_, err = db.Get(stateTestKey(7))
	require.NoError(t, err)
	first := db.Metrics()
	require.Positive(t, first.BlockCacheMisses-before.BlockCacheMisses, "a first read misses")
	_, err = db.Get(stateTestKey(7))
	require.NoError(t, err)
	again := db.Metrics()
	require.Equal(t, first.BlockCacheMisses, again.BlockCacheMisses, "the same read again hits")
	require.Positive(t, again.BlockCacheHits-first.BlockCacheHits)
	require.Positive(t, again.BlockCacheSize)
}

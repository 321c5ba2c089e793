package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteMode runs -write on the adaptkv store and the Pebble peer: every
// combination of the lists is a table, every store a run of it, and each
// run's figures hang together (the writes it was asked for, a positive
// rate, ordered quantiles, background work that wrote what it flushed).
func TestWriteMode(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"-write", "-write-values", "100,2048", "-write-writers", "1,2", "-write-sync", "nosync,sync",
		"-write-ops", "6000", "-write-bytes", "4000000", "-memtable-size", "65536", "-target-file-size", "65536",
		"-json", "-", "-q"}
	require.NoError(t, run(args, &stdout, &stderr), stderr.String())
	var results []writeResult
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &results), "stdout is only JSON")
	require.Len(t, results, 2*2*2*2, "8 streams, 2 stores")
	table := stderr.String()
	require.Contains(t, table, "2 KiB values, 2 writers, Sync, random keys: 1000 writes a run")
	require.Contains(t, table, "100 B values, 1 writer, NoSync, random keys: 6000 writes a run")
	require.Contains(t, table, "aprefix / pebble: throughput")
	require.Contains(t, table, "WAL wait ms (waits)")
	stores := map[string]int{}
	for _, r := range results {
		stores[r.Store]++
		want := uint64(6000)
		if r.ValueSize == 2048 {
			want = 4000000 / (2048 + 16) // -write-bytes caps it
		}
		if r.Sync {
			want = max(want/10, 1000)
		}
		require.Equal(t, want, r.Writes, "%+v", r)
		require.Positive(t, r.OpsPerSec)
		require.InDelta(t, float64(r.Writes)/r.Seconds, r.OpsPerSec, 1e-6*r.OpsPerSec)
		require.Positive(t, r.P50us)
		require.LessOrEqual(t, r.P50us, r.P99us)
		require.LessOrEqual(t, r.P99us, r.P999us)
		require.LessOrEqual(t, r.P999us, r.MaxUs*1.05, "the histogram's buckets are 3% wide")
		if r.Store == "pebble" {
			require.Nil(t, r.WALWaitMs, "Pebble does not count its writers' waits for a WAL switch")
		} else {
			require.NotNil(t, r.WALWaitMs)
			require.NotNil(t, r.WALWaits)
			require.Equal(t, *r.WALWaits == 0, *r.WALWaitMs == 0, "%+v", r)
		}
		if r.ValueSize == 2048 && !r.Sync {
			// 12 MB through 64 KiB memtables: flushes and compactions ran.
			require.Positive(t, r.Flushes, "%+v", r)
			require.Positive(t, r.Compactions, "%+v", r)
			require.Greater(t, r.WriteAmp, 0.5, "%+v", r)
		}
	}
	require.Equal(t, map[string]int{"aprefix": 8, "pebble": 8}, stores)
}

// TestWriteSpecs: the lists multiply out in order, and the run sizes follow
// -write-ops, -write-bytes and Sync.
func TestWriteSpecs(t *testing.T) {
	f := writeFlags{values: "100, 4096", writers: "1,8", sync: "nosync,sync", keys: "random,sequential", ops: 300_000, bytes: 256 << 20}
	specs, err := f.specs()
	require.NoError(t, err)
	require.Len(t, specs, 16)
	require.Equal(t, writeSpec{ValueSize: 100, Writers: 1}, specs[0])
	require.Equal(t, writeSpec{ValueSize: 4096, Writers: 8, Sync: true, Sequential: true}, specs[15])
	require.Equal(t, "4 KiB values, 8 writers, Sync, sequential keys", specs[15].String())
	require.Equal(t, uint64(300_000), f.opsOf(specs[0]))
	require.Equal(t, uint64(256<<20/(4096+16)), f.opsOf(specs[8]))
	require.Equal(t, uint64(30_000), f.opsOf(writeSpec{ValueSize: 100, Writers: 1, Sync: true}))
}

// TestWALFlag: -wal sets how the adaptkv stores' WAL takes NoSync writes
// (kv.Options.DisableWALMapping, WALBufferNoSync), the header says which,
// and a write run completes under each.
func TestWALFlag(t *testing.T) {
	for mode, want := range map[string]string{
		"mapped":   "reaches the OS (WAL mapped on Linux)",
		"write":    "reaches the OS (write(2))",
		"buffered": "in the WAL buffer",
	} {
		o := options{wal: mode, memTable: 64 << 10, targetFile: 64 << 10}
		k, err := kvOptions("aprefix", defaultConfig(o, 0))
		require.NoError(t, err)
		require.Equal(t, mode == "write", k.DisableWALMapping, mode)
		require.Equal(t, mode == "buffered", k.WALBufferNoSync, mode)
		var stdout, stderr bytes.Buffer
		args := []string{"-write", "-wal", mode, "-policies", "aprefix", "-write-values", "100", "-write-writers", "2",
			"-write-ops", "3000", "-memtable-size", "65536", "-target-file-size", "65536", "-q"}
		require.NoError(t, run(args, &stdout, &stderr), stderr.String())
		out := stdout.String() + stderr.String()
		var row string
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "NoSync write returns once") {
				row = line
			}
		}
		require.Contains(t, row, want, mode)
		require.Contains(t, out, "100 B values, 2 writers, NoSync, random keys: 3000 writes a run", mode)
	}
}

package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/adaptkv/adaptkv/kv"
	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// defaultConfig is the LSM every store of a run gets. The options that
// mean the same in both engines take the adaptkv store's defaults
// (kv.Options.EnsureDefaults) at kvbench's memtable size and L0 trigger,
// and the Pebble peers are set to the same values (pebbleOptions).
func defaultConfig(o options, format sstable.Format) StoreConfig {
	d := kv.Options{MemTableSize: o.memTable, L0CompactionThreshold: defaultL0Trigger}
	d.EnsureDefaults()
	return StoreConfig{
		BitsPerKey: o.bits, MemTableSize: o.memTable, TargetFileSize: uint64(o.targetFile),
		BaseLevelBytes: uint64(o.memTable) * defaultL0Trigger * 4, L0Trigger: defaultL0Trigger,
		BlockCacheSize: o.cacheSize, MaxImmutableMemTables: d.MaxImmutableMemTables,
		L0StopWrites: d.L0StopWritesThreshold, Compactions: d.MaxConcurrentCompactions,
		MaxOpenFiles: d.MaxOpenFiles, KnownNegatives: o.knownNeg, TableFormat: format,
		PeerMemTableSize: o.peerMemTable, DirectReads: o.direct, FixRule: fixRules[o.fixRule],
		RecordAbsent: recordRules[o.record],
		FixInline:    o.fixInline, RemoteCacheSize: o.remoteCache, SeekPrefixReads: o.read == "seekprefix",
		DisableWALMapping: walModes[o.wal].disableMapping, WALBufferNoSync: walModes[o.wal].buffered,
	}
}

// walModes are -wal's choices: the kv.Options each sets.
var walModes = map[string]struct{ disableMapping, buffered bool }{
	"mapped":   {},
	"write":    {disableMapping: true},
	"buffered": {buffered: true},
}

// configRow is one option as each engine runs it.
type configRow struct{ name, kv, pebble string }

// configRows lists the options of the run's stores side by side: the
// adaptkv store's (kvOptions, defaults filled in) and the Pebble peers'
// (pebbleOptions after Pebble's EnsureDefaults).
func configRows(cfg StoreConfig) []configRow {
	k, _ := kvOptions(kv.DefaultFilterPolicy, cfg) // no variant: nothing to parse, no error
	p := pebbleOptions(cfg, bloom.FilterPolicy(cfg.BitsPerKey), nil)
	lo, hi := p.CompactionConcurrencyRange()
	concurrency := fmt.Sprint(lo)
	if hi != lo {
		concurrency = fmt.Sprintf("%d-%d", lo, hi)
	}
	kvFormat := "columnar (flushes: row)"
	if k.TableFormat == sstable.FormatRow {
		kvFormat = "row"
	} else if k.FlushInTableFormat {
		kvFormat = "columnar"
	}
	nosync := "reaches the OS (WAL mapped on Linux)"
	switch {
	case k.WALBufferNoSync:
		nosync = "in the WAL buffer"
	case k.DisableWALMapping:
		nosync = "reaches the OS (write(2))"
	}
	return []configRow{
		{"memtable size", mib(k.MemTableSize), mib(p.MemTableSize)},
		{"memtables before writes stall", fmt.Sprint(k.MaxImmutableMemTables + 1), fmt.Sprint(p.MemTableStopWritesThreshold)},
		{"L0 compaction threshold", fmt.Sprint(k.L0CompactionThreshold), fmt.Sprint(p.L0CompactionThreshold)},
		{"L0 stop-writes threshold", fmt.Sprint(k.L0StopWritesThreshold), fmt.Sprint(p.L0StopWritesThreshold)},
		{"compactions at once", fmt.Sprint(k.MaxConcurrentCompactions), concurrency},
		{"target table size", mib(k.TargetFileSize), mib(p.TargetFileSizes[0])},
		{"base level size", mib(cfg.BaseLevelBytes), mib(p.LBaseMaxBytes)},
		{"level size ratio", fmt.Sprint(k.LevelSizeRatio), fmt.Sprint(p.Experimental.LevelMultiplier)},
		{"data block size", "4 KiB", kib(p.Levels[0].BlockSize)},
		{"compression", "snappy", strings.ToLower(p.Levels[0].Compression().Name)},
		{"block cache", mib(k.BlockCacheSize), mib(cfg.BlockCacheSize)},
		{"remote chunks cached", remoteCacheText(k.RemoteCacheSize), "none (a static filter)"},
		{"table reads", tableReads(k.DirectReads), tableReads(cfg.DirectReads)},
		{"open tables", fmt.Sprint(k.MaxOpenFiles), fmt.Sprint(p.MaxOpenFiles)},
		{"L0 file threshold", fmt.Sprint(k.L0CompactionFileThreshold), fmt.Sprint(p.L0CompactionFileThreshold)},
		{"flush split", flushSplitText(k.FlushSplitBytes), kib(p.FlushSplitBytes) + " per L0 sublevel interval"},
		{"merged flushes", fmt.Sprintf("2 memtables while L0 is %d deep", k.MergeFlushL0Depth), "none"},
		{"table format", kvFormat, "row " + p.FormatMajorVersion.MaxTableFormat().String()},
		{"NoSync write returns once", nosync, "in the WAL buffer"},
		{"false positives fixed", fixRuleText(k.FixRule, k.FixInline, k.DirectReads), "none (a static filter)"},
		{"absent Gets recorded", recordRuleText(k.RecordAbsent), "none"},
		{"point reads", pointReadText(cfg.SeekPrefixReads), "DB.Get (pebble); SeekPrefixGE, L6 filters on, reused iterator (pebble-l6)"},
	}
}

// recordRules are -record's values.
var recordRules = map[string]kv.RecordRule{"auto": kv.RecordAuto, "always": kv.RecordAlways, "never": kv.RecordNever,
	"rewriting": kv.RecordWhileRewriting}

func recordRuleText(r kv.RecordRule) string {
	switch r {
	case kv.RecordAlways:
		return "every one (RecordAlways)"
	case kv.RecordNever:
		return "none (RecordNever)"
	case kv.RecordWhileRewriting:
		return "while flushes and compactions write tables (RecordWhileRewriting)"
	}
	return "every one with -fix repeated or auto, or stacked; else while flushes and compactions write tables (RecordAuto)"
}

// fixRules are -fix's values.
var fixRules = map[string]kv.FixRule{"default": kv.FixDefault, "auto": kv.FixAuto, "every": kv.FixEvery, "repeated": kv.FixRepeated, "cached": kv.FixCached}

func fixRuleText(r kv.FixRule, inline, direct bool) string {
	which, when := "every one", "in the background"
	switch r {
	case kv.FixAuto:
		which = "every one while absent keys repeat, else those of keys asked before (FixAuto)"
	case kv.FixRepeated:
		which = "those of keys asked before (FixRepeated)"
	case kv.FixCached:
		which = "those of keys that come back after their table's cache let them go, cached per table at their first (FixCached)"
		if !direct {
			which = "those of keys that come back, cached per table at their first (FixCached)"
		}
	}
	if inline {
		when = "by the Get"
	}
	return which + ", " + when
}

func pointReadText(seekPrefix bool) string {
	if seekPrefix {
		return "Iterator.SeekPrefixGE, reused iterator"
	}
	return "DB.Get"
}

func flushSplitText(n int64) string {
	if n <= 0 {
		return "none (one table a flush below 64 MiB: the bulk load's in 8 key ranges)"
	}
	return kib(n) + " at base-level table bounds"
}

func remoteCacheText(size int64) string {
	if size <= 0 {
		return "none"
	}
	return "up to " + mib(size) + " of the block cache, taken as fixes fill it (adaptive policies)"
}

func tableReads(direct bool) string {
	if direct {
		return "O_DIRECT"
	}
	return "through the page cache"
}

// printConfig writes the run header: the options both engines run with,
// then every option that differs, with each engine's value.
func printConfig(w io.Writer, cfg StoreConfig) {
	var same []string
	var differ []configRow
	for _, r := range configRows(cfg) {
		if r.kv == r.pebble {
			same = append(same, r.name+" "+r.kv)
		} else {
			differ = append(differ, r)
		}
	}
	fmt.Fprintf(w, "adaptkv and Pebble %s alike: %s; filters %d bits/key (bloom, the Pebble peers).\n",
		pebbleVersion(), strings.Join(same, ", "), cfg.BitsPerKey)
	if len(differ) == 0 {
		return
	}
	fmt.Fprintln(w, "Options that differ (each engine's own mechanism):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  option\tadaptkv\tPebble")
	for _, r := range differ {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.name, r.kv, r.pebble)
	}
	tw.Flush()
}

// pebbleVersion is the Pebble module version this binary was built with.
func pebbleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/cockroachdb/pebble/v2" {
				return d.Version
			}
		}
	}
	return "v2"
}

func mib[T int | int64 | uint64](n T) string {
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<20)), ".0") + " MiB"
}

func kib[T int | int64 | uint64](n T) string {
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<10)), ".0") + " KiB"
}

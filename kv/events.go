package kv

import (
	"fmt"
	"time"

	"github.com/adaptkv/adaptkv/internal/base"
)

// EventListener holds functions the store calls when background work
// happens (Pebble's EventListener, in fewer events). Every field is
// optional. The functions run on the store's own goroutines (a flush's, a
// compaction's, the writer that stalls; TableCreated on the goroutine that
// writes the table, one of several in a flush or Compact written in key
// ranges at once), maybe several at a time, while that work waits for
// them, so they should return quickly; they must not call the DB's methods that
// wait for background work (Flush, Compact, Close).
type EventListener struct {
	// FlushBegin and FlushEnd bracket a flush of queued memtables to L0.
	FlushBegin, FlushEnd func(FlushInfo)
	// CompactionBegin and CompactionEnd bracket a compaction, a table move
	// (a table installed one level down without a rewrite) included.
	CompactionBegin, CompactionEnd func(CompactionInfo)
	// WriteStallBegin is called when a writer waits for a flush because
	// MaxImmutableMemTables memtables are queued, WriteStallEnd when it
	// goes on (Metrics.WriteStalls and WriteStallTime count the same).
	WriteStallBegin func(WriteStallBeginInfo)
	WriteStallEnd   func()
	// BackgroundError is called with a flush's or a compaction's error
	// (a flush error stops writes: they fail with it from then on; a
	// compaction is retried after the next flush).
	BackgroundError func(error)
	// TableCreated is called when a flush or compaction creates a table
	// file, before it writes it; TableDeleted when a table file that no
	// version uses any more is removed.
	TableCreated func(TableCreateInfo)
	TableDeleted func(TableDeleteInfo)
}

// TableInfo describes one table.
type TableInfo struct {
	FileNum uint64
	// Size is the file's size in bytes.
	Size uint64
	// Smallest and Largest are its smallest and largest user keys.
	Smallest, Largest []byte
}

func tableInfo(m *base.TableMeta) TableInfo {
	return TableInfo{FileNum: m.FileNum, Size: m.Size, Smallest: m.Smallest.UserKey, Largest: m.Largest.UserKey}
}

func tableInfos(ms []*base.TableMeta) []TableInfo {
	out := make([]TableInfo, len(ms))
	for i, m := range ms {
		out[i] = tableInfo(m)
	}
	return out
}

// FlushInfo describes a flush. FlushBegin sees JobID and Memtables.
type FlushInfo struct {
	// JobID numbers the store's flushes and compactions since Open.
	JobID int
	// Memtables is how many queued memtables the flush writes together.
	Memtables int
	// Output are the L0 tables it wrote.
	Output []TableInfo
	// Parts is how many key ranges it wrote at once, on as many as
	// Options.MaxConcurrentCompactions goroutines (1 but for a large
	// flush; see docs/ARCHITECTURE.md, "Flushes and compactions in parts").
	Parts int
	// Duration is how long it took, the install of its tables included.
	Duration time.Duration
	// Err is why it failed (nil: it did not).
	Err error
}

func (i FlushInfo) String() string {
	if i.Err != nil {
		return fmt.Sprintf("[JOB %d] flush of %d memtable(s) failed: %v", i.JobID, i.Memtables, i.Err)
	}
	return fmt.Sprintf("[JOB %d] flushed %d memtable(s) to %d L0 table(s), %s, in %.3fs%s",
		i.JobID, i.Memtables, len(i.Output), sizeText(sumSizes(i.Output)), i.Duration.Seconds(), partsText(i.Parts))
}

// LevelTables are tables of one level.
type LevelTables struct {
	Level  int
	Tables []TableInfo
}

// CompactionInfo describes a compaction. CompactionBegin sees every field
// but Output, Duration and Err.
type CompactionInfo struct {
	JobID int
	// Input are the tables it merges: those of the start level, then
	// those of the output level they overlap (none for a move or an
	// intra-L0 compaction).
	Input []LevelTables
	// Output are the tables it wrote (the moved table for a move).
	Output LevelTables
	// Move: the one input table was installed at the output level as it
	// is. Manual: a Compact call's.
	Move, Manual bool
	// Parts is how many key ranges it wrote at once (1 but for a large
	// manual compaction; see docs/ARCHITECTURE.md, "Flushes and
	// compactions in parts").
	Parts    int
	Duration time.Duration
	Err      error
}

func (i CompactionInfo) String() string {
	from, to := 0, i.Output.Level
	var in uint64
	n := 0
	for j, l := range i.Input {
		if j == 0 {
			from = l.Level
		}
		in += sumSizes(l.Tables)
		n += len(l.Tables)
	}
	kind := "compaction"
	switch {
	case i.Move:
		kind = "move"
	case i.Manual:
		kind = "manual compaction"
	}
	if i.Err != nil {
		return fmt.Sprintf("[JOB %d] %s L%d->L%d failed: %v", i.JobID, kind, from, to, i.Err)
	}
	return fmt.Sprintf("[JOB %d] %s L%d->L%d: %d table(s), %s -> %d table(s), %s, in %.3fs%s", i.JobID, kind, from, to,
		n, sizeText(in), len(i.Output.Tables), sizeText(sumSizes(i.Output.Tables)), i.Duration.Seconds(), partsText(i.Parts))
}

// partsText is ", in N key ranges at once" for more than one part.
func partsText(parts int) string {
	if parts < 2 {
		return ""
	}
	return fmt.Sprintf(", in %d key ranges at once", parts)
}

// WriteStallBeginInfo says why writers stall.
type WriteStallBeginInfo struct {
	Reason string
}

// TableCreateInfo describes a table file being created.
type TableCreateInfo struct {
	JobID int
	// Reason is "flushing", "compacting" or "recovering" (a WAL replayed
	// into L0 by Open).
	Reason  string
	FileNum uint64
	Path    string
}

// TableDeleteInfo describes a table file removed (Err: the removal failed).
type TableDeleteInfo struct {
	FileNum uint64
	Path    string
	Err     error
}

// Logger is where the store writes what MakeLoggingEventListener reports
// (Pebble's Logger shape). The store itself writes nothing elsewhere.
type Logger interface {
	Infof(format string, args ...any)
	Errorf(format string, args ...any)
}

// MakeLoggingEventListener returns an EventListener that writes every
// event to l: flushes, compactions, stalls and table files with Infof,
// background errors and failed flushes or compactions with Errorf.
// Options.Logger without an EventListener uses it.
func MakeLoggingEventListener(l Logger) EventListener {
	return EventListener{
		FlushBegin: func(i FlushInfo) { l.Infof("[JOB %d] flushing %d memtable(s)", i.JobID, i.Memtables) },
		FlushEnd: func(i FlushInfo) {
			if i.Err != nil {
				l.Errorf("%s", i)
				return
			}
			l.Infof("%s", i)
		},
		CompactionBegin: func(i CompactionInfo) { l.Infof("[JOB %d] compacting: %d level(s) of input", i.JobID, len(i.Input)) },
		CompactionEnd: func(i CompactionInfo) {
			if i.Err != nil {
				l.Errorf("%s", i)
				return
			}
			l.Infof("%s", i)
		},
		WriteStallBegin: func(i WriteStallBeginInfo) { l.Infof("write stall beginning: %s", i.Reason) },
		WriteStallEnd:   func() { l.Infof("write stall ending") },
		BackgroundError: func(err error) { l.Errorf("background error: %v", err) },
		TableCreated: func(i TableCreateInfo) {
			l.Infof("[JOB %d] %s: created table %s", i.JobID, i.Reason, i.Path)
		},
		TableDeleted: func(i TableDeleteInfo) {
			if i.Err != nil {
				l.Errorf("deleting table %s: %v", i.Path, i.Err)
				return
			}
			l.Infof("deleted table %s", i.Path)
		},
	}
}

func sumSizes(ts []TableInfo) uint64 {
	var n uint64
	for _, t := range ts {
		n += t.Size
	}
	return n
}

func sizeText(n uint64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

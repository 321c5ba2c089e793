package kv

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// eventLog records what an EventListener was told.
type eventLog struct {
	mu                            sync.Mutex
	flushBegin, compactionBegin   map[int]bool
	flushes                       []FlushInfo
	compactions                   []CompactionInfo
	created                       map[uint64]TableCreateInfo
	deleted                       []TableDeleteInfo
	stallBegins, stallEnds        int
	bgErrors                      []error
	endWithoutBegin, createdTwice bool
}

func newEventLog() *eventLog {
	return &eventLog{flushBegin: map[int]bool{}, compactionBegin: map[int]bool{}, created: map[uint64]TableCreateInfo{}}
}

func (l *eventLog) listener() *EventListener {
	return &EventListener{
		FlushBegin: func(i FlushInfo) { l.mu.Lock(); l.flushBegin[i.JobID] = true; l.mu.Unlock() },
		FlushEnd: func(i FlushInfo) {
			l.mu.Lock()
			l.endWithoutBegin = l.endWithoutBegin || !l.flushBegin[i.JobID]
			l.flushes = append(l.flushes, i)
			l.mu.Unlock()
		},
		CompactionBegin: func(i CompactionInfo) { l.mu.Lock(); l.compactionBegin[i.JobID] = true; l.mu.Unlock() },
		CompactionEnd: func(i CompactionInfo) {
			l.mu.Lock()
			l.endWithoutBegin = l.endWithoutBegin || !l.compactionBegin[i.JobID]
			l.compactions = append(l.compactions, i)
			l.mu.Unlock()
		},
		WriteStallBegin: func(WriteStallBeginInfo) { l.mu.Lock(); l.stallBegins++; l.mu.Unlock() },
		WriteStallEnd:   func() { l.mu.Lock(); l.stallEnds++; l.mu.Unlock() },
		BackgroundError: func(err error) { l.mu.Lock(); l.bgErrors = append(l.bgErrors, err); l.mu.Unlock() },
		TableCreated: func(i TableCreateInfo) {
			l.mu.Lock()
			_, dup := l.created[i.FileNum]
			l.createdTwice = l.createdTwice || dup
			l.created[i.FileNum] = i
			l.mu.Unlock()
		},
		TableDeleted: func(i TableDeleteInfo) { l.mu.Lock(); l.deleted = append(l.deleted, i); l.mu.Unlock() },
	}
}

// TestEventListener: every flush and compaction is reported once, begin
// before end, and the reports add up to the store's Metrics; every table
// written is created once, for the job that wrote it; every table removed
// was replaced and is in no level.
func TestEventListener(t *testing.T) {
	l := newEventLog()
	db, err := Open("db", &Options{FS: vfs.NewMem(), EventListener: l.listener(), MemTableSize: 32 << 10,
		TargetFileSize: 16 << 10, L0CompactionThreshold: 2})
	require.NoError(t, err)
	for i := range 20_000 {
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%07d", (i*7919)%20_000), make([]byte, 40), NoSync))
	}
	require.NoError(t, db.Flush())
	require.NoError(t, db.Compact(nil, nil))
	m := db.Metrics()
	live := map[uint64]bool{}
	for _, level := range db.currentVersion().Levels {
		for _, tb := range level {
			live[tb.FileNum] = true
		}
	}
	require.NoError(t, db.Close())

	l.mu.Lock()
	defer l.mu.Unlock()
	require.False(t, l.endWithoutBegin)
	require.False(t, l.createdTwice)
	require.Empty(t, l.bgErrors)
	var memtables uint64
	written := map[uint64]int{} // table -> job
	for _, f := range l.flushes {
		require.NoError(t, f.Err)
		require.Positive(t, f.Duration)
		memtables += uint64(f.Memtables)
		require.NotEmpty(t, f.Output)
		for _, o := range f.Output {
			written[o.FileNum] = f.JobID
			require.Positive(t, o.Size)
			require.LessOrEqual(t, string(o.Smallest), string(o.Largest))
		}
	}
	require.Equal(t, m.Flushes, memtables, "memtables flushed")
	var compactions, moves, manual uint64
	for _, c := range l.compactions {
		require.NoError(t, c.Err)
		require.NotEmpty(t, c.Input)
		if c.Move {
			moves++
			require.Equal(t, c.Input[0].Tables, c.Output.Tables)
			continue
		}
		compactions++
		if c.Manual {
			manual++
		}
		for _, o := range c.Output.Tables {
			written[o.FileNum] = c.JobID
		}
		require.True(t, strings.HasPrefix(c.String(), fmt.Sprintf("[JOB %d] ", c.JobID)), c.String())
	}
	require.Equal(t, m.Compactions, compactions)
	require.Equal(t, m.TableMoves, moves)
	require.Positive(t, compactions-manual, "background compactions ran")
	require.Positive(t, manual)
	require.Len(t, l.created, len(written), "a table created for every table written")
	for fn, job := range written {
		c, ok := l.created[fn]
		require.True(t, ok, "table %d", fn)
		require.Equal(t, job, c.JobID, "table %d", fn)
		require.Contains(t, []string{"flushing", "compacting"}, c.Reason)
	}
	require.NotEmpty(t, l.deleted)
	for _, d := range l.deleted {
		require.NoError(t, d.Err)
		require.False(t, live[d.FileNum], "table %d removed while live", d.FileNum)
		_, ok := l.created[d.FileNum]
		require.True(t, ok, "table %d removed but never created", d.FileNum)
	}
}

// slowSyncFS delays every Sync of a table file, so flushes fall behind.
type slowSyncFS struct {
	vfs.FS
	delay time.Duration
}

func (fs slowSyncFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, cat)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return slowSyncFile{f, fs.delay}, nil
}

type slowSyncFile struct {
	vfs.File
	delay time.Duration
}

func (f slowSyncFile) Sync() error     { time.Sleep(f.delay); return f.File.Sync() }
func (f slowSyncFile) SyncData() error { time.Sleep(f.delay); return f.File.SyncData() }

// TestEventListenerStallsAndErrors: writers that outrun slow flushes stall,
// each stall reported begin and end as Metrics counts it; a flush that
// fails is reported with its error and as the background error, once.
func TestEventListenerStallsAndErrors(t *testing.T) {
	l := newEventLog()
	db, err := Open("db", &Options{FS: slowSyncFS{vfs.NewMem(), 20 * time.Millisecond}, EventListener: l.listener(),
		MemTableSize: 16 << 10, MaxImmutableMemTables: 1, MergeFlushL0Depth: -1})
	require.NoError(t, err)
	for i := range 5000 {
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%07d", i), make([]byte, 100), NoSync))
	}
	m := db.Metrics()
	require.NoError(t, db.Close())
	l.mu.Lock()
	t.Logf("%d stalls, %v, %d memtables flushed", m.WriteStalls, m.WriteStallTime, m.Flushes)
	require.Positive(t, m.WriteStalls)
	require.Equal(t, int(m.WriteStalls), l.stallBegins)
	require.Equal(t, l.stallBegins, l.stallEnds)
	l.mu.Unlock()

	// A table file that cannot be created: the flush fails.
	var fail atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && op.Kind == errorfs.OpCreate && strings.HasSuffix(op.Path, ".sst") {
			return errorfs.ErrInjected
		}
		return nil
	})
	l = newEventLog()
	db, err = Open("db2", &Options{FS: errorfs.Wrap(vfs.NewMem(), inj), EventListener: l.listener()})
	require.NoError(t, err)
	require.NoError(t, db.Set([]byte("a"), []byte("1"), NoSync))
	fail.Store(true)
	require.ErrorIs(t, db.Flush(), errorfs.ErrInjected)
	require.ErrorIs(t, db.Set([]byte("b"), []byte("2"), NoSync), errorfs.ErrInjected, "writes stop")
	_ = db.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Len(t, l.bgErrors, 1)
	require.ErrorIs(t, l.bgErrors[0], errorfs.ErrInjected)
	require.Len(t, l.flushes, 1)
	require.ErrorIs(t, l.flushes[0].Err, errorfs.ErrInjected)
	require.Contains(t, l.flushes[0].String(), "failed")
}

// TestLoggingEventListener: Options.Logger alone logs the events.
func TestLoggingEventListener(t *testing.T) {
	var lg testLogger
	db, err := Open("db", &Options{FS: vfs.NewMem(), Logger: &lg})
	require.NoError(t, err)
	require.NoError(t, db.Set([]byte("a"), []byte("1"), NoSync))
	require.NoError(t, db.Flush())
	require.NoError(t, db.Close())
	lg.mu.Lock()
	defer lg.mu.Unlock()
	out := strings.Join(lg.lines, "\n")
	require.Contains(t, out, "flushing 1 memtable(s)")
	require.Contains(t, out, "flushed 1 memtable(s) to 1 L0 table(s)")
	require.Contains(t, out, "flushing: created table")
	require.Empty(t, lg.errors)
}

type testLogger struct {
	mu            sync.Mutex
	lines, errors []string
}

func (l *testLogger) Infof(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *testLogger) Errorf(format string, args ...any) {
	l.mu.Lock()
	l.errors = append(l.errors, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

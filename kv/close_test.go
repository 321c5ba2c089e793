package kv

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// gateFS blocks the first Open of a file whose name ends with target (and
// the first Create of one ending with createTarget) until release is closed
// (entered is closed when it blocks).
type gateFS struct {
	vfs.FS
	target       atomic.Value // string; "" matches nothing
	createTarget atomic.Value // string; "" matches nothing
	entered      chan struct{}
	release      chan struct{}
}

func newGateFS(fs vfs.FS) *gateFS {
	g := &gateFS{FS: fs, entered: make(chan struct{}), release: make(chan struct{})}
	g.target.Store("")
	g.createTarget.Store("")
	return g
}

func (g *gateFS) wait(target *atomic.Value, name string) {
	if t, _ := target.Load().(string); t != "" && strings.HasSuffix(name, t) && target.CompareAndSwap(t, "") {
		close(g.entered)
		<-g.release
	}
}

func (g *gateFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	g.wait(&g.target, name)
	return g.FS.Open(name, opts...)
}

func (g *gateFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	g.wait(&g.createTarget, name)
	return g.FS.Create(name, cat)
}

// TestGetRacingCloseCompletes blocks a Get while it opens a table (not yet
// in the table cache: MaxOpenFiles 1 keeps only the oldest of two L0
// tables) and closes the store meanwhile. Close must wait for the Get, which
// then returns its value: Close used to release the table and block caches
// under it, and the Get panicked in Pebble's cache ("inconsistent reference
// count") or failed with the sstable package's ErrClosed.
func TestGetRacingCloseCompletes(t *testing.T) {
	mem := vfs.NewMem()
	db, err := Open("db", &Options{FS: mem})
	require.NoError(t, err)
	require.NoError(t, db.Set([]byte("a"), []byte("1"), Sync))
	require.NoError(t, db.Flush())
	require.NoError(t, db.Set([]byte("b"), []byte("2"), Sync))
	require.NoError(t, db.Flush())
	require.NoError(t, db.Close())

	g := newGateFS(mem)
	db, err = Open("db", &Options{FS: g, MaxOpenFiles: 1})
	require.NoError(t, err)
	l0 := db.mu.current.Levels[0]
	require.Len(t, l0, 2)
	// The background pass after Open warms the oldest table only.
	g.target.Store(tableFileName(l0[len(l0)-1].FileNum))
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(g.release) }) }
	defer release()

	type result struct {
		v     []byte
		err   error
		panic any
	}
	res := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			r.panic = recover()
			res <- r
		}()
		r.v, r.err = db.Get([]byte("b"))
	}()
	<-g.entered
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		release()
		r := <-res
		t.Fatalf("Close returned (%v) with a Get in flight; the Get then returned %q, %v, panic %v", err, r.v, r.err, r.panic)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	r := <-res
	require.Nil(t, r.panic, "Get racing Close panicked")
	require.NoError(t, r.err)
	require.Equal(t, "2", string(r.v))
	require.NoError(t, <-closed)
	_, err = db.Get([]byte("b"))
	require.ErrorIs(t, err, ErrClosed)
}

// fileCountFS counts the files (and directories) open through it whose
// name ends with suffix ("": all).
type fileCountFS struct {
	vfs.FS
	suffix string
	open   atomic.Int64
}

type countedFile struct {
	vfs.File
	fs     *fileCountFS
	closed atomic.Bool
}

func (f *countedFile) Close() error {
	if f.closed.CompareAndSwap(false, true) {
		f.fs.open.Add(-1)
	}
	return f.File.Close()
}

func (c *fileCountFS) count(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, c.suffix) {
		return f, err
	}
	c.open.Add(1)
	return &countedFile{File: f, fs: c}, nil
}

func (c *fileCountFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := c.FS.Open(name, opts...)
	return c.count(name, f, err)
}

func (c *fileCountFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.Create(name, cat)
	return c.count(name, f, err)
}

func (c *fileCountFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := c.FS.OpenReadWrite(name, cat, opts...)
	return c.count(name, f, err)
}

func (c *fileCountFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.ReuseForWrite(oldname, newname, cat)
	return c.count(newname, f, err)
}

func (c *fileCountFS) OpenDir(name string) (vfs.File, error) {
	f, err := c.FS.OpenDir(name)
	return c.count(name, f, err)
}

// manyTablesDB writes n keys compacted into several L6 tables and reopens
// the store on cfs (a cold table cache) with at most maxOpen tables open.
func manyTablesDB(t *testing.T, cfs *fileCountFS, n, maxOpen int) *DB {
	opts := &Options{FS: cfs, TargetFileSize: 4 << 10, MaxOpenFiles: maxOpen}
	db, err := Open("db", opts)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%05d", i), []byte("value-value-value"), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	require.Greater(t, len(db.mu.current.Levels[6]), 3)
	require.NoError(t, db.Close())
	require.Zero(t, cfs.open.Load())
	db, err = Open("db", opts)
	require.NoError(t, err)
	return db
}

// TestIteratorLeftOpenAtClose: an iterator still open when the DB closes
// stops with ErrClosed instead of reading closed tables, keeps the tables
// it holds open until it is closed, and then every table file is closed.
func TestIteratorLeftOpenAtClose(t *testing.T) {
	cfs := &fileCountFS{FS: vfs.NewMem(), suffix: ".sst"}
	db := manyTablesDB(t, cfs, 2000, 0)
	it, err := db.NewIter(nil)
	require.NoError(t, err)
	require.True(t, it.First())
	require.Equal(t, "key00000", string(it.Key()))
	require.NoError(t, db.Close())
	require.Positive(t, cfs.open.Load(), "the iterator's table stays open")

	require.False(t, it.Next())
	require.ErrorIs(t, it.Error(), ErrClosed)
	require.False(t, it.SeekGE([]byte("key01500")), "another table, not open yet")
	require.ErrorIs(t, it.Error(), ErrClosed)
	require.NoError(t, it.Close())
	require.Zero(t, cfs.open.Load(), "closing the iterator closes its tables")
	require.ErrorIs(t, it.Close(), ErrClosed)
}

// TestCloseRacesReaders closes the store while goroutines run Gets and
// iterators over tables that are opened and evicted (MaxOpenFiles 2): no
// panic, every read returns a right value or ErrClosed, and once the
// iterators are closed no table file is left open. Run with -race.
func TestCloseRacesReaders(t *testing.T) {
	const n = 2000
	for round := 0; round < 5; round++ {
		cfs := &fileCountFS{FS: vfs.NewMem(), suffix: ".sst"}
		db := manyTablesDB(t, cfs, n, 2)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; ; i += 97 {
					k := fmt.Appendf(nil, "key%05d", i%n)
					v, err := db.Get(k)
					if err == ErrClosed {
						return
					}
					if err != nil || string(v) != "value-value-value" {
						errs <- fmt.Errorf("Get(%s) = %q, %v", k, v, err)
						return
					}
				}
			}(w)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					it, err := db.NewIter(nil)
					if err == ErrClosed {
						return
					}
					if err != nil {
						errs <- err
						return
					}
					count := 0
					for ok := it.First(); ok; ok = it.Next() {
						count++
					}
					ierr := it.Error()
					cerr := it.Close()
					if ierr == ErrClosed {
						return
					}
					if ierr != nil || cerr != nil || count != n {
						errs <- fmt.Errorf("iteration: %d keys, %v, close %v", count, ierr, cerr)
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(5+round*5) * time.Millisecond)
		require.NoError(t, db.Close())
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		require.Zero(t, cfs.open.Load(), "round %d: table files left open", round)
	}
}

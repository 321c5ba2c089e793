package kv

import (
	"bytes"
	"fmt"
	"runtime"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/rangedel"
	"github.com/adaptkv/adaptkv/kv/internal/knownneg"
	"github.com/adaptkv/adaptkv/sstable"
)

func (db *DB) allocFileNum() uint64 { return db.nextFileNum.Add(1) - 1 }

// writeTable writes the entries of it into a new table and returns its
// metadata (the file is synced by the sstable writer).
func (db *DB) writeTable(it base.Iterator, rangeDels *rangedel.Set) (*base.TableMeta, error) {
	metas, err := db.writeTables(it, rangeDels, nil, 0, db.nextJobID(), "recovering")
	if err != nil {
		return nil, err
	}
	return metas[0], nil
}

// flushFormat is the block layout of the tables flushes and recovery
// write (Options.FlushInTableFormat).
func (db *DB) flushFormat() sstable.Format {
	if db.opts.FlushInTableFormat {
		return db.opts.TableFormat
	}
	return sstable.FormatRow
}

// writeTables writes every entry of it and the range tombstones rangeDels
// (together at least one) into new tables, cutting before the first user
// key past a split key once the table holds minBytes
// (Options.FlushSplitBytes); splits ascend. Each table takes the
// tombstones of its key range (rangedel.Splitter).
func (db *DB) writeTables(it entrySource, rangeDels *rangedel.Set, splits [][]byte, minBytes uint64, job int, reason string) ([]*base.TableMeta, error) {
	kn := db.buildNegatives()
	rds := rangedel.NewSplitter(rangeDels)
	var last []byte // the last user key written to out
	var metas []*base.TableMeta
	var out *tableOutput
	fail := func(err error) ([]*base.TableMeta, error) {
		if out != nil {
			out.Abort()
		}
		for _, m := range metas {
			_ = db.fs.Remove(db.fs.PathJoin(db.dir, tableFileName(m.FileNum)))
		}
		return nil, err
	}
	newOutput := func() error {
		var err error
		out, err = db.newOutputNum(db.allocFileNum(), kn, db.flushFormat(), job, reason)
		return err
	}
	finish := func(frags []rangedel.Fragment) error {
		err := out.AddRangeDels(frags)
		var meta *base.TableMeta
		if err == nil {
			meta, err = out.Finish()
		}
		if err != nil {
			out.Abort()
		}
		out = nil
		if err == nil {
			metas = append(metas, meta)
		}
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		// Splits are passed as soon as a key exceeds them, so a key that
		// passes one starts a new user key (every earlier key is at or
		// below it): cutting there never parts the versions of a key.
		passed := false
		for len(splits) > 0 && bytes.Compare(k.UserKey, splits[0]) > 0 {
			splits, passed = splits[1:], true
		}
		if passed && out != nil && out.EstimatedSize() >= minBytes {
			if err := finish(rds.Cut(last)); err != nil {
				return fail(err)
			}
		}
		if out == nil {
			if err := newOutput(); err != nil {
				return fail(err)
			}
		}
		if err := out.Add(k, it.Value()); err != nil {
			return fail(err)
		}
		last = append(last[:0], k.UserKey...)
	}
	if err := it.Error(); err != nil {
		return fail(err)
	}
	frags := rds.Rest()
	if out == nil && len(frags) > 0 {
		if err := newOutput(); err != nil {
			return fail(err)
		}
	}
	if out == nil {
		return fail(fmt.Errorf("kv: no entries to write"))
	}
	if err := finish(frags); err != nil {
		return fail(err)
	}
	return metas, nil
}

// entrySource is what writeTables reads: entries in internal-key order.
// Every base.Iterator is one.
type entrySource interface {
	First() bool
	Next() bool
	Key() base.InternalKey
	Value() []byte
	Error() error
}

// rangeIter is the entries of it whose user keys are in [lo, hi) (nil:
// unbounded).
type rangeIter struct {
	it     base.Iterator
	lo, hi []byte
}

func (r *rangeIter) First() bool {
	if r.lo == nil {
		return r.in(r.it.First())
	}
	return r.in(r.it.SeekGE(r.lo))
}

func (r *rangeIter) Next() bool            { return r.in(r.it.Next()) }
func (r *rangeIter) Key() base.InternalKey { return r.it.Key() }
func (r *rangeIter) Value() []byte         { return r.it.Value() }
func (r *rangeIter) Error() error          { return r.it.Error() }

func (r *rangeIter) in(ok bool) bool {
	return ok && (r.hi == nil || bytes.Compare(r.it.Key().UserKey, r.hi) < 0)
}

// tableOutput is a compaction.Output backed by an sstable.Writer.
type tableOutput struct {
	db         *DB
	fileNum    uint64
	w          *sstable.Writer
	yields     bool // a compaction's output: it yields its P now and then
	sinceYield int  // key and value bytes added since the last yield
}

// newOutputNum creates table number fn for job (reason: "flushing",
// "compacting", "recovering"); kn are the known negatives a policy that
// builds around them gets (see buildNegatives).
func (db *DB) newOutputNum(fn uint64, kn knownneg.List, format sstable.Format, job int, reason string) (*tableOutput, error) {
	path := db.fs.PathJoin(db.dir, tableFileName(fn))
	if f := db.events.TableCreated; f != nil {
		f(TableCreateInfo{JobID: job, Reason: reason, FileNum: fn, Path: path})
	}
	w, err := sstable.Create(db.fs, path, sstable.WriterOptions{Policy: db.policy, KnownNegatives: kn, Format: format})
	if err != nil {
		return nil, err
	}
	return &tableOutput{db: db, fileNum: fn, w: w, yields: reason == "compacting"}, nil
}

func (o *tableOutput) Add(key base.InternalKey, value []byte) error {
	if o.yields {
		if o.sinceYield += len(key.UserKey) + len(value); o.sinceYield >= outputYieldBytes {
			o.sinceYield = 0
			runtime.Gosched()
		}
	}
	return o.w.Add(key, value)
}

// outputYieldBytes is how many key and value bytes a compaction's output
// takes between yields of its P (runtime.Gosched). A compaction runs on the
// CPU for tens of milliseconds, and Pebble's columnar writer hands every
// block to a goroutine of its own: the two take turns in the slot the
// scheduler runs next, on one time slice, and a goroutine readied on their
// P meanwhile (a writer the WAL syncer woke) waits until the runtime
// preempts them, 10 ms or more. Traced on two cores: 15 Sync writers
// queued 18-21 ms behind a compaction while the other P synced one write
// at a time. A yield every 32 KiB (tens of microseconds of work) lets them
// run first. Flushes do not yield: measured, their yields took the p99.9
// of two NoSync writers of 1 KiB values from 156 to 598 µs (kvbench
// -write), where a compaction's took it to 283 µs and the 4 KiB
// one-writer p99.9 from 1.14x Pebble's to 0.88x.
const outputYieldBytes = 32 << 10

func (o *tableOutput) EstimatedSize() uint64 { return o.w.EstimatedSize() }
func (o *tableOutput) Abort() error          { return o.w.Abort() }
func (o *tableOutput) AddRangeDels(frags []rangedel.Fragment) error {
	return o.w.AddRangeDels(frags)
}

func (o *tableOutput) Finish() (*base.TableMeta, error) {
	info, err := o.w.Close()
	if err != nil {
		return nil, err
	}
	o.db.preAdaptChecks.Add(uint64(info.PreAdapted.Checked))
	o.db.preAdaptations.Add(uint64(info.PreAdapted.Fixed))
	return &base.TableMeta{FileNum: o.fileNum, Size: info.Size, RemoteSize: info.RemoteSize,
		Smallest: info.Smallest, Largest: info.Largest, HasRangeDels: info.RangeDels > 0}, nil
}

package kv

import (
	"fmt"
	"time"
)

// The WAL switch, off the other writers' path. When a memtable fills, the
// commit leader gives the next memtable a new WAL. The old WAL must be
// fsynced (and the new one's directory entry), which takes milliseconds;
// done before the leader hands leadership on, it makes every queued writer
// wait that long, and with values of 1 KiB and more those waits are then
// the store's slowest 0.1% of writes (kvbench -write with two writers;
// docs/BENCHMARKS.md, "Writes against Pebble").
//
// So the leader seals the old WAL (its records handed over, nothing
// synced), writes a switch record as the new WAL's first record, naming
// the old WAL and where its records end (switchRecord), and commits its
// group into the new WAL; once it has handed leadership on, it finishes
// the switch (walSwitch.finish: the old WAL cut, fsynced and closed, the
// directory fsynced) while the next leader writes. The writer whose write
// filled the memtable pays for the switch, as before; the others do not.
//
// A crash of the process loses nothing: the old WAL's records are in the
// page cache, and recovery reads it up to where the switch record says it
// ends. A crash of the machine before the old WAL is durable may leave it
// torn while the new one kept records: recovery finds the old WAL shorter
// than its switch record says, keeps what it has and drops the WALs after
// it, whose writes came later and were all NoSync (see replayWAL). What
// must not run ahead of the switch waits for it: the fsync of a Sync write
// (durable only with every write before it), the next switch (one old WAL
// unsynced at a time), and Close.

// walSwitch is a switch whose second half (finish) may still run.
type walSwitch struct {
	old  *walWriter
	done chan struct{} // closed once err is set
	err  error
}

// rotateWAL gives the new memtable numbered num its WAL and leaves the rest
// of the switch in db.walToFinish, for the leader to finish once it has
// handed leadership on (commit). Only the commit leader calls it, once the
// WAL syncer has drained.
func (db *DB) rotateWAL(num uint64) error {
	if err := db.waitWALSwitchCounted(); err != nil {
		return err // the previous switch failed: the store takes no writes
	}
	old := db.wal
	reach := old.populateReach()
	w, err := db.newWAL(num, reach)
	if err != nil {
		return db.setBGErr(fmt.Errorf("kv: create WAL: %w", err))
	}
	if err := old.seal(); err != nil {
		_ = old.finish()
		_ = w.close()
		return db.setBGErr(fmt.Errorf("kv: close WAL: %w", err))
	}
	if err := w.add(switchRecord(old.num, old.size())); err != nil {
		_ = old.finish()
		_ = w.close()
		return db.setBGErr(fmt.Errorf("kv: WAL write: %w", err))
	}
	w.adoptBuffers(old)
	s := &walSwitch{old: old, done: make(chan struct{})}
	db.walSwitch.Store(s)
	db.walToFinish = s
	db.wal = w
	db.walNow.Store(w)
	db.walSwitches.Add(1)
	db.prepareWAL(reach)
	return nil
}

// finish is the switch's second half: the old WAL fsynced and closed, and
// the directory fsynced (the new WAL's entry).
func (s *walSwitch) finish(db *DB) {
	defer close(s.done)
	start := time.Now()
	defer func() { db.walSwitchSyncNanos.Add(int64(time.Since(start))) }()
	if db.switchFinishing != nil {
		db.switchFinishing()
	}
	if err := s.old.finish(); err != nil {
		s.err = db.setBGErr(fmt.Errorf("kv: close WAL: %w", err))
		return
	}
	if err := syncDir(db.fs, db.dir); err != nil {
		s.err = db.setBGErr(fmt.Errorf("kv: sync dir: %w", err))
	}
}

// waitWALSwitch waits for the last switch's second half, if it runs, and
// returns its error.
func (db *DB) waitWALSwitch() error {
	s := db.walSwitch.Load()
	if s == nil {
		return nil
	}
	<-s.done
	return s.err
}

// waitWALSwitchCounted is waitWALSwitch for a writer (the next switch, a
// Sync write's fsync): a wait for a second half still running is counted
// in Metrics.WALSwitchWaits and WALSwitchWaitTime.
func (db *DB) waitWALSwitchCounted() error {
	s := db.walSwitch.Load()
	if s == nil {
		return nil
	}
	select {
	case <-s.done:
	default:
		start := time.Now()
		<-s.done
		db.walSwitchWaits.Add(1)
		db.walSwitchWaitNs.Add(int64(time.Since(start)))
	}
	return s.err
}

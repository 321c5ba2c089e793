package kv

import (
	"fmt"
	"math"
	"runtime"
	"slices"
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
// the switch (walSwitch.finish: the directory fsynced, then the old WAL
// cut, fsynced and closed) while the next leader writes. The writer whose
// write filled the memtable pays for the switch; the others do not, and
// neither does the next switch: it does not wait for this one's second
// half (it did, and with two writers the other one then waited at ~80% of
// the switches, as long in all as the writers stalled for flushes). Each
// second half runs on the writer that made the switch, so no more of them
// run at once than there are writers.
//
// A crash of the process loses nothing: the old WALs' records are in the
// page cache, and recovery reads each up to where the next one's switch
// record says it ends. A crash of the machine before a switch finished may
// leave its old WAL torn, or (its directory entry not yet durable) gone,
// while later WALs kept records: recovery keeps what comes before the
// first torn or missing WAL and drops the WALs after it, whose writes came
// later and were all NoSync (see replayWALs). What must not run ahead of
// the switches waits for every one still finishing: Close (waitWALSwitches)
// and the fsync of a Sync write, which is durable only with every write
// before it (waitWALSwitchesForSync: for a switch whose old WAL was fsynced
// to its end already, that is its directory sync alone).

// walSwitch is a switch whose second half (finish) may still run.
//
// A Sync write in a later WAL needs every record before it durable, and
// the WALs' directory entries. When the old WAL was already fsynced to its
// end at the switch (its writers sync: the WAL syncer drained before the
// seal), only the new WAL's directory entry is missing, so finish syncs
// the directory first and says so (named); the Sync write's fsync waits
// for that and not for the old WAL's cut and fsync, which under Sync
// writers were the slowest part of a switch (waitWALSwitchesForSync).
type walSwitch struct {
	old *walWriter
	// oldDurable: the old WAL was fsynced to its end when sealed.
	oldDurable bool
	named      chan struct{} // closed once the directory is synced, or nameErr set
	nameErr    error
	done       chan struct{} // closed once err is set (after named)
	err        error
}

// rotateWAL gives the new memtable numbered num its WAL and leaves the rest
// of the switch in db.walToFinish, for the leader to finish once it has
// handed leadership on (commit). Only the commit leader calls it, once the
// WAL syncer has drained.
func (db *DB) rotateWAL(num uint64) error {
	if err := db.bgErrNow.Load(); err != nil {
		return *err // an earlier switch (or other background work) failed: no writes
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
	// The old WAL's buffers before the first record: adopt keeps its own
	// buffer once it holds bytes, and the switch record would leave the
	// new WAL to grow one from nothing.
	w.adoptBuffers(old)
	if err := w.add(switchRecord(old.num, old.size())); err != nil {
		_ = old.finish()
		_ = w.close()
		return db.setBGErr(fmt.Errorf("kv: WAL write: %w", err))
	}
	s := &walSwitch{old: old, oldDurable: old.synced.Load() >= old.size(), named: make(chan struct{}), done: make(chan struct{})}
	db.walPending.mu.Lock()
	// Copied on write: a waiter reads the slice it took without the lock.
	db.walPending.list = append(slices.Clip(db.walPending.list), s)
	db.walPending.mu.Unlock()
	db.walToFinish = s
	db.wal = w
	db.walNow.Store(w)
	db.walSwitches.Add(1)
	db.prepareWAL(reach)
	return nil
}

// finish is the switch's second half: the old WAL fsynced and closed, and
// the directory fsynced (the new WAL's entry). Done, it leaves the pending
// switches; failed, it stays there, so that every later wait returns its
// error (the store takes no more writes: setBGErr).
func (s *walSwitch) finish(db *DB) {
	start := time.Now()
	defer func() { db.walSwitchSyncNanos.Add(int64(time.Since(start))) }()
	if db.switchFinishing != nil {
		db.switchFinishing()
	}
	// The rotation started the next WAL's preparation (prepareWAL) on a
	// goroutine that waits in this P's run queue, and the fsync below holds
	// the P until the runtime retakes it from the system call, which on a
	// busy machine takes up to milliseconds. Yield first, so that the
	// preparation starts now and is populated by the next rotation rather
	// than make it wait (Metrics.WALPrepareWaits).
	runtime.Gosched()
	// The new WAL's directory entry first: a Sync write after an old WAL
	// that was durable already waits for nothing else (named).
	if err := syncDir(db.fs, db.dir); err != nil {
		s.nameErr = db.setBGErr(fmt.Errorf("kv: sync dir: %w", err))
	}
	close(s.named)
	if db.switchNamed != nil {
		db.switchNamed()
	}
	s.err = s.nameErr
	if err := s.old.finish(); err != nil && s.err == nil {
		s.err = db.setBGErr(fmt.Errorf("kv: close WAL: %w", err))
	}
	if s.err == nil {
		db.walPending.mu.Lock()
		db.walPending.list = slices.DeleteFunc(slices.Clone(db.walPending.list), func(p *walSwitch) bool { return p == s })
		db.walPending.mu.Unlock()
	}
	close(s.done)
}

// waitWALSwitches waits for the second halves of the switches still
// finishing and returns the first error among them.
func (db *DB) waitWALSwitches() error {
	return db.waitWALSwitchesBefore(math.MaxUint64)
}

// waitWALSwitchesBefore waits, as waitWALSwitches does, for the switches
// away from WALs numbered below log only. A flush that installs log as the
// oldest WAL the store needs waits for those: the last of them made log's
// directory entry durable, and the others' WALs are the ones it deletes. A
// switch begun since (away from log or a later WAL) is none of its
// business: waiting for that switch's fsync would hold the install, and
// with it the writers a stall holds until the install frees a memtable.
func (db *DB) waitWALSwitchesBefore(log uint64) error {
	return db.waitSwitches(log, false)
}

// waitWALSwitchesForSync waits for what the fsync of a Sync write needs of
// the switches still finishing: every old WAL durable, and every new WAL's
// directory entry. For a switch whose old WAL was durable when sealed that
// is its directory sync alone (see walSwitch). A wait for one still
// running is counted in Metrics.WALSwitchWaits and WALSwitchWaitTime.
func (db *DB) waitWALSwitchesForSync() error {
	return db.waitSwitches(math.MaxUint64, true)
}

// waitSwitches waits for the pending switches away from WALs numbered
// below log and returns the first error among them. For a Sync write's
// fsync (forSync) it waits for the directory sync alone of a switch whose
// old WAL was durable when sealed, and counts its wait.
func (db *DB) waitSwitches(log uint64, forSync bool) error {
	db.walPending.mu.Lock()
	pending := db.walPending.list
	db.walPending.mu.Unlock()
	var start time.Time
	for _, s := range pending {
		if s.old.num >= log {
			continue
		}
		ch, err := s.done, &s.err
		if forSync && s.oldDurable {
			ch, err = s.named, &s.nameErr
		}
		select {
		case <-ch:
		default:
			if forSync && start.IsZero() {
				start = time.Now()
			}
			<-ch
		}
		if *err != nil {
			return *err
		}
	}
	if !start.IsZero() {
		db.walSwitchWaits.Add(1)
		db.walSwitchWaitNs.Add(int64(time.Since(start)))
	}
	return nil
}

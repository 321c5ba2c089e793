package kv

// Obsolete files (tables no version holds, their adaptive state files, the
// WAL of a flushed memtable) are removed on a goroutine of their own,
// deleteLoop, as Pebble's cleanup manager does: an unlink frees the file's
// blocks, which on this project's VM (ext4 mounted with discard) took 1.3
// ms a file and up to 13 ms, and whoever dropped the last reference paid
// it: a compaction before it freed its slot (five to thirteen tables an L0
// compaction), a flush before the next one could start, a Get whose read
// state outlived a version. docs/ARCHITECTURE.md, "Concurrency in the
// store".

// queueDeletion hands paths to deleteLoop. After Close released the
// directory it drops them: the next Open deletes what no manifest lists.
func (db *DB) queueDeletion(paths ...string) {
	db.deletion.mu.Lock()
	defer db.deletion.mu.Unlock()
	if db.deletion.released {
		return
	}
	db.deletion.queue = append(db.deletion.queue, paths...)
	db.deletion.queued += uint64(len(paths))
	db.deletion.cond.Broadcast()
}

// deleteLoop removes queued files until Close released the directory and
// the queue is empty, then closes deletion.done.
func (db *DB) deleteLoop() {
	defer close(db.deletion.done)
	db.deletion.mu.Lock()
	defer db.deletion.mu.Unlock()
	for {
		for len(db.deletion.queue) == 0 && !db.deletion.released {
			db.deletion.cond.Wait()
		}
		if len(db.deletion.queue) == 0 {
			return
		}
		batch := db.deletion.queue
		db.deletion.queue = nil
		db.deletion.mu.Unlock()
		for _, p := range batch {
			err := db.fs.Remove(p)
			if f := db.events.TableDeleted; f != nil {
				if typ, num := parseFileName(db.fs.PathBase(p)); typ == fileTypeTable {
					f(TableDeleteInfo{FileNum: num, Path: p, Err: err})
				}
			}
		}
		db.deletion.mu.Lock()
		db.deletion.removed += uint64(len(batch))
		db.deletion.cond.Broadcast()
	}
}

// waitDeletions waits until every file queued before the call is removed
// (a manual Compact returns with the space of what it replaced freed).
func (db *DB) waitDeletions() {
	db.deletion.mu.Lock()
	defer db.deletion.mu.Unlock()
	for target := db.deletion.queued; db.deletion.removed < target; {
		db.deletion.cond.Wait()
	}
}

// stopDeletions releases the directory: deleteLoop removes what is queued
// and stops, and later deletions are dropped.
func (db *DB) stopDeletions() {
	db.deletion.mu.Lock()
	db.deletion.released = true
	db.deletion.cond.Broadcast()
	db.deletion.mu.Unlock()
	<-db.deletion.done
}

// Package kv is adaptkv's public store: an embedded, ordered key-value store
// (an LSM tree on Pebble's sstable format) whose per-table filters adapt to
// their false positives. The API follows Pebble: Open, Get, Set, Delete,
// DeleteRange, batches, iterators, snapshots, checkpoints, Flush, Compact,
// Metrics, Close.
//
// # Design
//
// Writes go through group commit: the first writer to arrive becomes the
// leader, assigns sequence numbers to every queued batch (one per entry),
// appends one WAL record per batch (pebble/record framing, checksummed)
// to a buffer that reaches the OS in one write per group, inserts the
// entries into the memtable (a skiplist with lock-free reads,
// kv/internal/memtable) and then publishes the new sequence number, so
// readers see a batch entirely or not at all. A group with a Sync write
// goes instead to the WAL syncer, a goroutine that fsyncs once for all the
// groups queued since its last fsync (fdatasync of a preallocated file, as
// Pebble), publishes them in order and wakes their writers, while the next
// leader writes its group: no reader sees a Sync write before it is
// durable, nor a later write before it. A memtable that reaches
// Options.MemTableSize is switched for a new one with a new WAL (the
// writer whose write filled it fsyncs the old WAL after it has handed
// leadership on, so the other writers do not wait for that fsync) and
// flushed to L0 tables in the background (while L0 is deep, together with
// the next one: Options.MergeFlushL0Depth); writers
// stall only while Options.MaxImmutableMemTables memtables wait (flushes
// themselves wait while a key is in Options.L0StopWritesThreshold L0
// tables).
//
// The set of tables per level is a version; each change (flush, compaction)
// is an edit appended to the MANIFEST with the same record framing and
// fsynced before the version is installed; CURRENT names the manifest and is
// switched atomically (temp file, fsync, rename, directory fsync). Versions
// are reference counted: Gets, iterators and compactions pin the version
// they read, and a table (with its adaptive state file, NNNNNN.fstate) is
// deleted only when no live version lists it. After each flush a background
// goroutine runs compaction.Pick (up to MaxConcurrentCompactions at once) and
// compaction.Run, passing the live snapshots and dropping tombstones when
// the output level is the bottommost for the range.
//
// A point read checks the memtables, then the L0 tables newest first, then
// one table per level; in each table sstable.Reader.GetInternal queries the
// in-memory filter, probes the table on "maybe", and on a false positive
// adapts the filter; the first version found (value or tombstone) ends the
// read, and reads as deleted if a range tombstone passed on the way (each
// table's are in memory, consulted whatever the filter says) covers it. Tables are opened through a table cache bounded by MaxOpenFiles that
// shares one Pebble block cache (new tables are opened when written, and
// existing ones by a background pass after Open); a table's adaptive filter
// state is saved when the cache closes it and on Close (a ReadOnly store
// loads it but never saves it). Iterators merge the memtables and
// tables (merging.NewIter) and see an implicit snapshot.
//
// # Filter policy
//
// Options.FilterPolicy names a policy of the filterpolicy registry; the
// default is "aprefix" (the adaptive prefix filter). Options.Filter, when
// set, overrides it.
//
// An adaptive filter's fix of a false positive reads the table's remote
// section, which pays only if the key comes back: a ski-rental rule
// (Options.FixRule). The default, FixCached, rents first: a key's first
// false positive in a table puts the key in the table's small cache of
// false positives (no fix), and while the cache holds it the key costs no
// probe there. Without DirectReads the key's return buys the fix (the
// filter is fixed and the entry freed), so a key asked once costs one
// wasted probe per table and no remote read, and a key that returns costs
// at most two wasted probes per table while the record of known negatives
// holds it (one if it returns while cached); FixEvery's worst case is one.
// With DirectReads a fix is a device read, so the cache keeps answering
// for a returning key (which takes the key a slot in the record of known
// negatives), and only its return after the cache let it go is fixed, and
// only if the record holds the key: a key asked once never costs a fix,
// and a key that returns only after the cache let it go costs at most
// three wasted probes per table while the record holds it.
//
// # Durability
//
// A write with Sync (the default for nil WriteOptions) is in an fsynced WAL
// before it returns. A NoSync write has reached the operating system before
// it returns (its WAL record is in the OS page cache: copied into the WAL's
// shared memory mapping on Linux, see Options.DisableWALMapping, or written
// with write(2) elsewhere): it survives a crash of the process but not of
// the machine. With Options.WALBufferNoSync a NoSync
// write returns once its record is in the WAL buffer, which a background
// goroutine writes to the OS right behind it (Pebble's NoSync: the last
// such writes may be lost with the process). Close fsyncs the WAL. An I/O error while
// writing the WAL, the manifest or a flushed table is sticky: later writes
// and flushes return it (reads keep working) until the store is reopened,
// because the state on disk is then uncertain; a failed compaction leaves
// the store unchanged and is retried after the next flush.
//
// # Corruption policy
//
// Recovery replays the WALs newer than the manifest's log number. Every WAL
// record begins with the file offset known to be fsynced when it was
// written. A mapped WAL's unwritten tail is zeros, which end the log. A bad
// record (checksum mismatch, cut short) in the newest WAL (the newest with
// data: an empty or all-zero later WAL, left by a crash right after a
// memtable switch, does not count) is a torn tail when no later valid
// record says the file had been fsynced past it: recovery keeps every record
// before it and drops the rest (the recovered data is flushed to a table,
// a new manifest written, and only then a new WAL created and the old one
// deleted, so a failed or interrupted recovery can be retried). Every WAL
// a memtable switch creates begins with a switch record naming the WAL
// before it and the offset where that one's records end: the old WAL is
// fsynced while writes already go to the new one, so it may end in zeros
// (a mapped WAL whose process died before the switch cut it), which is its
// end, or a machine crash may have torn it before that offset, which is
// tolerated like a torn tail when no later record says it was fsynced past
// the tear: recovery keeps its records before the tear and drops the WALs
// after it, whose writes were all NoSync (a Sync write waits until every
// WAL before it is durable, its directory entry too). A switch does not wait for the one before it to finish, so a
// machine crash may also lose a WAL's directory entry while a later WAL
// stays: a WAL whose switch record names a missing WAL ends the replay the
// same way, unless a later WAL says it was fsynced (then it is
// ErrCorruption).
// A bad last manifest record is a torn write only when nothing acted on it:
// the state before it must still be on disk (the WAL it names, its tables),
// since a durable edit deletes the WAL or tables it replaces; otherwise it
// is an acknowledged edit lost, reported as ErrCorruption. So is a manifest
// cut at a record boundary: the WAL it names is gone while a newer WAL is
// there, which only a durable, now missing, edit leaves.
// Any other bad record, a bad record in an older WAL (those are fsynced whole
// before a Sync write in a later WAL; without a switch record after them,
// before the next one started), a malformed batch, a bad manifest record
// followed by valid ones, a missing table or a table that fails its
// checksums is reported as an error wrapping ErrCorruption, never silently
// dropped. (A flipped bit in the very last synced records of a WAL cannot be
// told apart from a torn write and is treated as one.)
package kv

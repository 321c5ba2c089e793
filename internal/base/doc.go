// Package base holds what every layer of the store shares and nothing else:
// the internal key (user key, sequence number, kind) and its order, the
// iterator contract that tables, memtables and merging iterators implement,
// the description of a table that compaction and the manifest exchange, and
// the module's one corruption error.
//
// It sits below every other package of the module (the filter packages
// import it only for ErrCorruption), so the memtable, the table layer and
// compaction can speak the same types without importing each other. The
// public packages re-export what their APIs use (sstable.InternalKey,
// compaction.TableMeta, kv.ErrCorruption are these very types and values).
// See docs/ARCHITECTURE.md, "Packages".
package base

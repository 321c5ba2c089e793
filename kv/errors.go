package kv

import (
	"errors"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/kv/internal/memtable"

	"github.com/adaptkv/adaptkv/filterpolicy"
)

// Sentinel errors. Every error the store returns for one of these conditions
// wraps the sentinel, so callers test with errors.Is.
var (
	// ErrNotFound is returned by Get for a key that has no live value.
	ErrNotFound = errors.New("kv: not found")
	// ErrEmptyKey is returned for a zero-length key.
	ErrEmptyKey = errors.New("kv: empty key")
	// ErrKeyTooLarge is returned for a key longer than MaxKeySize.
	ErrKeyTooLarge = errors.New("kv: key too large")
	// ErrInvalidRange is returned by DeleteRange for a range whose start is
	// not below its end.
	ErrInvalidRange = errors.New("kv: invalid range")
	// ErrValueTooLarge is returned for a value longer than MaxValueSize.
	ErrValueTooLarge = errors.New("kv: value too large")
	// ErrBatchTooLarge is returned by Apply for a batch over MaxBatchSize.
	ErrBatchTooLarge = errors.New("kv: batch too large")
	// ErrClosed is returned by every method of a closed DB, Snapshot or
	// Iterator. It is the module's one closed error: sstable.ErrClosed is
	// this value.
	ErrClosed = base.ErrClosed
	// ErrLocked is returned by Open when another process (or another open DB
	// in this process) holds the directory's lock.
	ErrLocked = errors.New("kv: directory locked by another process")
	// ErrReadOnly is returned for writes, Flush and Compact on a DB opened
	// with Options.ReadOnly.
	ErrReadOnly = errors.New("kv: read-only")
	// ErrCorruption is returned when a WAL, manifest or table holds bytes
	// that fail their checksum or cannot be decoded (other than a torn WAL
	// tail, which recovery truncates; see the package doc). It is the
	// module's one corruption error: what any package of the module reports
	// as damage (sstable.ErrCorrupt, quotient.ErrCorrupt, ...) matches it.
	ErrCorruption = base.ErrCorruption
	// ErrInvalidOptions is returned by Open for out-of-range options, and by
	// Compact for a range whose start is after its end. It is the module's
	// one invalid-options error: every package's ErrInvalidOptions is this
	// value, so an option a lower layer rejects matches it too.
	ErrInvalidOptions = base.ErrInvalidOptions
	// ErrUnknownPolicy is filterpolicy.ErrUnknownPolicy, re-exported: Open
	// returns it for an Options.FilterPolicy name not in the registry.
	ErrUnknownPolicy = filterpolicy.ErrUnknownPolicy
)

const (
	// MaxKeySize is the largest key accepted, in bytes (64 KiB).
	MaxKeySize = 64 << 10
	// MaxValueSize is the largest value accepted, in bytes (16 MiB).
	MaxValueSize = 16 << 20
	// MaxBatchSize bounds the memtable memory one batch may need, in bytes
	// (2 GiB): its keys and values and BatchEntryOverhead bytes an entry.
	// Apply returns ErrBatchTooLarge for a larger batch. (Pebble's bound
	// is 4 GiB of batch; its memtable arena has the same 32-bit reach as
	// the store's.)
	MaxBatchSize = 2 << 30
	// BatchEntryOverhead is the most memtable bytes an entry takes besides
	// its key and value, counted against MaxBatchSize (its node in the
	// memtable's arena at the tallest).
	BatchEntryOverhead = 115
	// MaxMemTableSize is the largest Options.MemTableSize (2 GiB): a
	// memtable holds at most one commit group (at most MaxBatchSize) past
	// it, and its arena is sure to hold 4 GiB.
	MaxMemTableSize = 2 << 30
)

// The bounds above fit the memtable (checked when compiling: an array
// length must not be negative).
var (
	_ [memtable.Capacity - MaxMemTableSize - MaxBatchSize]struct{}
	_ [BatchEntryOverhead - memtable.MaxEntryOverhead]struct{}
)

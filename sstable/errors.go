package sstable

import (
	"errors"

	"github.com/adaptkv/adaptkv/internal/base"
)

// Sentinel errors of the package; test with errors.Is.
var (
	// ErrClosed is returned by every method of a closed Writer or Reader
	// (the module's one closed error, kv.ErrClosed).
	ErrClosed = base.ErrClosed
	// ErrInvalidOptions is wrapped for bad arguments to Create and Open
	// (the module's one invalid-options error, kv.ErrInvalidOptions).
	ErrInvalidOptions = base.ErrInvalidOptions
	// ErrOutOfOrder is wrapped when Writer.Add gets a key that does not
	// follow the previous one in internal-key order.
	ErrOutOfOrder = errors.New("sstable: keys out of order")
	// ErrInvalidKey is wrapped for a key Writer.Add cannot store (sequence
	// number >= 2^56, unknown kind).
	ErrInvalidKey = errors.New("sstable: invalid key")
	// ErrCorrupt is wrapped when a table file cannot be read. It also
	// matches the module's one corruption error (kv.ErrCorruption).
	ErrCorrupt = base.CorruptionKind("sstable: corrupt table")
	// ErrStateCorrupt is wrapped by StateError when the adaptive state file
	// was unreadable, corrupt or belonged to another table.
	ErrStateCorrupt = errors.New("sstable: adaptive state file rejected")
	// ErrNoState is wrapped by StateError when there was no state file to load.
	ErrNoState = errors.New("sstable: no adaptive state file")
	// ErrReadOnlyState is wrapped by SaveState of a Reader opened with
	// ReaderOptions.StateReadOnly: its state file is never written.
	ErrReadOnlyState = errors.New("sstable: adaptive state is read-only")
)

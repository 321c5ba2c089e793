package compaction

import (
	"errors"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/manifest"
)

// NumLevels is the number of levels of the LSM tree: L0 (flushed memtables,
// tables may overlap) and L1..L6 (each sorted and non-overlapping); the
// manifest's (manifest.NumLevels).
const NumLevels = manifest.NumLevels

// TableMeta describes one table for picking and is what Run returns for each
// table it writes (base.TableMeta: the manifest shares it).
type TableMeta = base.TableMeta

// Errors returned by the package. Test for them with errors.Is.
var (
	// ErrInvalidOptions reports an unusable option value (wrapped with
	// detail); the module's one invalid-options error, kv.ErrInvalidOptions.
	ErrInvalidOptions = base.ErrInvalidOptions
	// ErrInvalidLevel reports a level outside [0, NumLevels).
	ErrInvalidLevel = errors.New("compaction: invalid level")
	// ErrBusy reports that a manual range cannot be compacted now because one
	// of the tables it needs is in a running compaction.
	ErrBusy = errors.New("compaction: tables busy in a running compaction")
	// ErrOutOfOrder reports an input iterator that yielded internal keys out
	// of internal-key order (or the same internal key twice).
	ErrOutOfOrder = errors.New("compaction: input keys out of order")
	// ErrUnsupportedKind reports an internal key kind other than
	// base.KeyKindSet and base.KeyKindDelete.
	ErrUnsupportedKind = errors.New("compaction: unsupported key kind")
	// ErrCanceled reports a Run stopped through RunOptions.Cancel.
	ErrCanceled = errors.New("compaction: canceled")
)

package base

import (
	"errors"
	"fmt"
)

// The module's shared sentinels besides ErrCorruption. Each package that
// reports these conditions exports the same value under the same name
// (kv.ErrInvalidOptions, sstable.ErrClosed, ...), so one errors.Is answers
// whichever layer rejected the options or found the object closed.
var (
	// ErrInvalidOptions is wrapped, with the option and the reason, by
	// every error about an unusable option value or argument.
	ErrInvalidOptions = errors.New("adaptkv: invalid options")
	// ErrClosed is wrapped by every error about the use of a closed object
	// (a DB, snapshot, iterator, table reader or writer).
	ErrClosed = errors.New("adaptkv: closed")
)

// InvalidOptions returns err as an invalid-options error with context (an
// option's name, say) before its message: err itself wrapped once if it
// already matches ErrInvalidOptions (a lower layer rejected the value), or
// wrapped with ErrInvalidOptions if it does not. An empty context adds
// nothing but the sentinel.
func InvalidOptions(context string, err error) error {
	switch {
	case errors.Is(err, ErrInvalidOptions) && context == "":
		return err
	case errors.Is(err, ErrInvalidOptions):
		return fmt.Errorf("%s: %w", context, err)
	case context == "":
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalidOptions, context, err)
}

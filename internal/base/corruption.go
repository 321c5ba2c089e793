package base

import "errors"

// ErrCorruption is the module's one corruption error: every error that
// reports bytes failing their checksum or their decoding (a table, a filter
// block or encoding, a remote section, an adaptive state file, the WAL, the
// manifest, the known-negatives file) matches it with errors.Is, whichever
// package found the damage. kv.ErrCorruption and sstable.ErrCorruption are
// this value.
var ErrCorruption = errors.New("adaptkv: corruption")

// CorruptionKind returns a sentinel for one kind of damage, with its own
// message, that also matches ErrCorruption under errors.Is. Packages export
// such sentinels (quotient.ErrCorrupt, sstable.ErrCorrupt, ...) so a caller
// may ask either "is this corruption?" or "is this a corrupt filter
// encoding?"; errors that wrap the sentinel answer both.
func CorruptionKind(msg string) error { return &corruptionKind{msg: msg} }

type corruptionKind struct{ msg string }

func (e *corruptionKind) Error() string { return e.msg }

// Is reports whether target is ErrCorruption; identity with the sentinel
// itself is handled by errors.Is.
func (e *corruptionKind) Is(target error) bool { return target == ErrCorruption }

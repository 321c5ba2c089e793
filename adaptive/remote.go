package adaptive

import "github.com/adaptkv/adaptkv/filterpolicy/filter"

// ErrRemote is wrapped by every error that comes from reading the remote
// representation: an unreadable, truncated or inconsistent entry. Adapt
// returns it and leaves the filter unchanged. It is filter.ErrRemote.
var ErrRemote = filter.ErrRemote

// Remote is the remote representation of an adaptive filter: for every slot of
// the filter, the 64-bit hash tail of the element stored in that slot (the
// hash bits after the quotient, from which every remainder, selector chunk and
// extension is derived), in slot order. Empty slots hold an unspecified value.
// It is the contract of package filter (filter.Remote).
//
// A filter reads it only when it fixes a false positive or rebuilds a block,
// so it may live on disk next to the table the filter guards. Implementations
// must be safe for concurrent use; the filter serializes its own adaptations.
type Remote = filter.Remote

// MemRemote is an in-memory Remote: element i is the hash tail of slot i.
// Standalone filters and tests use it; the store keeps its remote on disk.
type MemRemote = filter.MemRemote

package adaptive

import "errors"

// ErrRemote is wrapped by every error that comes from reading the remote
// representation: an unreadable, truncated or inconsistent entry. Adapt
// returns it and leaves the filter unchanged.
var ErrRemote = errors.New("adaptive: remote representation unreadable or inconsistent")

// Remote is the remote representation of an adaptive filter: for every slot of
// the filter, the 64-bit hash tail of the element stored in that slot (the
// hash bits after the quotient, from which every remainder, selector chunk and
// extension is derived), in slot order. Empty slots hold an unspecified value.
//
// A filter reads it only when it fixes a false positive or rebuilds a block,
// so it may live on disk next to the table the filter guards. Implementations
// must be safe for concurrent use; the filter serializes its own adaptations.
type Remote interface {
	// ReadSlots fills dst with the hash tails stored in slots
	// [first, first+len(dst)). Errors wrap ErrRemote.
	ReadSlots(first int, dst []uint64) error
}

// MemRemote is an in-memory Remote: element i is the hash tail of slot i.
// Standalone filters and tests use it; the store keeps its remote on disk.
type MemRemote []uint64

// ReadSlots implements Remote.
func (m MemRemote) ReadSlots(first int, dst []uint64) error {
	if first < 0 || first > len(m) || len(dst) > len(m)-first {
		return errors.Join(ErrRemote, errors.New("slot range out of bounds"))
	}
	copy(dst, m[first:])
	return nil
}

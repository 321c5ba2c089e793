package sstable

import "github.com/adaptkv/adaptkv/internal/base"

// The table layer's key and iterator types are the module's shared ones
// (internal/base), named here so users of this package can spell them.
type (
	// KeyKind is the kind of an internal key (base.KeyKind).
	KeyKind = base.KeyKind
	// InternalKey is a user key with its sequence number and kind
	// (base.InternalKey); see CompareInternalKeys for the order.
	InternalKey = base.InternalKey
	// Iterator walks internal keys in internal-key order (base.Iterator).
	Iterator = base.Iterator
)

const (
	// KeyKindDelete is a point tombstone.
	KeyKindDelete = base.KeyKindDelete
	// KeyKindSet is a key with a value.
	KeyKindSet = base.KeyKindSet
)

// CompareInternalKeys orders internal keys: user key ascending, then
// sequence number descending, then kind descending (base.CompareInternalKeys).
func CompareInternalKeys(a, b InternalKey) int { return base.CompareInternalKeys(a, b) }

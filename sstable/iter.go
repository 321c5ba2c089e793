package sstable

import "github.com/adaptkv/adaptkv/internal/base"

// The table layer's key and iterator types are the module's shared ones
// (internal/base), named here so users of this package can spell them.
type (
	// Kind is the kind of an internal key (base.Kind).
	Kind = base.Kind
	// InternalKey is a user key with its sequence number and kind
	// (base.InternalKey); see CompareInternalKeys for the order.
	InternalKey = base.InternalKey
	// Iterator walks internal keys in internal-key order (base.Iterator).
	Iterator = base.Iterator
)

const (
	// KindDelete is a point tombstone.
	KindDelete = base.KindDelete
	// KindSet is a key with a value.
	KindSet = base.KindSet
)

// CompareInternalKeys orders internal keys: user key ascending, then
// sequence number descending, then kind descending (base.CompareInternalKeys).
func CompareInternalKeys(a, b InternalKey) int { return base.CompareInternalKeys(a, b) }

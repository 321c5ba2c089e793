package ycsb

import "strconv"

const (
	fnvOffset64 = 0xCBF29CE484222325
	fnvPrime64  = 1099511628211
)

// FNVHash64 is YCSB's Utils.fnvhash64: FNV-1a over the 8 little-endian
// bytes of v, returned as a non-negative int64 (Java's Math.abs).
func FNVHash64(v uint64) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= fnvPrime64
		v >>= 8
	}
	s := int64(h)
	if s < 0 {
		s = -s // Math.abs; MinInt64 stays negative in Java too, keep its bits
	}
	return uint64(s)
}

// AppendKey appends the YCSB key of record number n ("user" followed by the
// decimal FNV-64 hash of n, as CoreWorkload.buildKeyName does with hashed
// inserts) to dst.
func AppendKey(dst []byte, n uint64) []byte {
	dst = append(dst, "user"...)
	return strconv.AppendUint(dst, FNVHash64(n), 10)
}

// Key returns the YCSB key of record number n.
func Key(n uint64) []byte { return AppendKey(nil, n) }

// AbsentSep separates a stored key from the salt that makes it an absent key.
// It sorts before every digit, so an absent key derived from stored key k
// sorts right after k and before every other stored key: it falls inside the
// key range of the table holding k, and only the table's filter can say it is
// absent.
const AbsentSep = '!'

// AppendAbsentKey appends absent key number n of the universe named by salt:
// Key(n) + "!" + salt. No stored key contains '!', so the key is never
// present; distinct salts give disjoint universes (each workload uses its own
// salt, so adaptations made by one workload do not help the next).
func AppendAbsentKey(dst []byte, n uint64, salt string) []byte {
	dst = AppendKey(dst, n)
	dst = append(dst, AbsentSep)
	return append(dst, salt...)
}

// AbsentKey returns absent key number n of the universe named by salt.
func AbsentKey(n uint64, salt string) []byte { return AppendAbsentKey(nil, n, salt) }

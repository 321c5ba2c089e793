package filter

import "unsafe"

// CacheLine is the size of a CPU cache line on the machines adaptkv is
// built for (x86-64, and most arm64 cores).
const CacheLine = 64

// AlignedBytes returns a zeroed slice of n bytes (capacity n) whose byte
// at starts a cache line. A filter whose probing units are laid out from
// there in cache-line multiples (a Prefix Filter's 32-byte bins, a blocked
// Bloom filter's 64-byte lines) then reads one line per unit; at any other
// offset some units straddle two lines, and a query that misses the cache
// waits for both. The Go heap does not move objects, so the alignment holds
// for the slice's life.
func AlignedBytes(n, at int) []byte {
	buf := make([]byte, n+CacheLine-1)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(buf))) + uintptr(at)
	off := int((CacheLine - start%CacheLine) % CacheLine)
	return buf[off : off+n : off+n]
}

// IsAligned reports whether b[at] (at <= cap(b)) starts a cache line.
func IsAligned(b []byte, at int) bool {
	return (uintptr(unsafe.Pointer(unsafe.SliceData(b)))+uintptr(at))%CacheLine == 0
}

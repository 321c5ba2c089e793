// Package stripe picks a stripe of a striped counter for the calling
// goroutine. Counters that many goroutines update at once are split over
// cache lines (the sstable reader's lookup counters, the store's reference
// counts); each update goes to the caller's stripe, so goroutines on
// different cores rarely write the same line.
//
// Go offers no cheap "current CPU" or goroutine id, so the hint is the
// address of a local variable: goroutine stacks are disjoint (2 KiB at
// least), so the address, hashed, is stable for one goroutine calling from
// one place and differs between goroutines. A collision only costs speed.
package stripe

import "unsafe"

// Hint returns the calling goroutine's stripe hint: 32 well-mixed bits; a
// counter of 2^k stripes uses the low k bits.
func Hint() uint64 {
	var marker byte
	return uint64(uintptr(unsafe.Pointer(&marker))>>11) * 0x9E3779B97F4A7C15 >> 32
}

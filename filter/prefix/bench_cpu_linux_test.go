//go:build linux

package prefix

import (
	"syscall"
	"unsafe"
)

// threadCPUNanos returns the CPU time consumed by the calling OS thread
// (CLOCK_THREAD_CPUTIME_ID), or -1 if it is unavailable. On a shared machine
// it excludes the time other processes hold the core, which wall-clock
// ns/op includes.
func threadCPUNanos() int64 {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return -1
	}
	return ts.Nano()
}

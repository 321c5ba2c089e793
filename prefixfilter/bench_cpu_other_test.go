//go:build !linux

package prefixfilter

// threadCPUNanos is unavailable off Linux.
func threadCPUNanos() int64 { return -1 }

//go:build !linux

package prefix

// threadCPUNanos is unavailable off Linux.
func threadCPUNanos() int64 { return -1 }

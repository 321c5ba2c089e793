//go:build race

package kv

// raceEnabled: the race detector's instrumentation allocates, so
// allocation counts are checked only without it.
const raceEnabled = true

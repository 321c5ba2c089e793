//go:build !race

package kv

// raceEnabled: see race_test.go.
const raceEnabled = false

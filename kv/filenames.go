package kv

// The names of the files in a store directory, and how a listing is read
// back into file kinds and numbers (recovery, cleanup, damage checks).

import (
	"fmt"
	"strings"
)

// tableFileName and its siblings name the files of number num.
func tableFileName(num uint64) string    { return fmt.Sprintf("%06d.sst", num) }
func stateFileName(num uint64) string    { return fmt.Sprintf("%06d.fstate", num) }
func walFileName(num uint64) string      { return fmt.Sprintf("%06d.log", num) }
func manifestFileName(num uint64) string { return fmt.Sprintf("MANIFEST-%06d", num) }

const (
	currentFileName = "CURRENT"
	lockFileName    = "LOCK"
	optionsFileName = "OPTIONS" // Options.String of the last read-write Open
)

type fileType int

const (
	fileTypeUnknown fileType = iota
	fileTypeTable
	fileTypeState
	fileTypeWAL
	fileTypeManifest
	fileTypeTemp
)

// parseFileName recognizes the store's file names.
func parseFileName(name string) (fileType, uint64) {
	var num uint64
	if strings.HasPrefix(name, "MANIFEST-") {
		if _, err := fmt.Sscanf(name, "MANIFEST-%d", &num); err == nil && name == manifestFileName(num) {
			return fileTypeManifest, num
		}
		return fileTypeUnknown, 0
	}
	if strings.HasSuffix(name, ".tmp") {
		return fileTypeTemp, 0
	}
	i := strings.IndexByte(name, '.')
	if i <= 0 {
		return fileTypeUnknown, 0
	}
	if _, err := fmt.Sscanf(name[:i], "%d", &num); err != nil {
		return fileTypeUnknown, 0
	}
	switch name[i:] {
	case ".sst":
		return fileTypeTable, num
	case ".fstate":
		return fileTypeState, num
	case ".log":
		return fileTypeWAL, num
	}
	return fileTypeUnknown, 0
}

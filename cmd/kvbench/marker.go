package main

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// marker describes a kept data set (-dir) so that a later run reuses it only
// when it was loaded the same way.
type marker struct {
	Records    uint64      `json:"records"`
	ValueSize  int         `json:"value_size"`
	Seed       uint64      `json:"seed"`
	Config     StoreConfig `json:"config"`
	Incomplete bool        `json:"incomplete"`
}

const markerFile = "kvbench-dataset.json"

func readMarker(dir string) (marker, bool) {
	var m marker
	b, err := os.ReadFile(filepath.Join(dir, markerFile))
	if err != nil || json.Unmarshal(b, &m) != nil {
		return m, false
	}
	return m, true
}

func writeMarker(dir string, m marker) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, markerFile), b, 0o644)
}

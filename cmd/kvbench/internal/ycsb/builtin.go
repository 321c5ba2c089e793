package ycsb

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
)

// The built-in workloads are a byte-for-byte copy of the module's
// testdata/workloads (go:embed cannot reach outside this directory);
// TestBuiltinMatchesTestdata fails when the two differ. After editing a file
// in testdata/workloads, run "go generate ./cmd/kvbench/..." to copy it here.
//
//go:generate sh -c "rm -f workloads/* && cp ../../../../testdata/workloads/* workloads/"
//go:embed workloads
var builtinFiles embed.FS

// ErrUnknownWorkload is returned by Builtin for a name that is not a
// built-in workload.
var ErrUnknownWorkload = errors.New("ycsb: unknown workload")

// BuiltinDir is the directory of BuiltinFS that holds the workload files.
const BuiltinDir = "workloads"

// BuiltinFS returns the built-in workload property files (under BuiltinDir),
// as embedded in the binary.
func BuiltinFS() fs.FS { return builtinFiles }

// BuiltinNames lists the built-in workloads in name order: YCSB's core
// workloada..workloadf and kvbench's adversary, churn, mixed, negzipf,
// neguniform and shift.
func BuiltinNames() []string {
	entries, err := builtinFiles.ReadDir(BuiltinDir)
	if err != nil { // cannot happen: the directory is embedded
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// BuiltinName maps YCSB's short names a..f to workloada..workloadf and
// returns other names unchanged.
func BuiltinName(name string) string {
	if len(name) == 1 && name[0] >= 'a' && name[0] <= 'f' {
		return "workload" + name
	}
	return name
}

// Builtin parses the built-in workload called name (after BuiltinName, so
// "c" is workloadc). An unknown name is an error wrapping ErrUnknownWorkload.
func Builtin(name string) (*Workload, error) {
	full := BuiltinName(name)
	if !slices.Contains(BuiltinNames(), full) {
		return nil, fmt.Errorf("%w %q (built-in: %v, or a..f for workloada..workloadf)",
			ErrUnknownWorkload, name, BuiltinNames())
	}
	b, err := builtinFiles.ReadFile(BuiltinDir + "/" + full)
	if err != nil {
		return nil, err
	}
	w, err := Parse(bytes.NewReader(b), full)
	if err != nil {
		return nil, fmt.Errorf("built-in %s: %w", full, err)
	}
	return w, nil
}

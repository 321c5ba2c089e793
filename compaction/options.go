package compaction

import (
	"fmt"
	"math"
)

// Defaults of Options (used for zero fields).
const (
	// DefaultL0Trigger is the L0 read amplification at which L0's score is
	// 2: Pebble's L0CompactionThreshold, 4 too. L0 scores
	// 2 x depth / L0Trigger, so compactions start at depth 2 (Scores).
	DefaultL0Trigger = 4
	// DefaultL0FileThresholdPerTrigger times L0Trigger is the default
	// L0FileThreshold: 16 tables with the default trigger.
	DefaultL0FileThresholdPerTrigger = 4
	// DefaultLevelRatio is the size ratio between consecutive levels.
	DefaultLevelRatio = 10
	// DefaultBaseLevelBytes is the target size of L1: 64 MiB, as in Pebble's
	// LBaseMaxBytes and RocksDB's max_bytes_for_level_base. With ratio 10
	// the levels hold 64 MiB, 640 MiB, 6.4 GiB, ... up to 6.4 TiB at L6,
	// which covers an embedded store while keeping L1 small enough that an
	// L0->L1 compaction stays short.
	DefaultBaseLevelBytes = 64 << 20
	// DefaultTargetFileSize is the default size at which Run cuts output
	// tables (Pebble's default for its base level): 2 MiB.
	DefaultTargetFileSize = 2 << 20
)

// Options configure picking. Zero fields take the defaults above.
type Options struct {
	// L0Trigger is the L0 read amplification (manifest.L0Depth) at which L0 scores
	// 2, as Pebble's L0CompactionThreshold: L0 scores 2 x depth /
	// L0Trigger, so an L0 compaction starts at depth L0Trigger/2.
	L0Trigger int
	// L0FileThreshold is the number of L0 tables at which L0 scores 1
	// whatever their depth, so that tables that do not overlap (sequential
	// keys) do not pile up in L0 (Pebble's L0CompactionFileThreshold,
	// whose default of 500 suits its L0 sublevel index; a read here scans
	// L0's tables). Default: DefaultL0FileThresholdPerTrigger x L0Trigger.
	L0FileThreshold int
	// LevelRatio is the ratio between the target sizes of L(n+1) and Ln.
	LevelRatio float64
	// BaseLevelBytes is the target size of L1.
	BaseLevelBytes uint64
	// TargetFileSize is the output table size for Run (RunOptions); Pick
	// does not use it.
	TargetFileSize uint64
	// StaticLevelTargets turns the dynamic base level off: L0 compacts
	// into L1 and Ln's target is BaseLevelBytes * LevelRatio^(n-1) (RocksDB
	// without level_compaction_dynamic_level_bytes). Off by default.
	StaticLevelTargets bool
	// IntraL0Ratio turns on intra-L0 compactions: when L0 compactions have
	// fallen behind (the L0 tables an L0 compaction would take are deeper
	// than the depth L0 compactions start at) and those tables hold less
	// than 1/IntraL0Ratio of the bytes of the base-level tables under
	// them, Pick merges them (with every L0 table they overlap,
	// transitively, newer ones too) within L0 (Plan.IsIntraL0): a read
	// then checks one table there, at the cost of rewriting a few small
	// tables rather than the base level under them. 0 (the default): off.
	// The caller must give the output a file number above every L0
	// table's and below every later flush's (L0 is ordered by file
	// number), see Plan.IsIntraL0.
	IntraL0Ratio float64
}

// Validate reports options that cannot be used, wrapping ErrInvalidOptions.
// Zero fields are valid (they take the defaults).
func (o Options) Validate() error {
	if o.L0Trigger < 0 {
		return fmt.Errorf("%w: L0Trigger %d < 0", ErrInvalidOptions, o.L0Trigger)
	}
	if o.L0FileThreshold < 0 {
		return fmt.Errorf("%w: L0FileThreshold %d < 0", ErrInvalidOptions, o.L0FileThreshold)
	}
	if o.LevelRatio != 0 && !(o.LevelRatio >= 1 && o.LevelRatio <= 1000) {
		return fmt.Errorf("%w: LevelRatio %v outside [1, 1000]", ErrInvalidOptions, o.LevelRatio)
	}
	if o.IntraL0Ratio != 0 && !(o.IntraL0Ratio >= 1 && o.IntraL0Ratio <= 1000) {
		return fmt.Errorf("%w: IntraL0Ratio %v outside [1, 1000]", ErrInvalidOptions, o.IntraL0Ratio)
	}
	return nil
}

// WithDefaults returns o with zero (and invalid) fields set to the defaults.
func (o Options) WithDefaults() Options {
	if o.L0Trigger <= 0 {
		o.L0Trigger = DefaultL0Trigger
	}
	if o.L0FileThreshold <= 0 {
		o.L0FileThreshold = DefaultL0FileThresholdPerTrigger * o.L0Trigger
	}
	if !(o.LevelRatio >= 1 && o.LevelRatio <= 1000) {
		o.LevelRatio = DefaultLevelRatio
	}
	if o.BaseLevelBytes == 0 {
		o.BaseLevelBytes = DefaultBaseLevelBytes
	}
	if o.TargetFileSize == 0 {
		o.TargetFileSize = DefaultTargetFileSize
	}
	if !(o.IntraL0Ratio >= 1 && o.IntraL0Ratio <= 1000) {
		o.IntraL0Ratio = 0
	}
	return o
}

// LevelTarget returns the static target size of level (1..NumLevels-1):
// BaseLevelBytes * LevelRatio^(level-1), used with StaticLevelTargets (the
// default targets are dynamic: BaseLevel). Zero fields take the defaults.
func (o Options) LevelTarget(level int) uint64 {
	o = o.WithDefaults()
	t := float64(o.BaseLevelBytes) * math.Pow(o.LevelRatio, float64(level-1))
	if t >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(t)
}

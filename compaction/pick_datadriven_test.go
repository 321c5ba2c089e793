package compaction

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/adaptkv/adaptkv/internal/manifest"
	"github.com/cockroachdb/datadriven"
)

// TestPickDataDriven runs the LSMs of testdata/pick through picking: an
// LSM in, the scores and the plan out. Commands:
//
//	define                 the LSM, one table a line under its level:
//	                       "L<n>" then "<num>: <lo>-<hi> <size>" (size in
//	                       bytes, or with K or M); prints base level, depth,
//	                       scores
//	pick [busy=(n,...)] [l0-trigger=n] [intra-l0=r] [static]
//	                       Pick's plan, or "none"
//	pick-range level=n start=k end=k [busy=(n,...)]
//	                       TryPickRange's plan, "none", or its error
//
// Rewrite the expected outputs with -rewrite after an intended change.
func TestPickDataDriven(t *testing.T) {
	var levels [NumLevels][]*TableMeta
	datadriven.RunTest(t, "testdata/pick", func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "define":
			var err error
			if levels, err = parseLSM(td.Input); err != nil {
				return "error: " + err.Error()
			}
			return describeLSM(levels, Options{})
		case "pick":
			opts := Options{StaticLevelTargets: td.HasArg("static")}
			td.MaybeScanArgs(t, "l0-trigger", &opts.L0Trigger)
			td.MaybeScanArgs(t, "intra-l0", &opts.IntraL0Ratio)
			p := Pick(levels, opts, busyArg(t, td))
			if p == nil {
				return "none\n"
			}
			return fmt.Sprintf("%s score %.2f\n", p, p.Score)
		case "pick-range":
			var level int
			var start, end string
			td.ScanArgs(t, "level", &level)
			td.ScanArgs(t, "start", &start)
			td.ScanArgs(t, "end", &end)
			p, err := TryPickRange(levels, level, []byte(start), []byte(end), busyArg(t, td))
			switch {
			case err != nil:
				return "error: " + err.Error() + "\n"
			case p == nil:
				return "none\n"
			}
			return p.String() + "\n"
		}
		return "unknown command " + td.Cmd + "\n"
	})
}

// busyArg is the busy=(n,...) argument as a busy function (nil without it).
func busyArg(t *testing.T, td *datadriven.TestData) func(uint64) bool {
	arg, ok := td.Arg("busy")
	if !ok {
		return nil
	}
	var nums []uint64
	for _, v := range arg.Vals {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: busy=%s: %v", td.Pos, v, err)
		}
		nums = append(nums, n)
	}
	return busySet(nums...)
}

// parseLSM reads "L<n>" lines and "<num>: <lo>-<hi> <size>" table lines.
func parseLSM(input string) ([NumLevels][]*TableMeta, error) {
	var levels [NumLevels][]*TableMeta
	level := -1
	for _, line := range strings.Split(input, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "L"):
			n, err := strconv.Atoi(line[1:])
			if err != nil || n < 0 || n >= NumLevels {
				return levels, fmt.Errorf("bad level line %q", line)
			}
			level = n
			continue
		case level < 0:
			return levels, fmt.Errorf("table %q before a level line", line)
		}
		var num uint64
		var span, size string
		if _, err := fmt.Sscanf(line, "%d: %s %s", &num, &span, &size); err != nil {
			return levels, fmt.Errorf("bad table line %q: %v", line, err)
		}
		lo, hi, ok := strings.Cut(span, "-")
		if !ok {
			return levels, fmt.Errorf("bad key range in %q", line)
		}
		bytes, err := parseSize(size)
		if err != nil {
			return levels, fmt.Errorf("bad size in %q: %v", line, err)
		}
		levels[level] = append(levels[level], tm(num, bytes, lo, hi))
	}
	return levels, CheckLevels(levels)
}

func parseSize(s string) (uint64, error) {
	mult := uint64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		s, mult = strings.TrimSuffix(s, "K"), 1<<10
	case strings.HasSuffix(s, "M"):
		s, mult = strings.TrimSuffix(s, "M"), 1<<20
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n * mult, err
}

// describeLSM prints what picking sees of levels: the base level, L0's
// depth and each non-zero score.
func describeLSM(levels [NumLevels][]*TableMeta, opts Options) string {
	var b strings.Builder
	base, _ := BaseLevel(levels, opts)
	fmt.Fprintf(&b, "base L%d, L0 depth %d\n", base, manifest.L0Depth(levels[0], nil))
	for l, s := range Scores(levels, opts, nil) {
		if s != 0 {
			fmt.Fprintf(&b, "L%d score %.2f\n", l, s)
		}
	}
	return b.String()
}

package sstable

import (
	"slices"
	"strings"
	"testing"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/internal/filtertest"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func roundTripSizes() (keys, absent int) {
	if testing.Short() {
		return 10_000, 50_000
	}
	return 100_000, 1_000_000
}

func TestRoundTripPolicies(t *testing.T) {
	for _, name := range filterpolicy.Names() {
		t.Run(name, func(t *testing.T) { testRoundTrip(t, name) })
	}
}

func testRoundTrip(t *testing.T, name string) {
	n, absent := roundTripSizes()
	if name == "none" {
		absent = n // every absent lookup is a probe: keep it short
	}
	fs := vfs.NewMem()
	p := mustPolicy(t, name, 0x5eed0000+uint64(len(name)))
	writeTable(t, fs, "t.sst", p, n)
	opts := ReaderOptions{Cache: pebble.NewCache(8 << 20), FileNum: 1, StatePath: "t.state"}
	r, err := Open(fs, "t.sst", opts)
	require.NoError(t, err)
	require.NoError(t, r.FilterError())
	if name == "none" {
		require.Nil(t, r.Filter())
	} else {
		require.Equal(t, name, r.FilterKind())
	}
	require.Zero(t, r.Metrics().RemoteReads, "opening reads nothing of the remote")
	checkAllStored(t, r, n)
	require.Zero(t, r.Metrics().RemoteReads, "stored keys never touch the remote")

	// Absent keys: the filter's false-positive rate.
	// For adaptive filters each false positive is queried again right after
	// its adaptation.
	var fps [][]byte
	fixedAtOnce := 0
	before := r.Metrics()
	for i := 0; i < absent; i++ {
		k := absentKey(i)
		_, ok, err := r.Get(k)
		require.NoError(t, err)
		require.False(t, ok)
		if r.Metrics().FalsePositiveProbes > before.FalsePositiveProbes+uint64(len(fps)) {
			fps = append(fps, k)
			if r.Filter() != nil && !r.Filter().MayContain(k) {
				fixedAtOnce++
			}
		}
	}
	m := r.Metrics()
	rate := float64(m.FalsePositiveProbes-before.FalsePositiveProbes) / float64(absent)
	bound := filtertest.FPRBound(filtertest.DesignFPR[name], absent)
	t.Logf("%s: %d keys, fpr %.5f (bound %.5f), %.2f bits/key, %d data block reads, %d adaptations, %d rebuilds, %d remote reads",
		name, n, rate, bound, float64(m.FilterBytes*8)/float64(max(m.FilterKeys, 1)), m.DataBlockReads, m.Adaptations, m.Rebuilds, m.RemoteReads)
	require.LessOrEqual(t, rate, bound)
	if name == "none" {
		require.Equal(t, uint64(absent), m.FalsePositiveProbes-before.FalsePositiveProbes)
	}
	checkAllStored(t, r, n)

	adaptive := isAdaptiveName(name)
	if !adaptive {
		require.Zero(t, m.Adaptations)
		require.NoError(t, r.Close())
		return
	}
	require.Equal(t, uint64(len(fps)), m.Adaptations+m.AdaptErrors)
	require.Zero(t, m.AdaptErrors, "last: %v", r.LastAdaptError())
	require.Positive(t, m.RemoteReads)
	require.NotEmpty(t, fps)
	// A fixed key collides again with a re-drawn remainder with probability
	// about 2^-r, so the unfixed share is held to that rate plus 4 binomial
	// sigma; at the default size this is below the 1% the design promises.
	unfixed := len(fps) - fixedAtOnce
	unfixedRate, minAtOnce := 1.0/256, 0.99
	if name == "caf" {
		// The cache refuses a false positive whose home run holds a stored
		// key with the same 6 cache bits (about run length / 64: measured
		// 3%), which then stays a false positive.
		unfixedRate, minAtOnce = 0.05, 0.95
	}
	require.LessOrEqual(t, float64(unfixed), filtertest.FPRBound(unfixedRate, len(fps))*float64(len(fps)),
		"%d of %d fixed right after adaptation", fixedAtOnce, len(fps))
	if !testing.Short() {
		require.GreaterOrEqual(t, float64(fixedAtOnce), minAtOnce*float64(len(fps)), "%d of %d fixed right after adaptation", fixedAtOnce, len(fps))
	}
	// Later adaptations may undo earlier fixes: a block rebuild (exAF's
	// extension code overflowing, TAF's selector code) forgets the block's
	// earlier fixes, so the whole set is held to the rebuild-free rate only
	// when there were no rebuilds.
	answers := filterAnswers(r, fps)
	stillFixed := countFalse(answers)
	t.Logf("%s: %d false positives, %d fixed right after adaptation, %d still fixed after the whole run",
		name, len(fps), fixedAtOnce, stillFixed)
	minFixed := 1 - filtertest.FPRBound(1.0/256, len(fps)) // >= 0.99 at the default size
	if m.Rebuilds > 0 {
		minFixed = 0.9
	}
	if name == "caf" {
		// A cache, not a fix: refused entries, and blocks with more than
		// four false positives evict the oldest (FIFO), so re-asking the
		// set churns the fullest caches (measured: 92% then 79%).
		minFixed = 0.7
	}
	if strings.HasPrefix(name, "acf") {
		// An adaptive cuckoo filter's fix moves or re-fingerprints stored
		// elements, which may make an earlier fixed key collide again (ACF
		// paper, section 2.2, "Fixing false positives"); the Cuckooing
		// ACF's fixes move tens of elements each at 95% load (measured:
		// 88% still fixed, cyclic 98%, swapping 99%).
		minFixed = 0.85
	}
	requireFixed(t, r, fps, minFixed) // (adapts the few still unfixed)
	answers = filterAnswers(r, fps)
	require.NoError(t, r.Close())

	// The adaptations survive Close and reopen through the state file: the
	// reopened filter answers exactly as before.
	r, err = Open(fs, "t.sst", opts)
	require.NoError(t, err)
	require.NoError(t, r.StateError())
	require.True(t, slices.Equal(answers, filterAnswers(r, fps)), "reopened filter answers differently")
	requireFixed(t, r, fps, minFixed)
	checkAllStored(t, r, n)
	require.NoError(t, r.Close())

	// Without the state file: the pristine filter, with the reason reported.
	require.NoError(t, fs.Remove("t.state"))
	r, err = Open(fs, "t.sst", opts)
	require.NoError(t, err)
	require.ErrorIs(t, r.StateError(), ErrNoState)
	// Adaptations can create new collisions, so a few recorded keys were
	// false positives of the adapted filter only; most must be back.
	maybes := 0
	for _, k := range fps {
		if r.Filter().MayContain(k) {
			maybes++
		}
	}
	repeat := 0.9
	if strings.HasPrefix(name, "acf") {
		repeat = 0.7 // the Cuckooing ACF's moves make many new ones (measured 78%)
	}
	require.GreaterOrEqual(t, float64(maybes), repeat*float64(len(fps)), "pristine filter must repeat its false positives")
	require.NoError(t, r.Close())
}

func filterAnswers(r *Reader, keys [][]byte) []bool {
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = r.Filter().MayContain(k)
	}
	return out
}

func countFalse(bs []bool) int {
	n := 0
	for _, b := range bs {
		if !b {
			n++
		}
	}
	return n
}

// requireFixed checks that at least a fraction minFixed of the
// false-positive keys are now filter negatives (through Get's counters).
func requireFixed(t *testing.T, r *Reader, fps [][]byte, minFixed float64) {
	t.Helper()
	before := r.Metrics()
	for _, k := range fps {
		_, ok, err := r.Get(k)
		require.NoError(t, err)
		require.False(t, ok)
	}
	neg := r.Metrics().FilterNegatives - before.FilterNegatives
	require.GreaterOrEqual(t, float64(neg), minFixed*float64(len(fps)), "%d of %d fixed", neg, len(fps))
}

func checkAllStored(t *testing.T, r *Reader, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		v, ok, err := r.Get(storedKey(i))
		require.NoError(t, err)
		require.True(t, ok, "stored key %d reported missing", i)
		require.Equal(t, value(i), v)
	}
}

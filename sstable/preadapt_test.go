package sstable

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// PreAdapt fixes the false positives among the keys it is given, leaves
// stored keys alone, counts apart from the read path and saves its fixes
// with the adaptive state, for every adaptive kind; a static filter has
// nothing to do.
func TestPreAdapt(t *testing.T) {
	for _, name := range adaptivePolicies(t) {
		t.Run(name, func(t *testing.T) { preAdapt(t, name) })
	}

	fs := vfs.NewMem()
	keys := [][]byte{absentKey(1), storedKey(1)}
	writeTable(t, fs, "b.sst", mustPolicy(t, "bloom", 11), 1000)
	b, err := Open(fs, "b.sst", ReaderOptions{})
	require.NoError(t, err)
	res, err := b.PreAdapt(keys)
	require.NoError(t, err)
	require.Zero(t, res.Checked)
	require.NoError(t, b.Close())
	_, err = b.PreAdapt(keys[:1])
	require.NoError(t, err, "a static reader does nothing, closed or not")
}

func preAdapt(t *testing.T, name string) {
	const n, absent = 100_000, 50_000
	fs := vfs.NewMem()
	writeTable(t, fs, "t.sst", mustPolicy(t, name, 11), n)
	open := func() *Reader {
		r, err := Open(fs, "t.sst", ReaderOptions{StatePath: "t.fstate"})
		require.NoError(t, err)
		return r
	}
	r := open()
	keys := make([][]byte, 0, absent+absent/10)
	for i := 0; i < absent; i++ {
		keys = append(keys, absentKey(i))
		if i%10 == 0 {
			keys = append(keys, storedKey(i)) // held: never "fixed"
		}
	}
	res, err := r.PreAdapt(keys)
	require.NoError(t, err)
	t.Logf("%+v", res)
	require.Equal(t, len(keys), res.Checked)
	require.Equal(t, absent/10, res.Maybe-res.Fixed-res.Failed, "every stored key answers maybe and is left alone")
	require.Greater(t, res.Fixed, 50, "a fresh filter has 0.2-0.4%% false positives")
	require.Zero(t, res.Failed)
	m := r.Metrics()
	require.Equal(t, uint64(res.Fixed), m.PreAdaptations)
	require.Equal(t, uint64(len(keys)), m.PreAdaptChecks)
	require.Zero(t, m.Adaptations, "the read path's counters are untouched")
	require.Zero(t, m.FalsePositiveProbes)
	fixedAfter := func(r *Reader) int {
		fp := 0
		for i := 0; i < absent; i++ {
			if r.Filter().MayContain(absentKey(i)) {
				fp++
			}
		}
		return fp
	}
	require.LessOrEqual(t, fixedAfter(r), res.Fixed/20, "the fixes hold")
	for i := 0; i < n; i++ {
		require.True(t, r.Filter().MayContain(storedKey(i)), "no false negative")
	}
	require.NoError(t, r.Close())

	// Saved with the state: a reopened reader has them.
	r = open()
	defer r.Close()
	require.LessOrEqual(t, fixedAfter(r), res.Fixed/20)
	for i := 0; i < n; i += 3 {
		_, found, err := r.Get(storedKey(i))
		require.NoError(t, err)
		require.True(t, found)
	}
}

// TestFixFalsePositiveGate: with ReaderOptions.FixFalsePositive an
// adaptive filter fixes only the false positives the gate lets through;
// the others are counted as deferred and cost their probe again.
func TestFixFalsePositiveGate(t *testing.T) {
	const n, absent = 20_000, 20_000
	fs := vfs.NewMem()
	writeTable(t, fs, "t.sst", mustPolicy(t, "taf", 12), n)
	allow := map[string]bool{}
	r, err := Open(fs, "t.sst", ReaderOptions{FixFalsePositive: func(key []byte) bool { return allow[string(key)] }})
	require.NoError(t, err)
	defer r.Close()
	ask := func() (fp uint64) {
		before := r.Metrics().FalsePositiveProbes
		for i := 0; i < absent; i++ {
			_, found, err := r.Get(absentKey(i))
			require.NoError(t, err)
			require.False(t, found)
		}
		return r.Metrics().FalsePositiveProbes - before
	}
	first := ask()
	require.Greater(t, first, uint64(20), "a fresh taf has ~0.4% false positives")
	m := r.Metrics()
	require.Zero(t, m.Adaptations)
	require.Equal(t, first, m.FixesDeferred)
	require.Equal(t, first, ask(), "unfixed: the same false positives again")
	for i := 0; i < absent; i += 2 {
		allow[string(absentKey(i))] = true
	}
	third := ask()
	require.Positive(t, r.Metrics().Adaptations, "the allowed half fixed")
	require.Less(t, ask(), third, "fewer once half are fixed")
	for i := 0; i < n; i++ {
		_, found, err := r.Get(storedKey(i))
		require.NoError(t, err)
		require.True(t, found, "no false negative")
	}
}

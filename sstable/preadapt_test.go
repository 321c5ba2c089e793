package sstable

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/filterpolicy"
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

// TestPreAdaptWhileWriting: a table written with known negatives has an
// adaptive filter that already fixed its false positives among those in
// its key range that it does not hold, the most counted first within the
// budget, with no read of the table; stored keys, held negatives and
// negatives out of range are left alone; the fixes are in the block, so a
// reader without a state file has them and adapts further as usual. Every
// adaptive kind; the same seed without negatives gives the false positives
// the build must have fixed.
func TestPreAdaptWhileWriting(t *testing.T) {
	for _, name := range adaptivePolicies(t) {
		t.Run(name, func(t *testing.T) { preAdaptWhileWriting(t, name) })
	}
}

func preAdaptWhileWriting(t *testing.T, name string) {
	const n, absent = 100_000, 60_000
	p := mustPolicy(t, name, 13)
	kn := []filter.KnownNegative{{Key: []byte("a"), Count: 99}} // below the first key
	for i := 0; i < absent; i++ {
		kn = append(kn, filter.KnownNegative{Key: absentKey(i), Count: uint64(1 + i%7)})
		if i%10 == 0 {
			kn = append(kn, filter.KnownNegative{Key: storedKey(i + 1), Count: 50}) // held
		}
	}
	kn = append(kn, filter.KnownNegative{Key: absentKey(n + 5), Count: 99}) // past the last key
	slices.SortFunc(kn, func(a, b filter.KnownNegative) int { return bytes.Compare(a.Key, b.Key) })

	fs := vfs.NewMem()
	plain := writeTableWith(t, fs, "plain.sst", WriterOptions{Policy: p}, n)
	require.Zero(t, plain.PreAdapted)
	info := writeTableWith(t, fs, "t.sst", WriterOptions{Policy: p, KnownNegatives: kn}, n)
	t.Logf("%+v", info.PreAdapted)

	open := func(path string) *Reader {
		r, err := Open(fs, path, ReaderOptions{StatePath: path + ".fstate"})
		require.NoError(t, err)
		return r
	}
	pr := open("plain.sst")
	defer pr.Close()
	var wantFixed []int // the absent negatives the plain filter answers maybe
	for i := 0; i < absent; i++ {
		if pr.Filter().MayContain(absentKey(i)) {
			wantFixed = append(wantFixed, i)
		}
	}
	require.Greater(t, len(wantFixed), 50, "a fresh filter has 0.2-0.4%% false positives")
	require.Equal(t, absent, info.PreAdapted.Checked, "in range, not held, within the budget")
	require.Zero(t, info.PreAdapted.Failed)
	// A fix may change other answers (a moved cuckoo element, a rebuilt
	// run): the fixes are the false positives give or take a few.
	require.InDelta(t, len(wantFixed), info.PreAdapted.Fixed, float64(len(wantFixed))/20, "the false positives")

	r := open("t.sst")
	defer r.Close()
	require.ErrorIs(t, r.StateError(), ErrNoState, "the fixes are in the block, not in a state file")
	left := 0
	for i := 0; i < absent; i++ {
		if r.Filter().MayContain(absentKey(i)) {
			left++
		}
	}
	// A cuckoo fix moves an element, which may fool another negative
	// fixed before it; caf's cache keeps the most recent fixes.
	require.LessOrEqual(t, left, info.PreAdapted.Fixed/10, "fixed while writing")
	for i := 0; i < n; i++ {
		require.True(t, r.Filter().MayContain(storedKey(i)), "no false negative")
	}
	m := r.Metrics()
	require.Zero(t, m.Adaptations+m.RemoteReads+m.PreAdaptations, "nothing read or fixed by the reader")

	// The reader adapts on: fresh absent keys' false positives are fixed
	// from the remote section on disk, stored keys still found.
	for i := absent; i < n; i++ {
		_, found, err := r.Get(absentKey(i))
		require.NoError(t, err)
		require.False(t, found)
	}
	require.Positive(t, r.Metrics().Adaptations)
	for i := 0; i < n; i += 7 {
		_, found, err := r.Get(storedKey(i))
		require.NoError(t, err)
		require.True(t, found)
	}
}

// TestPreAdaptBudget: a table checks at most PreAdaptBudget of its known
// negatives, the most counted, so a small table in a wide key range does
// not pay for every negative of the store.
func TestPreAdaptBudget(t *testing.T) {
	const n = 1000 // budget 4096
	var kn []filter.KnownNegative
	for i := 0; i < n; i++ {
		for j := 0; j < 10; j++ { // ten negatives between two stored keys
			kn = append(kn, filter.KnownNegative{Key: fmt.Appendf(absentKey(i), "-%d", j), Count: uint64(j)})
		}
	}
	require.Equal(t, 4096, filterpolicy.PreAdaptBudget(n))
	fs := vfs.NewMem()
	w, err := Create(fs, "t.sst", WriterOptions{Policy: mustPolicy(t, "taf", 3), KnownNegatives: kn})
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		require.NoError(t, w.Add(InternalKey{UserKey: storedKey(i), Seq: 1, Kind: KeyKindSet}, value(i)))
	}
	info, err := w.Close()
	require.NoError(t, err)
	require.Equal(t, 4096, info.PreAdapted.Checked)
}

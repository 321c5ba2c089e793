package sstable

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// Golden tables: one small table per policy, written with fixed seeds by
// `go test ./sstable/ -run Golden -update` and committed under
// testdata/golden/. Reading them pins the table, filter block, remote and
// state file formats: a change that breaks old files fails this test.

var update = flag.Bool("update", false, "rewrite the golden tables in testdata/golden")

const (
	goldenDir    = "../testdata/golden"
	goldenKeys   = 1000
	goldenProbes = 20000
)

// goldenEntries lists the table's internal keys in order: every key has a
// Set; every 5th also an older Set; every 11th a newer tombstone.
func goldenEntries() (keys []InternalKey, vals [][]byte) {
	for i := 0; i < goldenKeys; i++ {
		k := storedKey(i)
		base := uint64(10*i + 10)
		if i%11 == 0 {
			keys, vals = append(keys, InternalKey{UserKey: k, Seq: base + 2, Kind: KeyKindDelete}), append(vals, nil)
		}
		keys, vals = append(keys, InternalKey{UserKey: k, Seq: base + 1, Kind: KeyKindSet}), append(vals, value(i))
		if i%5 == 0 {
			keys, vals = append(keys, InternalKey{UserKey: k, Seq: base, Kind: KeyKindSet}), append(vals, []byte("old"))
		}
	}
	return keys, vals
}

func goldenSeed(name string) uint64 { return 0x601d_0000 + uint64(len(name))*131 + uint64(name[0]) }

// isAdaptiveName reports whether the registered kind name adapts: its
// filter fixes false positives (rsqf is decoded as an adaptive filter but
// does not adapt).
func isAdaptiveName(name string) bool {
	k, ok := filterpolicy.KindByName(name)
	return ok && k.Adaptive() && name != "rsqf"
}

// falsePositives lists the absent-key indices the filter answers "maybe" for.
func falsePositives(r *Reader) []int {
	out := []int{}
	if r.Filter() == nil {
		return out
	}
	for i := 0; i < goldenProbes; i++ {
		if r.Filter().MayContain(absentKey(i)) {
			out = append(out, i)
		}
	}
	return out
}

func writeInts(t *testing.T, path string, xs []int) {
	var sb strings.Builder
	for _, x := range xs {
		fmt.Fprintf(&sb, "%d\n", x)
	}
	require.NoError(t, os.WriteFile(path, []byte(sb.String()), 0o644))
}

func readInts(t *testing.T, path string) []int {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	xs := []int{}
	for _, f := range strings.Fields(string(b)) {
		x, err := strconv.Atoi(f)
		require.NoError(t, err)
		xs = append(xs, x)
	}
	return xs
}

func updateGolden(t *testing.T, name string) {
	p := mustPolicy(t, name, goldenSeed(name))
	sst := filepath.Join(goldenDir, name+".sst")
	w, err := Create(vfs.Default, sst, WriterOptions{Policy: p, FilterSeed: goldenSeed(name)})
	require.NoError(t, err)
	keys, vals := goldenEntries()
	for i := range keys {
		require.NoError(t, w.Add(keys[i], vals[i]))
	}
	_, err = w.Close()
	require.NoError(t, err)
	r, err := Open(vfs.Default, sst, ReaderOptions{})
	require.NoError(t, err)
	writeInts(t, filepath.Join(goldenDir, name+".fp"), falsePositives(r))
	require.NoError(t, r.Close())
	if !isAdaptiveName(name) {
		return
	}
	state := filepath.Join(goldenDir, name+".state")
	_ = os.Remove(state)
	r, err = Open(vfs.Default, sst, ReaderOptions{StatePath: state})
	require.NoError(t, err)
	for i := 0; i < goldenProbes; i++ {
		_, _, err := r.Get(absentKey(i))
		require.NoError(t, err)
	}
	writeInts(t, filepath.Join(goldenDir, name+".fp-adapted"), falsePositives(r))
	require.NoError(t, r.Close())
}

func TestGolden(t *testing.T) {
	for _, name := range filterpolicy.Names() {
		t.Run(name, func(t *testing.T) {
			if *update {
				updateGolden(t, name)
			}
			// Work on a copy: opening with a state path may write to it.
			fs := vfs.NewMem()
			copyIn := func(file string) bool {
				b, err := os.ReadFile(filepath.Join(goldenDir, file))
				if os.IsNotExist(err) {
					return false
				}
				require.NoError(t, err)
				writeAll(t, fs, file, b)
				return true
			}
			require.True(t, copyIn(name+".sst"), "missing golden table; run with -update")
			r, err := Open(fs, name+".sst", ReaderOptions{})
			require.NoError(t, err)
			require.NoError(t, r.FilterError())
			if name == "none" {
				require.Nil(t, r.Filter())
			} else {
				require.Equal(t, name, r.FilterKind())
				require.Equal(t, goldenSeed(name), r.hdr.Seed)
				require.Equal(t, uint8(1), r.hdr.Version)
				require.Equal(t, uint64(goldenKeys), r.hdr.NumKeys)
				require.Equal(t, isAdaptiveName(name) || name == "rsqf", r.hdr.HasRemote)
			}

			// Contents: every internal key, and lookups at several snapshots.
			keys, vals := goldenEntries()
			it, err := r.NewIter(nil, nil)
			require.NoError(t, err)
			i := 0
			for ok := it.First(); ok; ok = it.Next() {
				require.Less(t, i, len(keys))
				k := it.Key()
				require.Equal(t, keys[i].UserKey, k.UserKey)
				require.Equal(t, keys[i].Seq, k.Seq)
				require.Equal(t, keys[i].Kind, k.Kind)
				if k.Kind == KeyKindSet {
					require.Equal(t, vals[i], it.Value())
				}
				i++
			}
			require.NoError(t, it.Close())
			require.Equal(t, len(keys), i)
			for j := 0; j < goldenKeys; j++ {
				v, ok, err := r.Get(storedKey(j))
				require.NoError(t, err)
				require.Equal(t, j%11 != 0, ok, "key %d", j)
				if ok {
					require.Equal(t, value(j), v)
				}
				v, _, ok, err = r.GetInternal(storedKey(j), uint64(10*j+11))
				require.NoError(t, err)
				require.Equal(t, j%5 == 0, ok)
				if ok {
					require.Equal(t, "old", string(v))
				}
			}

			// Filter behaviour: exactly the recorded false positives.
			require.Equal(t, readInts(t, filepath.Join(goldenDir, name+".fp")), falsePositives(r))
			require.NoError(t, r.Close())
			if !isAdaptiveName(name) {
				return
			}

			// Adaptation reads the old file's remote; the saved state of the
			// recorded run loads and answers as recorded.
			r, err = Open(fs, name+".sst", ReaderOptions{})
			require.NoError(t, err)
			fps := readInts(t, filepath.Join(goldenDir, name+".fp"))
			fixed := 0
			for _, j := range fps {
				_, _, err := r.Get(absentKey(j))
				require.NoError(t, err)
				if !r.Filter().MayContain(absentKey(j)) {
					fixed++
				}
			}
			require.GreaterOrEqual(t, float64(fixed), 0.95*float64(len(fps)))
			require.Zero(t, r.Metrics().AdaptErrors)
			require.NoError(t, r.Close())

			require.True(t, copyIn(name+".state"))
			r, err = Open(fs, name+".sst", ReaderOptions{StatePath: name + ".state"})
			require.NoError(t, err)
			require.NoError(t, r.StateError())
			require.Equal(t, readInts(t, filepath.Join(goldenDir, name+".fp-adapted")), falsePositives(r))
			checkStoredGolden(t, r)
			require.NoError(t, r.Close())
		})
	}
}

func checkStoredGolden(t *testing.T, r *Reader) {
	for j := 0; j < goldenKeys; j++ {
		require.True(t, r.Filter().MayContain(storedKey(j)))
	}
}

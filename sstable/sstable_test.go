package sstable

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// storedKey is the i-th stored key: even numbers, so odd numbers are absent
// keys that sort between stored ones (every lookup reaches a data block).
func storedKey(i int) []byte { return fmt.Appendf(nil, "key%012d", 2*i) }
func absentKey(i int) []byte { return fmt.Appendf(nil, "key%012d", 2*i+1) }

func value(i int) []byte { return binary.LittleEndian.AppendUint64([]byte("val-"), uint64(i)) }

func mustPolicy(t testing.TB, name string, seed uint64) filterpolicy.Policy {
	p, err := filterpolicy.New(name, filterpolicy.Options{SeedSource: filterpolicy.FixedSeed(seed)})
	require.NoError(t, err)
	return p
}

// adaptivePolicies lists every registered policy whose filters adapt
// (filterpolicy.Adapts), so a test over them covers a kind as soon as it
// is registered.
func adaptivePolicies(t testing.TB) []string {
	var out []string
	for _, name := range filterpolicy.Names() {
		if filterpolicy.Adapts(mustPolicy(t, name, 1)) {
			out = append(out, name)
		}
	}
	require.Contains(t, out, "taf")
	return out
}

// writeTable writes n keys (one Set version each) with the given policy.
func writeTable(t testing.TB, fs vfs.FS, path string, p filterpolicy.Policy, n int) TableInfo {
	return writeTableWith(t, fs, path, WriterOptions{Policy: p}, n)
}

// writeTableWith is writeTable with the given writer options.
func writeTableWith(t testing.TB, fs vfs.FS, path string, o WriterOptions, n int) TableInfo {
	w, err := Create(fs, path, o)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		require.NoError(t, w.Add(InternalKey{UserKey: storedKey(i), Seq: uint64(i + 1), Kind: KeyKindSet}, value(i)))
	}
	info, err := w.Close()
	require.NoError(t, err)
	return info
}

// requireFullScan walks it from First over a table written by writeTable
// (or alike): keys 0..n-1 in order, each one Set version with sequence
// number i+1 and its value. It leaves it open.
func requireFullScan(t testing.TB, it Iterator, n int) {
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		require.Equal(t, storedKey(i), k.UserKey)
		require.Equal(t, uint64(i+1), k.Seq)
		require.Equal(t, KeyKindSet, k.Kind)
		require.Equal(t, value(i), it.Value())
		i++
	}
	require.NoError(t, it.Error())
	require.Equal(t, n, i)
}

func TestWriteReadBasic(t *testing.T) {
	for _, name := range []string{"none", "bloom", "fuse"} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			n := 5000
			info := writeTable(t, fs, "t.sst", mustPolicy(t, name, 7), n)
			require.Equal(t, uint64(n), info.NumEntries)
			require.Equal(t, storedKey(0), info.Smallest.UserKey)
			require.Equal(t, storedKey(n-1), info.Largest.UserKey)
			require.Positive(t, info.Size)

			r, err := Open(fs, "t.sst", ReaderOptions{Cache: pebble.NewCache(1 << 20), FileNum: 3})
			require.NoError(t, err)
			require.NoError(t, r.FilterError())
			for i := 0; i < n; i++ {
				v, ok, err := r.Get(storedKey(i))
				require.NoError(t, err)
				require.True(t, ok, "key %d", i)
				require.Equal(t, value(i), v)
			}
			for i := 0; i < n; i++ {
				_, ok, err := r.Get(absentKey(i))
				require.NoError(t, err)
				require.False(t, ok)
			}
			m := r.Metrics()
			require.Equal(t, uint64(n), m.TruePositiveProbes)
			if name == "none" {
				require.Zero(t, m.FilterChecks)
				require.Equal(t, uint64(n), m.FalsePositiveProbes)
			} else {
				require.Equal(t, uint64(2*n), m.FilterChecks)
				require.Less(t, m.FalsePositiveProbes, uint64(n/20))
				require.Equal(t, uint64(n), m.FilterKeys)
			}
			require.Positive(t, m.DataBlockReads)

			it, err := r.NewIter(nil, nil)
			require.NoError(t, err)
			requireFullScan(t, it, n)
			require.NoError(t, it.Close())
			require.NoError(t, r.Close())
			_, _, err = r.Get(storedKey(0))
			require.ErrorIs(t, err, ErrClosed)
			_, _, _, err = r.GetInternal(storedKey(0), 1)
			require.ErrorIs(t, err, ErrClosed)
			_, err = r.NewIter(nil, nil)
			require.ErrorIs(t, err, ErrClosed)
			require.ErrorIs(t, r.SaveState(), ErrClosed)
			require.ErrorIs(t, r.Close(), ErrClosed)
		})
	}
}

func TestVersionsAndSnapshots(t *testing.T) {
	fs := vfs.NewMem()
	w, err := Create(fs, filepath.Join("", "v.sst"), WriterOptions{Policy: filterpolicy.NewBloom(10)})
	require.NoError(t, err)
	// a: set@30, del@20, set@10; b: del@5
	require.NoError(t, w.Add(InternalKey{UserKey: []byte("a"), Seq: 30, Kind: KeyKindSet}, []byte("a30")))
	require.NoError(t, w.Add(InternalKey{UserKey: []byte("a"), Seq: 20, Kind: KeyKindDelete}, nil))
	require.NoError(t, w.Add(InternalKey{UserKey: []byte("a"), Seq: 10, Kind: KeyKindSet}, []byte("a10")))
	require.ErrorIs(t, w.Add(InternalKey{UserKey: []byte("a"), Seq: 10, Kind: KeyKindSet}, nil), ErrOutOfOrder)
	require.ErrorIs(t, w.Add(InternalKey{UserKey: []byte("0"), Seq: 1, Kind: KeyKindSet}, nil), ErrOutOfOrder)
	require.ErrorIs(t, w.Add(InternalKey{UserKey: []byte("z"), Seq: 1 << 56, Kind: KeyKindSet}, nil), ErrInvalidKey)
	require.ErrorIs(t, w.Add(InternalKey{UserKey: []byte("z"), Seq: 1, Kind: 7}, nil), ErrInvalidKey)
	require.NoError(t, w.Add(InternalKey{UserKey: []byte("b"), Seq: 5, Kind: KeyKindDelete}, nil))
	info, err := w.Close()
	require.NoError(t, err)
	require.Equal(t, uint64(4), info.NumEntries)
	require.Equal(t, InternalKey{UserKey: []byte("a"), Seq: 30, Kind: KeyKindSet}, info.Smallest)
	require.Equal(t, InternalKey{UserKey: []byte("b"), Seq: 5, Kind: KeyKindDelete}, info.Largest)
	require.ErrorIs(t, w.Add(InternalKey{UserKey: []byte("c"), Seq: 1, Kind: KeyKindSet}, nil), ErrClosed)
	_, err = w.Close()
	require.ErrorIs(t, err, ErrClosed)

	r, err := Open(fs, "v.sst", ReaderOptions{})
	require.NoError(t, err)
	defer r.Close()
	cases := []struct {
		key   string
		seq   uint64
		val   string
		kind  KeyKind
		found bool
	}{
		{"a", math.MaxUint64, "a30", KeyKindSet, true},
		{"a", 31, "a30", KeyKindSet, true},
		{"a", 30, "", KeyKindDelete, true},
		{"a", 20, "a10", KeyKindSet, true},
		{"a", 10, "", 0, false},
		{"b", 6, "", KeyKindDelete, true},
		{"b", 5, "", 0, false},
	}
	for _, c := range cases {
		v, kind, found, err := r.GetInternal([]byte(c.key), c.seq)
		require.NoError(t, err)
		require.Equal(t, c.found, found, "%s@%d", c.key, c.seq)
		if found {
			require.Equal(t, c.kind, kind, "%s@%d", c.key, c.seq)
			require.Equal(t, c.val, string(v))
		}
	}
	_, ok, err := r.Get([]byte("b"))
	require.NoError(t, err)
	require.False(t, ok)
	v, ok, err := r.Get([]byte("a"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "a30", string(v))
	// A version invisible at the snapshot is still a true positive, not an adaptation.
	require.Zero(t, r.Metrics().FalsePositiveProbes)

	it, err := r.NewIter([]byte("a"), []byte("b"))
	require.NoError(t, err)
	var got []InternalKey
	for ok := it.Last(); ok; ok = it.Prev() {
		k := it.Key()
		got = append(got, InternalKey{UserKey: append([]byte(nil), k.UserKey...), Seq: k.Seq, Kind: k.Kind})
	}
	require.NoError(t, it.Close())
	require.Equal(t, []InternalKey{{UserKey: []byte("a"), Seq: 10, Kind: KeyKindSet}, {UserKey: []byte("a"), Seq: 20, Kind: KeyKindDelete}, {UserKey: []byte("a"), Seq: 30, Kind: KeyKindSet}}, got)
}

func TestBadInput(t *testing.T) {
	_, err := Create(nil, "x", WriterOptions{})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = Create(vfs.NewMem(), "", WriterOptions{})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = Create(vfs.NewMem(), "x", WriterOptions{BlockSize: -1})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = Open(nil, "x", ReaderOptions{})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = Open(vfs.NewMem(), "missing", ReaderOptions{})
	require.Error(t, err)

	fs := vfs.NewMem()
	f, err := fs.Create("garbage", vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, 1000))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = Open(fs, "garbage", ReaderOptions{})
	require.ErrorIs(t, err, ErrCorrupt)

	w, err := Create(fs, "ab.sst", WriterOptions{Policy: filterpolicy.NewBloom(10)})
	require.NoError(t, err)
	require.NoError(t, w.Add(InternalKey{UserKey: []byte("a"), Seq: 1, Kind: KeyKindSet}, nil))
	require.NoError(t, w.Abort())
	_, err = fs.Stat("ab.sst")
	require.Error(t, err)
	require.ErrorIs(t, w.Abort(), ErrClosed)
}

// TestBlockReadCounters checks DataBlockReads against the lookups done:
// without a cache every probe reads one index and one data block, a filter
// negative reads nothing; with a warm cache repeated probes read nothing.
func TestBlockReadCounters(t *testing.T) {
	n := 20000
	fs := vfs.NewMem()
	writeTable(t, fs, "t.sst", mustPolicy(t, "bloom", 5), n)

	r, err := Open(fs, "t.sst", ReaderOptions{})
	require.NoError(t, err)
	require.Zero(t, r.Metrics().DataBlockReads, "Open reads no data block")
	for i := 0; i < 5000; i++ {
		_, _, err := r.Get(absentKey(i))
		require.NoError(t, err)
		_, _, err = r.Get(storedKey(i))
		require.NoError(t, err)
	}
	m := r.Metrics()
	probes := m.FalsePositiveProbes + m.TruePositiveProbes
	require.Equal(t, probes, m.DataBlockReads)
	require.Equal(t, probes, m.IndexBlockReads)
	require.Equal(t, m.FilterChecks, probes+m.FilterNegatives)
	require.NoError(t, r.Close())

	r, err = Open(fs, "t.sst", ReaderOptions{Cache: pebble.NewCache(16 << 20), FileNum: 9})
	require.NoError(t, err)
	for pass := 0; pass < 2; pass++ {
		for i := 0; i < 5000; i++ {
			_, _, err := r.Get(storedKey(i))
			require.NoError(t, err)
		}
		if pass == 0 {
			m = r.Metrics()
			require.Positive(t, m.DataBlockReads)
			require.Less(t, m.DataBlockReads, uint64(5000), "the cache serves repeated blocks")
		}
	}
	require.Equal(t, m.DataBlockReads, r.Metrics().DataBlockReads, "a warm cache reads nothing")
	require.NoError(t, r.Close())
}

// TestFilterBlockOnDisk checks what the reader relies on in Pebble's
// writer: the filter block is stored uncompressed under
// "fullfilter.adaptkv.<kind>", its handle excludes the 5-byte block trailer
// (compression indicator 0 = none, then a 4-byte checksum), and for
// adaptive kinds it holds header, local state and remote section, whose
// size TableInfo.RemoteSize reports.
func TestFilterBlockOnDisk(t *testing.T) {
	for _, name := range []string{"bloom", "taf"} {
		fs := vfs.NewMem()
		info := writeTable(t, fs, "t.sst", mustPolicy(t, name, 3), 3000)
		off, length, h := filterPos(t, fs, "t.sst")
		require.Equal(t, uint64(h.RemoteSize()), info.RemoteSize)
		require.Equal(t, name == "taf", info.RemoteSize >= 8*3000, "8 bytes a key at least")
		b := readAll(t, fs, "t.sst")
		require.LessOrEqual(t, off+length+5, int64(len(b)))
		require.Equal(t, byte(0), b[off+length], "filter block must be uncompressed")
		block := b[off : off+length]
		_, _, err := filterpolicy.VerifyBlock(block)
		require.NoError(t, err)
		require.Equal(t, name == "taf", h.HasRemote)
		if h.HasRemote {
			require.Equal(t, int(length), h.LocalEnd()+h.RemoteSize())
		} else {
			require.Equal(t, int(length), h.LocalEnd())
		}
	}
}

// TestFilterLocalStateOnCacheLine: the local state a Reader queries in
// place starts a cache line, read from the table (a static block whole, an
// adaptive one's header and local state) or from a saved state file (its
// payload), so that a kind's probing units of a cache line or half of one
// (bloom's lines, the Prefix Filter's bins) never straddle two lines.
func TestFilterLocalStateOnCacheLine(t *testing.T) {
	for _, name := range []string{"bloom", "prefix", "aprefix"} {
		fs := vfs.NewMem()
		writeTable(t, fs, "t.sst", mustPolicy(t, name, 3), 3000)
		off, length, _ := filterPos(t, fs, "t.sst")
		f, err := fs.Open("t.sst")
		require.NoError(t, err)
		var tf tableFilter
		block, _, ok, err := tf.readLocal(f, filterpolicy.MetaBlockName(name), off, length)
		require.NoError(t, err)
		require.True(t, ok, "%s: %v", name, tf.filterErr)
		require.True(t, filter.IsAligned(block, filterpolicy.HeaderSize), name)
		require.NoError(t, f.Close())
	}

	fs := vfs.NewMem()
	writeTable(t, fs, "t.sst", mustPolicy(t, "aprefix", 3), 3000)
	r, err := Open(fs, "t.sst", ReaderOptions{StatePath: "t.state"})
	require.NoError(t, err)
	for i := 0; r.Metrics().Adaptations == 0; i++ {
		require.Less(t, i, 100_000, "no false positive to adapt to")
		_, _, err := r.Get(absentKey(i))
		require.NoError(t, err)
	}
	require.NoError(t, r.SaveState())
	raw := readAll(t, fs, "t.state")
	b := stateBuffer(len(raw))
	copy(b, raw)
	payload, _, err := r.decodeState(b)
	require.NoError(t, err)
	require.True(t, filter.IsAligned(payload, 0))
	require.NoError(t, r.Close())
}

func TestEmptyTable(t *testing.T) {
	for _, name := range filterpolicy.Names() {
		fs := vfs.NewMem()
		info := writeTable(t, fs, "e.sst", mustPolicy(t, name, 1), 0)
		require.Zero(t, info.NumEntries)
		r, err := Open(fs, "e.sst", ReaderOptions{StatePath: "e.state"})
		require.NoError(t, err, name)
		require.NoError(t, r.FilterError(), name)
		_, ok, err := r.Get([]byte("x"))
		require.NoError(t, err)
		require.False(t, ok)
		it, err := r.NewIter(nil, nil)
		require.NoError(t, err)
		require.False(t, it.First())
		require.NoError(t, it.Close())
		require.NoError(t, r.Close())
	}
}

// TestFormats writes the same keys in each table format, with a static and
// an adaptive filter: the file is in the format asked for, and reading it
// gives the right answers (Get of every stored and absent key, twice: the
// adaptive filter fixes its false positives, the static one repeats them;
// a full scan; PreAdapt). An unknown format is refused.
func TestFormats(t *testing.T) {
	const n = 20_000
	for _, format := range []Format{FormatColumnar, FormatRow} {
		for _, policy := range []string{"bloom", "taf"} {
			t.Run(format.String()+"/"+policy, func(t *testing.T) {
				fs := vfs.NewMem()
				w, err := Create(fs, "t.sst", WriterOptions{Policy: mustPolicy(t, policy, 5), Format: format})
				require.NoError(t, err)
				for i := 0; i < n; i++ {
					require.NoError(t, w.Add(InternalKey{UserKey: storedKey(i), Seq: uint64(i + 1), Kind: KeyKindSet}, value(i)))
				}
				_, err = w.Close()
				require.NoError(t, err)

				r, err := Open(fs, "t.sst", ReaderOptions{Cache: pebble.NewCache(1 << 20)})
				require.NoError(t, err)
				defer r.Close()
				got, err := r.pr.TableFormat()
				require.NoError(t, err)
				want, err := format.pebbleFormat()
				require.NoError(t, err)
				require.Equal(t, want, got)
				require.Equal(t, format, r.Format())
				var fp [2]uint64 // false-positive probes after each round
				for round := 0; round < 2; round++ {
					for i := 0; i < n; i++ {
						v, ok, err := r.Get(storedKey(i))
						require.NoError(t, err)
						require.True(t, ok, "key %d", i)
						require.Equal(t, value(i), v)
						_, ok, err = r.Get(absentKey(i))
						require.NoError(t, err)
						require.False(t, ok)
					}
					fp[round] = r.Metrics().FalsePositiveProbes
				}
				require.Positive(t, fp[0])
				if policy == "taf" {
					// Each false positive of the first round was fixed.
					require.Equal(t, fp[0], fp[1])
					require.Equal(t, fp[0], r.Metrics().Adaptations)
					res, err := r.PreAdapt([][]byte{storedKey(7), absentKey(n + 3)})
					require.NoError(t, err)
					require.Equal(t, 2, res.Checked)
				} else {
					require.Equal(t, 2*fp[0], fp[1], "a static filter repeats its false positives")
				}
				it, err := r.NewIter(nil, nil)
				require.NoError(t, err)
				requireFullScan(t, it, n)
				require.NoError(t, it.Close())
			})
		}
	}
	_, err := Create(vfs.NewMem(), "t.sst", WriterOptions{Format: FormatRow + 1})
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.False(t, (FormatRow + 1).Valid())
	for _, f := range []Format{FormatColumnar, FormatRow} {
		require.True(t, f.Valid())
		got, err := ParseFormat(f.String())
		require.NoError(t, err)
		require.Equal(t, f, got)
	}
	_, err = ParseFormat("diagonal")
	require.ErrorIs(t, err, ErrInvalidOptions)
}

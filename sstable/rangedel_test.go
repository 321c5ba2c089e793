package sstable

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/rangedel"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestRangeDelsRoundTrip writes range tombstones beside point keys (and
// alone) with every policy and reads them back as written, with the
// table's bounds widened to them and the point keys still found.
func TestRangeDelsRoundTrip(t *testing.T) {
	set := rangedel.Build([]rangedel.Tombstone{
		{Start: []byte("a"), End: []byte("key000000000010"), Seq: 90},
		{Start: []byte("key000000000004"), End: []byte("zz"), Seq: 95},
		{Start: []byte("key000000000006"), End: []byte("key000000000008"), Seq: 7},
	})
	for _, name := range filterpolicy.Names() {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			for _, points := range []int{0, 1000} {
				for _, format := range []Format{FormatColumnar, FormatRow} {
					path := filepath.Join("t", format.String(), name)
					require.NoError(t, fs.MkdirAll(filepath.Dir(path), 0o755))
					w, err := Create(fs, path, WriterOptions{Policy: mustPolicy(t, name, 5), Format: format})
					require.NoError(t, err)
					// Fragments may come before, among or after the points.
					frags := set.Fragments()
					require.NoError(t, w.AddRangeDels(frags[:1]))
					for i := 0; i < points; i++ {
						require.NoError(t, w.Add(InternalKey{UserKey: storedKey(i), Seq: uint64(i + 1), Kind: KeyKindSet}, value(i)))
					}
					require.NoError(t, w.AddRangeDels(frags[1:]))
					info, err := w.Close()
					require.NoError(t, err)
					require.Equal(t, uint64(points), info.NumEntries)
					require.Equal(t, uint64(1+2+3+2+1), info.RangeDels, "fragments x sequence numbers")
					require.Equal(t, InternalKey{UserKey: []byte("a"), Seq: 90, Kind: base.KeyKindRangeDelete}, info.Smallest)
					require.Equal(t, InternalKey{UserKey: []byte("zz"), Seq: MaxSeq, Kind: base.KeyKindRangeDelete}, info.Largest)

					r, err := Open(fs, path, ReaderOptions{})
					require.NoError(t, err)
					require.Equal(t, set.Fragments(), r.RangeDels().Fragments())
					for i := 0; i < points; i++ {
						v, kind, vseq, found, err := r.GetVersion(storedKey(i), MaxSeq)
						require.NoError(t, err)
						require.True(t, found, "no false negative: key %d", i)
						require.Equal(t, KeyKindSet, kind)
						require.Equal(t, uint64(i+1), vseq)
						require.Equal(t, value(i), v)
					}
					for i := 0; i < 200; i++ {
						_, _, found, err := r.GetInternal(absentKey(i), MaxSeq)
						require.NoError(t, err)
						require.False(t, found)
					}
					require.NoError(t, r.Close())
				}
			}
		})
	}
}

func TestRangeDelsInvalid(t *testing.T) {
	fs := vfs.NewMem()
	w, err := Create(fs, "t", WriterOptions{})
	require.NoError(t, err)
	defer w.Abort()
	bad := []rangedel.Fragment{
		{Start: []byte("b"), End: []byte("a"), Seqs: []uint64{1}},
		{Start: []byte("a"), End: []byte("b")},
		{Start: []byte("a"), End: []byte("b"), Seqs: []uint64{1, 2}},
		{Start: []byte("a"), End: []byte("b"), Seqs: []uint64{MaxSeq + 1}},
	}
	for _, f := range bad {
		require.ErrorIs(t, w.AddRangeDels([]rangedel.Fragment{f}), ErrInvalidKey, "%+v", f)
	}
	require.NoError(t, w.AddRangeDels([]rangedel.Fragment{{Start: []byte("c"), End: []byte("e"), Seqs: []uint64{3}}}))
	err = w.AddRangeDels([]rangedel.Fragment{{Start: []byte("d"), End: []byte("f"), Seqs: []uint64{3}}})
	require.True(t, errors.Is(err, ErrOutOfOrder), "%v", err)
}

package manifest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/stretchr/testify/require"
)

// randEdit is an edit with random counters, deletions and additions.
func randEdit(rng *rand.Rand) *VersionEdit {
	e := &VersionEdit{}
	if rng.IntN(2) == 0 {
		e.HasLogNum, e.LogNum = true, rng.Uint64()
	}
	if rng.IntN(2) == 0 {
		e.HasNextFile, e.NextFileNum = true, rng.Uint64N(1<<40)
	}
	if rng.IntN(2) == 0 {
		e.HasLastSeq, e.LastSeq = true, rng.Uint64N(base.MaxSeq)
	}
	for i := rng.IntN(4); i > 0; i-- {
		e.Deleted = append(e.Deleted, DeletedTable{Level: rng.IntN(NumLevels), FileNum: rng.Uint64N(1 << 30)})
	}
	for i := rng.IntN(4); i > 0; i-- {
		key := func() base.InternalKey {
			return base.InternalKey{UserKey: fmt.Appendf(nil, "k%d", rng.IntN(1000)), Seq: rng.Uint64N(base.MaxSeq),
				Kind: []base.KeyKind{base.KeyKindSet, base.KeyKindDelete, base.KeyKindRangeDelete}[rng.IntN(3)]}
		}
		m := &base.TableMeta{FileNum: rng.Uint64N(1 << 30), Size: 1 + rng.Uint64N(1<<30), Smallest: key(), Largest: key(), HasRangeDels: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			m.RemoteSize = 1 + rng.Uint64N(m.Size)
		}
		e.Added = append(e.Added, NewTable{Level: rng.IntN(NumLevels), Meta: m})
	}
	return e
}

// TestEditRoundTrip: DecodeEdit reads back what Encode wrote, and every
// truncation of a record is corruption, never a panic or a shorter edit
// taken for whole (a cut inside the last table's entry).
func TestEditRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 500; i++ {
		e := randEdit(rng)
		b := e.Encode()
		got, err := DecodeEdit(b)
		require.NoError(t, err)
		if len(e.Deleted) == 0 {
			e.Deleted = nil
		}
		require.Equal(t, e, got)
		if len(e.Added) > 0 {
			for n := len(b) - 1; n > len(b)-8 && n > 0; n-- {
				_, err := DecodeEdit(b[:n])
				require.ErrorIs(t, err, base.ErrCorruption, "cut at %d of %d", n, len(b))
			}
		}
	}
	_, err := DecodeEdit([]byte{99})
	require.ErrorIs(t, err, base.ErrCorruption, "unknown tag")
	_, err = DecodeEdit((&VersionEdit{Deleted: []DeletedTable{{Level: NumLevels, FileNum: 1}}}).Encode())
	require.ErrorIs(t, err, base.ErrCorruption, "level out of range")
}

// TestEditRemoteSize: a table whose filter has no remote section is
// written under the tags older stores wrote (bytes as before), one with a
// remote section under the remote tags; a remote section that is empty or
// larger than its table is corruption.
func TestEditRemoteSize(t *testing.T) {
	key := func(k string) base.InternalKey {
		return base.InternalKey{UserKey: []byte(k), Seq: 7, Kind: base.KeyKindSet}
	}
	for _, rd := range []bool{false, true} {
		m := &base.TableMeta{FileNum: 9, Size: 1000, Smallest: key("a"), Largest: key("b"), HasRangeDels: rd}
		e := &VersionEdit{Added: []NewTable{{Level: 6, Meta: m}}}
		static := e.Encode()
		require.Equal(t, map[bool]byte{false: tagAdded, true: tagAddedRangeDels}[rd], static[0])
		m.RemoteSize = 80
		b := e.Encode()
		require.Equal(t, map[bool]byte{false: tagAddedRemote, true: tagAddedRangeDelsRemote}[rd], b[0])
		require.Len(t, b, len(static)+1, "one more uvarint")
		got, err := DecodeEdit(b)
		require.NoError(t, err)
		require.Equal(t, uint64(80), got.Added[0].Meta.RemoteSize)
		require.Equal(t, rd, got.Added[0].Meta.HasRangeDels)
		require.Equal(t, uint64(920), got.Added[0].Meta.LevelSize())

		for _, bad := range []uint64{1001, 0} {
			m.RemoteSize = 80
			b := e.Encode()
			// The remote size's varint is the byte after the table's
			// size (1000: two bytes) at offset 2+1+2.
			b[5] = byte(bad % 128)
			if bad > 127 {
				b = append(b[:5:5], append([]byte{byte(bad%128) | 0x80, byte(bad / 128)}, b[6:]...)...)
			}
			_, err := DecodeEdit(b)
			require.ErrorIs(t, err, base.ErrCorruption, "remote size %d", bad)
		}
	}
}

// TestApply: L0 stays oldest first by file number, lower levels by
// smallest key; an edit that overlaps two tables of a lower level or
// deletes a table the level does not hold is corruption; SnapshotEdit
// rebuilds the levels from nothing.
func TestApply(t *testing.T) {
	tb := func(fn uint64, lo, hi string) *base.TableMeta { return table(fn, lo, hi) }
	var levels [NumLevels][]*base.TableMeta
	levels, err := Apply(levels, &VersionEdit{Added: []NewTable{
		{Level: 0, Meta: tb(5, "a", "z")}, {Level: 0, Meta: tb(3, "g", "h")},
		{Level: 6, Meta: tb(2, "m", "p")}, {Level: 6, Meta: tb(1, "a", "f")},
	}})
	require.NoError(t, err)
	require.Equal(t, []uint64{3, 5}, fileNums(levels[0]))
	require.Equal(t, []uint64{1, 2}, fileNums(levels[6]))

	_, err = Apply(levels, &VersionEdit{Added: []NewTable{{Level: 6, Meta: tb(7, "e", "g")}}})
	require.ErrorIs(t, err, base.ErrCorruption, "overlaps table 1")
	_, err = Apply(levels, &VersionEdit{Deleted: []DeletedTable{{Level: 5, FileNum: 1}}})
	require.ErrorIs(t, err, base.ErrCorruption, "table 1 is in L6")

	moved, err := Apply(levels, &VersionEdit{
		Deleted: []DeletedTable{{Level: 0, FileNum: 3}},
		Added:   []NewTable{{Level: 6, Meta: tb(3, "g", "h")}},
	})
	require.NoError(t, err)
	require.Equal(t, []uint64{5}, fileNums(moved[0]))
	require.Equal(t, []uint64{1, 3, 2}, fileNums(moved[6]))
	require.Equal(t, []uint64{3, 5}, fileNums(levels[0]), "Apply leaves its input alone")

	var empty [NumLevels][]*base.TableMeta
	rebuilt, err := Apply(empty, SnapshotEdit(moved, 1, 2, 3))
	require.NoError(t, err)
	require.Equal(t, moved, rebuilt)

	v := NewVersion(moved)
	require.Equal(t, [][]*base.TableMeta{moved[6]}, v.BelowL0)
	require.Len(t, v.L0Sublevels, 1)
}

func fileNums(ts []*base.TableMeta) []uint64 {
	var out []uint64
	for _, t := range ts {
		out = append(out, t.FileNum)
	}
	return out
}

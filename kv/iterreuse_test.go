package kv

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// iterKeys collects the keys an iterator walks forward from First.
func iterKeys(t *testing.T, it *Iterator) []string {
	t.Helper()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, string(it.Key()))
	}
	require.NoError(t, it.Error())
	return out
}

// reuseDB is a store with keys k00..k19 spread over L0, a lower level and
// the memtable.
func reuseDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open("db", &Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	for i := 0; i < 20; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "k%02d", i), fmt.Appendf(nil, "v%d", i), NoSync))
		switch i {
		case 7:
			require.NoError(t, db.Compact(nil, nil))
		case 13:
			require.NoError(t, db.Flush())
		}
	}
	return db
}

func keyRange(a, b int) []string {
	var out []string
	for i := a; i < b; i++ {
		out = append(out, fmt.Sprintf("k%02d", i))
	}
	return out
}

// TestIteratorCopiesBounds: NewIter and SetBounds copy the bounds, so the
// caller may overwrite its slices at once.
func TestIteratorCopiesBounds(t *testing.T) {
	db := reuseDB(t)
	defer db.Close()
	lo, hi := []byte("k03"), []byte("k08")
	it, err := db.NewIter(&IterOptions{LowerBound: lo, UpperBound: hi})
	require.NoError(t, err)
	copy(lo, "k10")
	copy(hi, "k19")
	require.Equal(t, keyRange(3, 8), iterKeys(t, it))

	copy(lo, "k12")
	copy(hi, "k15")
	it.SetBounds(lo, hi)
	copy(lo, "k00")
	copy(hi, "k01")
	require.Equal(t, keyRange(12, 15), iterKeys(t, it))
	require.NoError(t, it.Close())
}

// TestIteratorSetBounds: SetBounds leaves the iterator at no key and later
// positioning calls honour the new bounds, in both directions; nil removes
// a bound, an empty upper bound admits nothing. The view stays the one the
// iterator was created with.
func TestIteratorSetBounds(t *testing.T) {
	db := reuseDB(t)
	defer db.Close()
	it, err := db.NewIter(&IterOptions{UpperBound: []byte("k05")})
	require.NoError(t, err)
	defer it.Close()
	require.True(t, it.Last())
	require.Equal(t, "k04", string(it.Key()))
	require.NoError(t, db.Set([]byte("k055"), []byte("later"), NoSync)) // not in the view

	it.SetBounds([]byte("k05"), []byte("k09"))
	require.False(t, it.Valid())
	require.Nil(t, it.Key())
	require.False(t, it.Next(), "Next on an unpositioned iterator")
	require.Equal(t, keyRange(5, 9), iterKeys(t, it))
	require.True(t, it.Last())
	require.Equal(t, "k08", string(it.Key()))
	require.True(t, it.SeekLT([]byte("k99")))
	require.Equal(t, "k08", string(it.Key()))
	require.False(t, it.SeekPrefixGE([]byte("k10")), "outside the bounds")
	require.True(t, it.SeekPrefixGE([]byte("k06")))

	it.SetBounds(nil, nil)
	require.Equal(t, keyRange(0, 20), iterKeys(t, it))
	it.SetBounds([]byte("k18"), nil)
	require.Equal(t, keyRange(18, 20), iterKeys(t, it))
	it.SetBounds(nil, []byte{})
	require.Empty(t, iterKeys(t, it))
	require.False(t, it.Last())
}

// TestIteratorClone: a clone sees the same view and bounds as its source
// (not writes, flushes or compactions after it), positions independently,
// and outlives the source's Close; after DB.Close, Clone fails.
func TestIteratorClone(t *testing.T) {
	db := reuseDB(t)
	it, err := db.NewIter(&IterOptions{LowerBound: []byte("k02"), UpperBound: []byte("k17")})
	require.NoError(t, err)
	require.True(t, it.SeekGE([]byte("k10")))

	for i := 0; i < 20; i++ {
		require.NoError(t, db.Delete(fmt.Appendf(nil, "k%02d", i), NoSync))
	}
	require.NoError(t, db.Compact(nil, nil))
	c, err := it.Clone()
	require.NoError(t, err)
	require.False(t, c.Valid(), "a clone starts unpositioned")
	require.Equal(t, "k10", string(it.Key()), "the source keeps its position")
	require.NoError(t, it.Close())
	require.Equal(t, keyRange(2, 17), iterKeys(t, c))
	require.True(t, c.Last())
	require.Equal(t, "k16", string(c.Key()))
	require.Equal(t, "v16", string(c.Value()))
	c2, err := c.Clone()
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.Equal(t, keyRange(2, 17), iterKeys(t, c2))

	fresh, err := db.NewIter(nil)
	require.NoError(t, err)
	require.Empty(t, iterKeys(t, fresh), "the store itself holds no key now")
	require.NoError(t, fresh.Close())

	_, err = (&Iterator{closed: true}).Clone()
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, db.Close())
	_, err = c2.Clone()
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, c2.Close())
}

// TestClosedIteratorStaysClosed: iterators reuse the state of closed ones;
// a closed Iterator never reaches the state another iterator now holds.
func TestClosedIteratorStaysClosed(t *testing.T) {
	db := reuseDB(t)
	defer db.Close()
	old, err := db.NewIter(nil)
	require.NoError(t, err)
	require.True(t, old.First())
	require.NoError(t, old.Close())
	for n := 0; n < 10; n++ {
		it, err := db.NewIter(&IterOptions{LowerBound: []byte("k05")})
		require.NoError(t, err)
		require.True(t, it.First())
		require.False(t, old.First())
		require.False(t, old.Valid())
		require.Nil(t, old.Key())
		require.Nil(t, old.Value())
		require.False(t, old.SeekGE([]byte("k00")))
		require.False(t, old.SeekPrefixGE([]byte("k00")))
		old.SetBounds(nil, nil)
		require.ErrorIs(t, old.Error(), ErrClosed)
		require.ErrorIs(t, old.Close(), ErrClosed)
		require.True(t, it.Valid(), "a closed iterator moved a live one")
		require.Equal(t, "k05", string(it.Key()))
		require.True(t, it.Next())
		require.Equal(t, "k06", string(it.Key()))
		require.NoError(t, it.Close())
	}
}

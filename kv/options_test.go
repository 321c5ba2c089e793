package kv

import (
	"os"
	"testing"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/filterpolicy/filter"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// wrappedPolicy is a Policy of a type of its own around a filterpolicy
// policy (e.g. to log or count its calls).
type wrappedPolicy struct{ filterpolicy.Policy }

// lyingPolicy claims to be one kind and builds another: tables cannot be
// written with it.
type lyingPolicy struct {
	filterpolicy.Policy
	other filterpolicy.Policy
}

func (l lyingPolicy) FilterKind() filter.Kind { return l.other.FilterKind() }

// TestOpenRejectsForeignFilterPolicy: an Options.Filter that cannot write
// tables (its kind is not what its name says) is rejected by Open, before
// it creates anything (it used to pass Open, and then the first flush
// failed, which made every later write fail with the sticky error). A
// policy of a type of its own that wraps a real one works (issue 11).
func TestOpenRejectsForeignFilterPolicy(t *testing.T) {
	bloom, err := filterpolicy.ByName("bloom")
	require.NoError(t, err)
	taf, err := filterpolicy.ByName("taf")
	require.NoError(t, err)
	fs := vfs.NewMem()
	_, err = Open("db", &Options{FS: fs, Filter: lyingPolicy{bloom, taf}})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = fs.Stat("db")
	require.ErrorIs(t, err, os.ErrNotExist, "a rejected Open creates nothing")

	// Policies that write tables: filterpolicy's own and wrappers of them.
	none, err := filterpolicy.ByName("none")
	require.NoError(t, err)
	for _, p := range []filterpolicy.Policy{bloom, filterpolicy.NewBloom(12), none, wrappedPolicy{none}, wrappedPolicy{bloom}, wrappedPolicy{taf}} {
		db, err := Open("db", &Options{FS: fs, Filter: p})
		require.NoError(t, err, "%T %s", p, p.Kind())
		require.NoError(t, db.Set([]byte("a"), []byte("1"), Sync))
		require.NoError(t, db.Flush())
		require.NoError(t, db.Set([]byte("b"), []byte("2"), Sync), "no sticky flush error")
		v, err := db.Get([]byte("a"))
		require.NoError(t, err)
		require.Equal(t, "1", string(v))
		require.NoError(t, db.Close())
	}
}

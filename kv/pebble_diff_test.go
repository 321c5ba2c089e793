package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestAgainstPebble is a metamorphic test: the same random operations
// (Set, Delete, DeleteRange, batches of them, flushes, compactions,
// snapshots, reopens) go to the store and to a pebble.DB, and every Get
// and every iteration (bounded, forward and backward, with bounds changed
// on the way and through clones, on the latest state and on snapshots)
// must give the same answer from both.
func TestAgainstPebble(t *testing.T) {
	nops := 20_000
	if testing.Short() {
		nops = 4_000
	}
	seed := *flagModelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -kv.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0xd1ff))
	opts := &Options{FS: vfs.NewMem(), MemTableSize: 16 << 10, TargetFileSize: 8 << 10, L0CompactionThreshold: 2, BlockCacheSize: 256 << 10}
	db, err := Open("db", opts)
	require.NoError(t, err)
	defer func() { db.Close() }()
	pdb, err := pebble.Open("pdb", &pebble.Options{FS: vfs.NewMem(), MemTableSize: 64 << 10})
	require.NoError(t, err)
	defer pdb.Close()

	const keySpace = 800
	key := func() []byte {
		if rng.IntN(10) == 0 {
			return fmt.Appendf(nil, "k%04d.%d", rng.IntN(keySpace), rng.IntN(10))
		}
		return fmt.Appendf(nil, "k%04d", rng.IntN(keySpace))
	}
	keyRange := func() ([]byte, []byte) {
		a := rng.IntN(keySpace)
		return fmt.Appendf(nil, "k%04d", a), fmt.Appendf(nil, "k%04d", a+1+rng.IntN(40))
	}
	op, what := 0, ""
	ctx := func() string { return fmt.Sprintf("seed %d op %d (%s)", seed, op, what) }

	type pair struct {
		s  *Snapshot
		ps *pebble.Snapshot
	}
	var snaps []pair
	closeSnaps := func() {
		for _, p := range snaps {
			require.NoError(t, p.s.Close())
			require.NoError(t, p.ps.Close())
		}
		snaps = nil
	}
	defer closeSnaps()
	checkGet := func(get func([]byte) ([]byte, error), pget func([]byte) ([]byte, func(), error), k []byte) {
		v, err := get(k)
		pv, closer, perr := pget(k)
		if errors.Is(perr, pebble.ErrNotFound) {
			require.ErrorIs(t, err, ErrNotFound, "get %q: %s", k, ctx())
			return
		}
		require.NoError(t, perr)
		require.NoError(t, err, "get %q: %s", k, ctx())
		require.Equal(t, string(pv), string(v), "get %q: %s", k, ctx())
		closer()
	}
	checkIter := func(newIter func(*IterOptions) (*Iterator, error), pnewIter func(*pebble.IterOptions) (*pebble.Iterator, error)) {
		var lo, hi []byte
		if rng.IntN(2) == 0 {
			lo, hi = keyRange()
		}
		it, err := newIter(&IterOptions{LowerBound: lo, UpperBound: hi})
		require.NoError(t, err)
		pit, err := pnewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		require.NoError(t, err)
		var ok, pok bool
		position := func() {
			switch rng.IntN(3) {
			case 0:
				ok, pok = it.First(), pit.First()
			case 1:
				ok, pok = it.Last(), pit.Last()
			default:
				k := key()
				ok, pok = it.SeekGE(k), pit.SeekGE(k)
			}
		}
		position()
		for step := 0; ; step++ {
			require.Equal(t, pok, ok, "iter [%q, %q) step %d: %s", lo, hi, step, ctx())
			if !ok || step == 30 {
				break
			}
			require.Equal(t, string(pit.Key()), string(it.Key()), "iter step %d: %s", step, ctx())
			require.Equal(t, string(pit.Value()), string(it.Value()), "iter step %d: %s", step, ctx())
			switch r := rng.IntN(30); {
			case r == 0: // new bounds, then a new position
				lo, hi = nil, nil
				if rng.IntN(2) == 0 {
					lo, hi = keyRange()
				}
				it.SetBounds(lo, hi)
				pit.SetBounds(lo, hi)
				require.False(t, it.Valid(), "Valid after SetBounds: %s", ctx())
				position()
			case r == 1: // go on with clones, then a new position
				cit, err := it.Clone()
				require.NoError(t, err)
				pcit, err := pit.Clone(pebble.CloneOptions{})
				require.NoError(t, err)
				require.NoError(t, it.Close())
				require.NoError(t, pit.Close())
				it, pit = cit, pcit
				position()
			case r < 11:
				ok, pok = it.Prev(), pit.Prev()
			default:
				ok, pok = it.Next(), pit.Next()
			}
		}
		require.NoError(t, it.Close())
		require.NoError(t, pit.Close())
	}
	// checkSeekPrefix compares SeekPrefixGE (whole keys as prefixes: an
	// existence check) and the Next after it.
	checkSeekPrefix := func(newIter func(*IterOptions) (*Iterator, error), pnewIter func(*pebble.IterOptions) (*pebble.Iterator, error)) {
		it, err := newIter(nil)
		require.NoError(t, err)
		pit, err := pnewIter(nil)
		require.NoError(t, err)
		for n := 0; n < 5; n++ {
			k := key()
			ok, pok := it.SeekPrefixGE(k), pit.SeekPrefixGE(k)
			require.Equal(t, pok, ok, "SeekPrefixGE %q: %s", k, ctx())
			if ok {
				require.Equal(t, string(pit.Key()), string(it.Key()), ctx())
				require.Equal(t, string(pit.Value()), string(it.Value()), ctx())
				require.Equal(t, pit.Next(), it.Next(), "Next after SeekPrefixGE %q: %s", k, ctx())
			}
		}
		require.NoError(t, it.Close())
		require.NoError(t, pit.Close())
	}
	pget := func(g func([]byte) ([]byte, interface{ Close() error }, error)) func([]byte) ([]byte, func(), error) {
		return func(k []byte) ([]byte, func(), error) {
			v, c, err := g(k)
			if err != nil {
				return nil, nil, err
			}
			return bytes.Clone(v), func() { c.Close() }, nil
		}
	}
	dbGet := pget(func(k []byte) ([]byte, interface{ Close() error }, error) { return pdb.Get(k) })
	for op = 0; op < nops; op++ {
		switch r := rng.IntN(100); {
		case r < 30:
			what = "set"
			k, v := key(), fmt.Appendf(nil, "v%d", op)
			require.NoError(t, db.Set(k, v, NoSync))
			require.NoError(t, pdb.Set(k, v, pebble.NoSync))
		case r < 37:
			what = "delete"
			k := key()
			require.NoError(t, db.Delete(k, NoSync))
			require.NoError(t, pdb.Delete(k, pebble.NoSync))
		case r < 42:
			what = "delete-range"
			a, b := keyRange()
			require.NoError(t, db.DeleteRange(a, b, NoSync))
			require.NoError(t, pdb.DeleteRange(a, b, pebble.NoSync))
		case r < 47:
			what = "batch"
			b, pb := NewBatch(), pdb.NewBatch()
			for n := 1 + rng.IntN(10); n > 0; n-- {
				switch x := rng.IntN(10); {
				case x < 2:
					a, e := keyRange()
					require.NoError(t, b.DeleteRange(a, e))
					require.NoError(t, pb.DeleteRange(a, e, nil))
				case x < 4:
					k := key()
					require.NoError(t, b.Delete(k))
					require.NoError(t, pb.Delete(k, nil))
				default:
					k, v := key(), fmt.Appendf(nil, "b%d-%d", op, n)
					require.NoError(t, b.Set(k, v))
					require.NoError(t, pb.Set(k, v, nil))
				}
			}
			require.NoError(t, db.Apply(b, NoSync))
			require.NoError(t, pdb.Apply(pb, pebble.NoSync))
		case r < 70:
			what = "get"
			checkGet(db.Get, dbGet, key())
		case r < 75:
			what = "seek-prefix"
			checkSeekPrefix(db.NewIter, pdb.NewIter)
		case r < 85:
			what = "iter"
			checkIter(db.NewIter, pdb.NewIter)
		case r < 93:
			what = "snapshot"
			switch {
			case len(snaps) < 3 && rng.IntN(3) == 0:
				snaps = append(snaps, pair{db.NewSnapshot(), pdb.NewSnapshot()})
			case len(snaps) > 0 && rng.IntN(4) == 0:
				p := snaps[0]
				require.NoError(t, p.s.Close())
				require.NoError(t, p.ps.Close())
				snaps = snaps[1:]
			case len(snaps) > 0:
				p := snaps[rng.IntN(len(snaps))]
				checkGet(p.s.Get, pget(func(k []byte) ([]byte, interface{ Close() error }, error) { return p.ps.Get(k) }), key())
				checkIter(p.s.NewIter, p.ps.NewIter)
				checkSeekPrefix(p.s.NewIter, p.ps.NewIter)
			}
		case r < 96:
			what = "flush"
			require.NoError(t, db.Flush())
		case r < 98:
			what = "compact"
			a, b := keyRange()
			require.NoError(t, db.Compact(a, b))
		default:
			what = "reopen"
			closeSnaps()
			require.NoError(t, db.Close())
			db, err = Open("db", opts)
			require.NoError(t, err, ctx())
		}
	}
	what = "final"
	require.NoError(t, pdb.Compact(context.Background(), []byte("a"), []byte("z"), false))
	require.NoError(t, db.Compact(nil, nil))
	for i := 0; i < keySpace; i++ {
		checkGet(db.Get, dbGet, fmt.Appendf(nil, "k%04d", i))
	}
	m := db.Metrics()
	t.Logf("%d ops: flushes %d, compactions %d, levels %v", nops, m.Flushes, m.Compactions, m.Levels)
}

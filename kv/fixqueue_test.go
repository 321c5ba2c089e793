package kv

import (
	"testing"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestFixesInBackground: by default a Get that meets a false positive
// returns before the fix, which the queue's goroutine makes; once it ran,
// the key costs no probe. With FixInline the Get makes it itself. Either
// way every stored key is found.
func TestFixesInBackground(t *testing.T) {
	const present, absent = 100_000, 20_000
	for _, inline := range []bool{false, true} {
		db := knStore(t, &Options{FS: vfs.NewMem(), Filter: seededPolicy(t, "taf", 5), FixInline: inline, KnownNegatives: -1}, present)
		if inline {
			require.Nil(t, db.tc.fixes)
		}
		// Ask until a Get meets a false positive: with FixInline it is
		// fixed when Get returns.
		for i := 0; ; i++ {
			require.Less(t, i, absent, "no false positive in %d absent keys", absent)
			m0 := db.Metrics()
			_, err := db.Get(knKey(2*i + 1))
			require.ErrorIs(t, err, ErrNotFound)
			m := db.Metrics()
			if m.FalsePositiveProbes == m0.FalsePositiveProbes {
				continue
			}
			if inline {
				require.Equal(t, m0.Adaptations+1, m.Adaptations, "fixed by the Get")
			}
			db.tc.waitFixes()
			require.Equal(t, m0.Adaptations+1, db.Metrics().Adaptations, "fixed once the queue ran")
			break
		}
		first := askAbsent(t, db, absent) // waits for the fixes
		require.Greater(t, first, uint64(20))
		require.Zero(t, askAbsent(t, db, absent), "every false positive fixed")
		m := db.Metrics()
		require.Zero(t, m.FixesDropped)
		require.GreaterOrEqual(t, m.Adaptations, first)
		for i := 0; i < present; i += 3 {
			_, err := db.Get(knKey(2 * i))
			require.NoError(t, err, "no false negative")
		}
		require.NoError(t, db.Close())
	}
}

// TestFixQueueFullAndClose: while the queue's goroutine is held, fixes
// beyond the queue's size are dropped and counted; Close runs the fixes
// still queued and releases their tables (the store closes, a reopened one
// reads every key), and a dropped fix is made when its key comes back.
func TestFixQueueFullAndClose(t *testing.T) {
	const present, absent = 100_000, 50_000
	fs := vfs.NewMem()
	// 4 remainder bits: a false positive in about 20 absent keys.
	p, err := filterpolicy.New("taf", filterpolicy.Options{RemainderBits: 4, SeedSource: filterpolicy.FixedSeed(9)})
	require.NoError(t, err)
	o := &Options{FS: fs, Filter: p, KnownNegatives: -1}
	db := knStore(t, o, present)
	hold := make(chan struct{})
	held := make(chan struct{})
	require.True(t, db.tc.fixes.push(queuedFix{fix: func() { close(held); <-hold }}, true))
	<-held // the goroutine runs it: the queue is empty

	askAll := func(db *DB) {
		for i := 0; i < absent; i++ {
			_, err := db.Get(knKey(2*i + 1))
			require.ErrorIs(t, err, ErrNotFound)
		}
	}
	askAll(db)
	m := db.Metrics()
	t.Logf("false positives %d, dropped %d", m.FalsePositiveProbes, m.FixesDropped)
	require.Greater(t, m.FalsePositiveProbes, uint64(fixQueueSize), "enough to fill the queue")
	require.Equal(t, m.FalsePositiveProbes-fixQueueSize, m.FixesDropped, "the queue takes %d", fixQueueSize)
	require.Zero(t, m.Adaptations, "nothing ran yet")

	// Close while fixes are queued: they run, their tables are released.
	closed := make(chan error)
	go func() { closed <- db.Close() }()
	close(hold)
	require.NoError(t, <-closed)
	require.True(t, db.tc.cacheReleased, "every reader closed, the block cache released")

	db, err = Open("db", &Options{FS: fs, Filter: p, KnownNegatives: -1})
	require.NoError(t, err)
	defer db.Close()
	// Each round's dropped fixes are made in a later round.
	rounds := []uint64{askAbsent(t, db, absent)}
	for len(rounds) < 10 && rounds[len(rounds)-1] > 0 {
		rounds = append(rounds, askAbsent(t, db, absent))
	}
	t.Logf("false positives per round after reopening: %v", rounds)
	require.Zero(t, rounds[len(rounds)-1], "fixed when the keys came back")
	for i := 0; i < present; i += 5 {
		_, err := db.Get(knKey(2 * i))
		require.NoError(t, err)
	}
}

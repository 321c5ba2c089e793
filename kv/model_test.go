package kv

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

var (
	flagModelOps  = flag.Int("kv.modelops", 0, "model test: total operations across all filter policies (default 200000, 30000 with -short)")
	flagModelSeed = flag.Uint64("kv.seed", 0, "model test: seed (0 = time-based; printed on failure)")
)

// model is the reference: a plain map of live keys.
type model map[string][]byte

func (m model) clone() model {
	c := make(model, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (m model) sortedKeys(lower, upper []byte) []string {
	var ks []string
	for k := range m {
		if lower != nil && k < string(lower) {
			continue
		}
		if upper != nil && k >= string(upper) {
			continue
		}
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

type modelSnap struct {
	s *Snapshot
	m model
}

// TestModel runs random operations against the store and a map, for every
// filter policy, and fails at the first divergence with the seed.
func TestModel(t *testing.T) {
	total := 200_000
	if testing.Short() {
		total = 30_000
	}
	if *flagModelOps > 0 {
		total = *flagModelOps
	}
	names := filterpolicy.Names()
	per := total / len(names)
	base := *flagModelSeed
	if base == 0 {
		base = uint64(time.Now().UnixNano())
	}
	for i, name := range names {
		seed := base + uint64(i)
		t.Run(name, func(t *testing.T) {
			t.Logf("seed %d (rerun with -kv.seed=%d)", seed, base)
			runModel(t, name, seed, per)
		})
	}
}

func runModel(t *testing.T, policy string, seed uint64, nops int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	fs := vfs.NewCrashableMem()
	// Half the seeds fix every false positive, the others take the
	// default rule (cache first sights, fix returning keys).
	fix := FixEvery
	if seed%2 == 1 {
		fix = FixDefault
	}
	opts := &Options{
		FS: fs, FilterPolicy: policy,
		MemTableSize: 16 << 10, TargetFileSize: 8 << 10, L0CompactionThreshold: 2,
		MaxOpenFiles: 6, BlockCacheSize: 256 << 10, FixRule: fix,
	}
	db, err := Open("db", opts)
	require.NoError(t, err)
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	m := model{}
	var snaps []modelSnap
	// undo holds, for each write since the last point where everything
	// was durable, how to revert it in m: a crash may lose a suffix of them.
	type undoEntry struct {
		key  string
		prev []byte
		had  bool
	}
	var undo [][]undoEntry
	record := func(unit []undoEntry, k string) []undoEntry {
		prev, had := m[k]
		return append(unit, undoEntry{k, prev, had})
	}
	durable := func(wo *WriteOptions, unit []undoEntry) {
		if wo == Sync {
			undo = nil // a synced write makes every earlier one durable too
		} else {
			undo = append(undo, unit)
		}
	}
	op, what := 0, ""
	ctx := func() string { return fmt.Sprintf("policy %s seed %d op %d (%s)", policy, seed, op, what) }
	const keySpace = 1500
	// sparseKey is a key of a space too large to be written much: it
	// sorts right after a key of the dense space ('!' is below every
	// digit), inside the tables' key ranges, so a Get of it reaches the
	// tables' filters and their false positives (and adaptations).
	sparseKey := func() []byte {
		return fmt.Appendf(nil, "k%05d!%06d", rng.IntN(keySpace), rng.IntN(1_000_000))
	}
	randKey := func() []byte {
		if rng.IntN(20) == 0 {
			return sparseKey()
		}
		return fmt.Appendf(nil, "k%05d", rng.IntN(keySpace))
	}
	randValue := func() []byte {
		v := make([]byte, rng.IntN(40))
		for i := range v {
			v[i] = byte('a' + rng.IntN(26))
		}
		return v
	}
	// randRange is a range of up to 60 dense keys (sparse keys between
	// them included).
	randRange := func() (start, end []byte) {
		a := rng.IntN(keySpace)
		return fmt.Appendf(nil, "k%05d", a), fmt.Appendf(nil, "k%05d", a+1+rng.IntN(60))
	}
	// deleteRange applies a range deletion to m, recording what it removes.
	deleteRange := func(unit []undoEntry, start, end []byte) []undoEntry {
		for _, k := range m.sortedKeys(start, end) {
			unit = record(unit, k)
			delete(m, k)
		}
		return unit
	}
	writeOpts := func() *WriteOptions {
		if rng.IntN(4) == 0 {
			return Sync
		}
		return NoSync
	}
	get := func(g func([]byte) ([]byte, error), m model, key []byte) {
		v, err := g(key)
		want, ok := m[string(key)]
		if !ok {
			require.ErrorIs(t, err, ErrNotFound, "get %q: %s", key, ctx())
			return
		}
		require.NoError(t, err, "get %q: %s", key, ctx())
		require.Equal(t, want, v, "get %q: %s", key, ctx())
	}
	iterCheck := func(newIter func(*IterOptions) (*Iterator, error), m model) {
		var o IterOptions
		if rng.IntN(2) == 0 {
			o.LowerBound = fmt.Appendf(nil, "k%05d", rng.IntN(keySpace))
		}
		if rng.IntN(2) == 0 {
			o.UpperBound = fmt.Appendf(nil, "k%05d", rng.IntN(keySpace))
		}
		it, err := newIter(&o)
		require.NoError(t, err, ctx())
		defer func() { require.NoError(t, it.Close(), ctx()) }()
		keys := m.sortedKeys(o.LowerBound, o.UpperBound)
		pos := -1 // expected index into keys; -1 or len: invalid
		var ok bool
		position := func() {
			switch rng.IntN(4) {
			case 0:
				ok, pos = it.First(), 0
			case 1:
				ok, pos = it.Last(), len(keys)-1
			case 2:
				k := fmt.Sprintf("k%05d", rng.IntN(keySpace))
				ok = it.SeekGE([]byte(k))
				pos = sort.SearchStrings(keys, k)
			case 3:
				k := fmt.Sprintf("k%05d", rng.IntN(keySpace))
				ok = it.SeekLT([]byte(k))
				pos = sort.SearchStrings(keys, k) - 1
			}
		}
		position()
		steps := rng.IntN(40)
		if rng.IntN(10) == 0 {
			steps = len(keys) + 2 // a full walk
		}
		fwd := rng.IntN(2) == 0
		for s := 0; ; s++ {
			wantOK := pos >= 0 && pos < len(keys)
			require.Equal(t, wantOK, ok, "iter %+v step %d: %s", o, s, ctx())
			require.Equal(t, wantOK, it.Valid(), ctx())
			require.NoError(t, it.Error(), ctx())
			if !wantOK || s == steps {
				break
			}
			require.Equal(t, keys[pos], string(it.Key()), "iter %+v step %d: %s", o, s, ctx())
			require.Equal(t, m[keys[pos]], it.Value(), "iter %+v step %d key %s: %s", o, s, keys[pos], ctx())
			switch rng.IntN(40) {
			case 0: // new bounds (reusing the old slices), then a new position
				o.LowerBound, o.UpperBound = o.LowerBound[:0], o.UpperBound[:0]
				switch rng.IntN(3) {
				case 0:
					o.LowerBound = fmt.Appendf(o.LowerBound, "k%05d", rng.IntN(keySpace))
				case 1:
					o.UpperBound = fmt.Appendf(o.UpperBound, "k%05d", rng.IntN(keySpace))
				}
				if len(o.LowerBound) == 0 {
					o.LowerBound = nil
				}
				if len(o.UpperBound) == 0 {
					o.UpperBound = nil
				}
				it.SetBounds(o.LowerBound, o.UpperBound)
				require.False(t, it.Valid(), ctx())
				keys = m.sortedKeys(o.LowerBound, o.UpperBound)
				position()
				continue
			case 1: // go on with a clone, then a new position
				c, err := it.Clone()
				require.NoError(t, err, ctx())
				require.NoError(t, it.Close(), ctx())
				it = c
				position()
				continue
			}
			if rng.IntN(8) == 0 {
				fwd = !fwd
			}
			if fwd {
				ok, pos = it.Next(), pos+1
			} else {
				ok, pos = it.Prev(), pos-1
			}
		}
	}
	gets := uint64(0)
	// adaptations and cached sum Metrics().Adaptations and
	// FalsePositivesCached over the store's sessions (the counters start
	// again at each Open).
	adaptations, cached := uint64(0), uint64(0)
	count := func(m Metrics) {
		adaptations += m.Adaptations
		cached += m.FalsePositivesCached
	}
	for op = 0; op < nops; op++ {
		r := rng.IntN(1000)
		switch {
		case r < 280:
			what = "set"
			k, v := randKey(), randValue()
			wo := writeOpts()
			require.NoError(t, db.Set(k, v, wo), ctx())
			durable(wo, record(nil, string(k)))
			m[string(k)] = v
		case r < 300:
			what = "delete-range"
			start, end := randRange()
			wo := writeOpts()
			require.NoError(t, db.DeleteRange(start, end, wo), ctx())
			durable(wo, deleteRange(nil, start, end))
		case r < 400:
			what = "delete"
			k := randKey()
			wo := writeOpts()
			require.NoError(t, db.Delete(k, wo), ctx())
			durable(wo, record(nil, string(k)))
			delete(m, string(k))
		case r < 450:
			what = "batch"
			// The batch's writes apply in order (each undo entry holds
			// the value before its own write).
			b := NewBatch()
			var unit []undoEntry
			for n := rng.IntN(20) + 1; n > 0; n-- {
				k := randKey()
				switch x := rng.IntN(30); {
				case x < 3:
					start, end := randRange()
					require.NoError(t, b.DeleteRange(start, end))
					unit = deleteRange(unit, start, end)
				case x < 10:
					require.NoError(t, b.Delete(k))
					unit = record(unit, string(k))
					delete(m, string(k))
				default:
					v := randValue()
					require.NoError(t, b.Set(k, v))
					unit = record(unit, string(k))
					m[string(k)] = v
				}
			}
			wo := writeOpts()
			require.NoError(t, db.Apply(b, wo), ctx())
			durable(wo, unit)
		case r < 720:
			what = "get"
			get(db.Get, m, randKey())
			gets++
		case r < 750:
			what = "seek-prefix"
			var o IterOptions
			if rng.IntN(4) == 0 {
				o.LowerBound = fmt.Appendf(nil, "k%05d", rng.IntN(keySpace))
			}
			it, err := db.NewIter(&o)
			require.NoError(t, err, ctx())
			for n := 0; n < 5; n++ {
				k := randKey()
				want, ok := m[string(k)]
				inBounds := o.LowerBound == nil || string(k) >= string(o.LowerBound)
				ok = ok && inBounds
				got := it.SeekPrefixGE(k)
				if inBounds {
					gets++ // a lookup, counted as a Get
				}
				require.Equal(t, ok, got, "SeekPrefixGE %q (lower %q): %s", k, o.LowerBound, ctx())
				require.NoError(t, it.Error(), ctx())
				if ok {
					require.Equal(t, string(k), string(it.Key()), ctx())
					require.Equal(t, want, it.Value(), ctx())
					require.False(t, it.Next(), "no other key has the prefix: %s", ctx())
				}
			}
			require.NoError(t, it.Close(), ctx())
		case r < 800:
			what = "iter"
			iterCheck(db.NewIter, m)
		case r < 830:
			what = "snapshot"
			switch {
			case len(snaps) < 3 && rng.IntN(3) == 0:
				snaps = append(snaps, modelSnap{s: db.NewSnapshot(), m: m.clone()})
			case len(snaps) > 0 && rng.IntN(4) == 0:
				i := rng.IntN(len(snaps))
				require.NoError(t, snaps[i].s.Close(), ctx())
				snaps = slices.Delete(snaps, i, i+1)
			case len(snaps) > 0:
				s := snaps[rng.IntN(len(snaps))]
				if rng.IntN(2) == 0 {
					for n := 0; n < 10; n++ {
						get(s.s.Get, s.m, randKey())
						gets++
					}
				} else {
					iterCheck(s.s.NewIter, s.m)
				}
			}
		case r < 835:
			what = "flush"
			require.NoError(t, db.Flush(), ctx())
			undo = nil
		case r < 837:
			what = "compact"
			var start, end []byte
			if rng.IntN(2) == 0 {
				a, b := rng.IntN(keySpace), rng.IntN(keySpace)
				start, end = fmt.Appendf(nil, "k%05d", min(a, b)), fmt.Appendf(nil, "k%05d", max(a, b))
			}
			require.NoError(t, db.Compact(start, end), ctx())
			undo = nil
		case r < 839:
			what = "reopen"
			for _, s := range snaps {
				require.NoError(t, s.s.Close())
			}
			snaps = nil
			db.tc.waitFixes() // the fixes queued so far are counted
			count(db.Metrics())
			require.NoError(t, db.Close(), ctx())
			db = nil
			db, err = Open("db", opts)
			require.NoError(t, err, ctx())
			gets = 0
			undo = nil
		case r < 840:
			// A machine crash: only synced data (and, half the time, a
			// random part of the rest) survives. The store must come back
			// as the model after some prefix of the writes since the last
			// durable point.
			what = "crash"
			pct := 0
			if rng.IntN(2) == 0 {
				pct = rng.IntN(101)
			}
			crashFS := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(rng.Uint64(), 5))})
			for _, s := range snaps {
				require.NoError(t, s.s.Close())
			}
			snaps = nil
			db.tc.waitFixes() // the fixes queued so far are counted
			count(db.Metrics())
			_ = db.Close() // the old store lives on the old file system
			fs = crashFS
			opts.FS = fs
			db, err = Open("db", opts)
			require.NoError(t, err, ctx())
			gets = 0
			got := model{}
			it, err := db.NewIter(nil)
			require.NoError(t, err, ctx())
			for ok := it.First(); ok; ok = it.Next() {
				got[string(it.Key())] = bytes.Clone(it.Value())
			}
			require.NoError(t, it.Close(), ctx())
			lost := 0
			for !modelEqual(got, m) {
				require.NotEmpty(t, undo, "crash (unsynced kept %d%%): state matches no prefix of the writes since the last durable point: %s", pct, ctx())
				unit := undo[len(undo)-1]
				undo = undo[:len(undo)-1]
				for j := len(unit) - 1; j >= 0; j-- {
					if unit[j].had {
						m[unit[j].key] = unit[j].prev
					} else {
						delete(m, unit[j].key)
					}
				}
				lost++
			}
			undo = nil
			if lost > 0 {
				t.Logf("crash at op %d (unsynced kept %d%%): %d unsynced writes lost", op, pct, lost)
			}
		case r < 890:
			what = "get-sparse"
			for n := 0; n < 50; n++ {
				get(db.Get, m, sparseKey())
				gets++
			}
		default:
			what = "get-present"
			if len(m) > 0 {
				// A key known to be live: walks every level.
				for k := range m {
					get(db.Get, m, []byte(k))
					break
				}
				gets++
			}
		}
	}
	what = "final"
	for k := range m {
		get(db.Get, m, []byte(k))
		gets++
	}
	it, err := db.NewIter(nil)
	require.NoError(t, err)
	var seen []string
	for ok := it.First(); ok; ok = it.Next() {
		seen = append(seen, string(it.Key()))
	}
	require.NoError(t, it.Close())
	require.Equal(t, m.sortedKeys(nil, nil), seen, ctx())
	db.tc.waitFixes()
	met := db.Metrics()
	require.Equal(t, gets, met.Gets, ctx())
	require.LessOrEqual(t, met.FilterNegatives, met.FilterChecks)
	count(met)
	t.Logf("%d ops: flushes %d (merged %d) compactions %d (intra-L0 %d), probes/get %.3f, fp probes %d, adaptations %d (%d in all sessions), levels %v",
		nops, met.Flushes, met.MergedFlushes, met.Compactions, met.IntraL0Compactions, met.ProbesPerGet(), met.FalsePositiveProbes, met.Adaptations, adaptations, met.Levels)
	if p, err := filterpolicy.ByName(policy); err == nil && filterpolicy.Adapts(p) {
		if fix == FixEvery {
			require.Positive(t, adaptations, "an adaptive filter fixed no false positive: %s", ctx())
		} else {
			require.Positive(t, adaptations+cached, "an adaptive filter neither fixed nor cached a false positive: %s", ctx())
		}
	} else {
		require.Zero(t, adaptations, ctx())
	}
	for _, s := range snaps {
		require.NoError(t, s.s.Close())
	}
	require.NoError(t, db.Close())
	db = nil
}

func modelEqual(a, b model) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

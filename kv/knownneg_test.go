package kv

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// knKey spreads keys over the key space: even i are stored, odd i absent.
func knKey(i int) []byte {
	return binary.BigEndian.AppendUint64([]byte("user"), uint64(i)*0x9E3779B97F4A7C15)
}

// seededPolicy is policy with reproducible per-table seeds (a fixed
// sequence, a different seed for each table).
func seededPolicy(t *testing.T, name string, seed uint64) filterpolicy.Policy {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed))
	p, err := filterpolicy.New(name, filterpolicy.Options{SeedSource: func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Uint64() | 1
	}})
	require.NoError(t, err)
	return p
}

func knFill(t *testing.T, db *DB, from, to int) {
	b := NewBatch()
	for i := from; i < to; i++ {
		require.NoError(t, b.Set(knKey(2*i), []byte("value")))
		if b.Count() == 1000 {
			require.NoError(t, db.Apply(b, NoSync))
			b.Reset()
		}
	}
	require.NoError(t, db.Apply(b, NoSync))
}

// knStore opens a store with o and fills it with keys 0..present-1,
// compacted.
func knStore(t *testing.T, o *Options, present int) *DB {
	db, err := Open("db", o)
	require.NoError(t, err)
	knFill(t, db, 0, present)
	require.NoError(t, db.Compact(nil, nil))
	return db
}

// askAbsent asks every absent key once and returns the false-positive
// probes it cost.
func askAbsent(t *testing.T, db *DB, absent int) uint64 {
	return askAbsentFrom(t, db, 0, absent)
}

// askAbsentFrom asks the absent keys from..from+n-1 once and returns the
// false-positive probes they cost.
func askAbsentFrom(t *testing.T, db *DB, from, n int) uint64 {
	before := db.Metrics().FalsePositiveProbes
	for i := from; i < from+n; i++ {
		_, err := db.Get(knKey(2*i + 1))
		require.ErrorIs(t, err, ErrNotFound)
	}
	db.tc.waitFixes() // the round's fixes land before the next round
	return db.Metrics().FalsePositiveProbes - before
}

// TestFixesSurviveCompaction is the measurement: hot absent keys
// are asked until the filters fixed them; new data and a full compaction
// rewrite every table with new filters (new seeds); the same keys asked
// again cost at most 10% of their first-sight false positives, because the
// new tables were pre-adapted against the known negatives. Without the
// record (KnownNegatives < 0) they pay again, about as much as first.
// The stacked policy does not adapt (every round pays the same), but the
// tables the compaction writes are stacked around the known negatives.
func TestFixesSurviveCompaction(t *testing.T) {
	// Each hot key is asked 32 times: the record takes a key at its first
	// looked-at sight (its second while nearly all keys are new, as in
	// the first round), so nearly all are held.
	present, absent, rounds := 300_000, 40_000, 32
	if testing.Short() {
		present, absent = 100_000, 20_000
	}
	for _, policy := range []string{"taf", "exaf", "aprefix", "stacked"} {
		for _, record := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/record=%v", policy, record), func(t *testing.T) {
				o := &Options{FS: vfs.NewMem(), Filter: seededPolicy(t, policy, 7), knownNegSeed: 7, RecordAbsent: RecordAlways}
				if !record {
					o.KnownNegatives = -1
				}
				db := knStore(t, o, present)
				defer db.Close()
				first := askAbsent(t, db, absent)
				for r := 1; r < rounds; r++ {
					askAbsent(t, db, absent)
				}
				fixed := askAbsent(t, db, absent)
				knFill(t, db, present, present+present/3)
				require.NoError(t, db.Compact(nil, nil))
				// The keys the record holds and those it lost (sets of its
				// sketch that overflowed), asked apart.
				var afterHeld uint64
				if db.kn != nil {
					before := db.Metrics().FalsePositiveProbes
					for i := 0; i < absent; i++ {
						if k := knKey(2*i + 1); db.kn.Contains(k) {
							_, err := db.Get(k)
							require.ErrorIs(t, err, ErrNotFound)
						}
					}
					afterHeld = db.Metrics().FalsePositiveProbes - before
				}
				after := askAbsent(t, db, absent) + afterHeld // the held keys again cost nothing new
				m := db.Metrics()
				t.Logf("first sight %d false positives, after %d rounds %d; after new data and a full compaction %d (pre-adaptations %d of %d checks, %d known negatives, %d KiB)",
					first, rounds, fixed, after, m.PreAdaptations, m.PreAdaptChecks, m.KnownNegatives, m.KnownNegativeBytes>>10)
				require.Greater(t, first, uint64(40), "enough first-sight false positives to measure")
				if policy == "stacked" {
					require.InDelta(t, float64(first), float64(fixed), 4*math.Sqrt(float64(first)), "static: the same every round")
				} else {
					require.LessOrEqual(t, fixed, first/100+1, "the filters fixed the hot keys")
				}
				if record {
					// The keys the record holds were fixed as the new
					// tables were built (the budget cuts none here; a
					// few stay: aprefix's fix cap, a stacked filter's
					// negative layers, cuckoo moves); the keys it lost
					// (about 2% of them, with this seed) pay again. In
					// all, 3-9% of first sight's false positives come
					// back on average (0-1% with -short): which ones
					// depends on the tables' seeds, drawn in the order
					// flushes and compactions make them (stacked, seeds
					// 1-8: 3-15%, mean 9%). So the bound is 9% of first
					// sight's plus three standard deviations of a
					// Poisson count of that mean.
					t.Logf("of the held keys %d", afterHeld)
					require.LessOrEqual(t, afterHeld*100, first*5+200, "the held keys' fixes survive the compaction")
					mean := 0.09 * float64(first)
					require.LessOrEqual(t, float64(after), mean+3*math.Sqrt(mean), "at most 9%% of the fixes lost, within the noise")
					if policy != "stacked" {
						require.Positive(t, m.PreAdaptations)
					}
					require.Positive(t, m.KnownNegatives)
				} else {
					require.Greater(t, after, first/2, "without the record the new tables pay again")
					require.Zero(t, m.PreAdaptations)
				}
				// No false negatives.
				for i := 0; i < present+present/3; i += 5 {
					v, err := db.Get(knKey(2 * i))
					require.NoError(t, err)
					require.Equal(t, "value", string(v))
				}
			})
		}
	}
}

// TestKnownNegativesPersist: the record is saved on Close and loaded by
// Open, so tables written after a restart are pre-adapted too; a damaged
// file is reported, not fatal, and loads nothing.
func TestKnownNegativesPersist(t *testing.T) {
	present, absent := 60_000, 8_000
	fs := vfs.NewMem()
	open := func() *DB {
		db, err := Open("db", &Options{FS: fs, Filter: seededPolicy(t, "taf", 9), RecordAbsent: RecordAlways})
		require.NoError(t, err)
		return db
	}
	db := open()
	knFill(t, db, 0, present)
	require.NoError(t, db.Compact(nil, nil))
	for range 32 {
		askAbsent(t, db, absent)
	}
	held := db.Metrics().KnownNegatives
	require.Greater(t, held, absent*9/10, "most hot absent keys are recorded")
	require.NoError(t, db.Close())

	db = open()
	require.NoError(t, db.KnownNegativesError())
	require.Equal(t, held, db.Metrics().KnownNegatives, "the record survives the restart")
	knFill(t, db, present, present+present/4)
	require.NoError(t, db.Compact(nil, nil))
	require.Positive(t, db.Metrics().PreAdaptations, "tables written after the restart are pre-adapted")
	require.NoError(t, db.Close())

	// Damage the file in several ways: Open succeeds with an empty record
	// and says why; every key is still there.
	good, err := readFile(fs, "db/"+knownNegFileName)
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"truncated": good[:len(good)/2],
		"flipped":   flipByte(good, len(good)/3),
		"empty":     {},
	} {
		writeFile(t, fs, "db/"+knownNegFileName, b)
		db = open()
		require.Error(t, db.KnownNegativesError(), name)
		require.Zero(t, db.Metrics().KnownNegatives, name)
		for i := 0; i < present+present/4; i += 11 {
			_, err := db.Get(knKey(2 * i))
			require.NoError(t, err, name)
		}
		require.NoError(t, db.Close())
	}
}

func flipByte(b []byte, i int) []byte {
	c := append([]byte{}, b...)
	c[i] ^= 0x5a
	return c
}

func writeFile(t *testing.T, fs vfs.FS, name string, b []byte) {
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestRecordOnlyWhereUsed: the store keeps a known-negative record only
// for a policy that uses one (adaptive, or stacked), and counts absent Gets
// in it with RecordAlways; with RecordAuto always where a wasted probe
// costs more than recording or the record is read on the read path (here:
// a FixRule that reads it) or by the builder of every table (stacked), and
// elsewhere in the windows of RecordWhileRewriting; never with RecordNever.
func TestRecordOnlyWhereUsed(t *testing.T) {
	for policy, used := range map[string]bool{"aprefix": true, "taf": true, "stacked": true, "bloom": false, "prefix": false, "none": false} {
		for _, c := range []struct {
			rule    RecordRule
			fix     FixRule
			records bool
		}{
			{RecordAuto, FixEvery, true}, // stacked always, the others in the Compact's window
			{RecordAuto, FixAuto, true},
			{RecordAlways, FixEvery, true},
			{RecordNever, FixEvery, false},
			{RecordWhileRewriting, FixEvery, true}, // the Compact opened the window: TestRecordWhileRewriting
		} {
			fs := vfs.NewMem()
			db := knStore(t, &Options{FS: fs, FilterPolicy: policy, RecordAbsent: c.rule, FixRule: c.fix}, 20_000)
			for range 4 {
				askAbsent(t, db, 2_000)
			}
			require.Equal(t, used && c.records, db.Metrics().KnownNegatives > 0, "%s %+v", policy, c)
			require.NoError(t, db.Close())
			_, err := fs.Stat("db/" + knownNegFileName)
			require.Equal(t, used, err == nil, policy)
		}
	}
}

// TestRecordWhileRewriting: with RecordWhileRewriting an adaptive store
// records absent Gets from the start of a flush or compaction, or from
// when the memtable passes half its size, until the record has counted
// about as many as it holds keys, and not while no table is written: none
// after that window, none in a store reopened and only read, and again
// once its memtable is half full.
// RecordAuto, in memory with a fix rule that does not read the record,
// records the same way.
func TestRecordWhileRewriting(t *testing.T) {
	for _, rule := range []RecordRule{RecordWhileRewriting, RecordAuto} {
		t.Run(recordRuleNames[rule], func(t *testing.T) { recordWhileRewriting(t, rule) })
	}
}

func recordWhileRewriting(t *testing.T, rule RecordRule) {
	fs := vfs.NewMem()
	// FixEvery: the fix gate of FixCached puts false positives in the record.
	o := &Options{FS: fs, FilterPolicy: "aprefix", RecordAbsent: rule, FixRule: FixEvery, KnownNegatives: 1024, MemTableSize: 1 << 20}
	db := knStore(t, o, 20_000)
	require.True(t, db.kn.Recording(), "the Compact opened the window")
	askAbsent(t, db, 200)
	require.Positive(t, db.Metrics().KnownNegatives, "recorded in the window")
	// Fresh absent keys (odd ones the store was not asked) close it: about
	// 1024 counted, up to striped.Stripes checks' steps late.
	fresh := func(from, n int) {
		for i := from; i < from+n; i++ {
			_, err := db.Get(knKey(2*i + 1))
			require.ErrorIs(t, err, ErrNotFound)
		}
	}
	fresh(1_000, 20_000)
	require.False(t, db.kn.Recording(), "the window closed")
	db.tc.waitFixes()
	held := db.kn.Len()
	counted := db.kn.Snapshot()
	fresh(100_000, 5_000)
	db.tc.waitFixes()
	require.Equal(t, held, db.kn.Len(), "nothing recorded after the window")
	require.Equal(t, counted, db.kn.Snapshot(), "no count moved after the window")
	require.NoError(t, db.Close())

	db, err := Open("db", o)
	require.NoError(t, err)
	defer db.Close()
	require.False(t, db.kn.Recording(), "a reopened store has written no table")
	held = db.kn.Len()
	fresh(200_000, 5_000)
	db.tc.waitFixes()
	require.Equal(t, held, db.kn.Len(), "nothing recorded before a table is written")
	knFill(t, db, 20_000, 20_100)
	require.False(t, db.kn.Recording(), "a write alone opens no window")
	flushes := db.Metrics().Flushes
	for next := 20_100; db.mu.mem.mt.Size() < int64(o.MemTableSize)/2; next += 100 {
		knFill(t, db, next, next+100)
	}
	require.Equal(t, flushes, db.Metrics().Flushes, "no flush yet")
	require.True(t, db.kn.Recording(), "the half-full memtable opened the window")
	fresh(300_000, 200)
	require.Greater(t, db.kn.Len(), held, "recorded from then on")
}

// TestRecordAutoRule: RecordAuto records every absent Get where the fix
// rule reads the record (FixRepeated, FixAuto) or for stacked, and
// otherwise (DirectReads too) while tables are rewritten; the other rules
// are what they say.
func TestRecordAutoRule(t *testing.T) {
	for _, c := range []struct {
		policy string
		opts   Options
		want   RecordRule
	}{
		{"aprefix", Options{}, RecordWhileRewriting},
		{"taf", Options{FixRule: FixEvery}, RecordWhileRewriting},
		{"aprefix", Options{DirectReads: true}, RecordWhileRewriting},
		{"aprefix", Options{DirectReads: true, FixRule: FixAuto}, RecordAlways},
		{"aprefix", Options{FixRule: FixRepeated}, RecordAlways},
		{"aprefix", Options{FixRule: FixAuto}, RecordAlways},
		{"stacked", Options{}, RecordAlways},
		{"aprefix", Options{RecordAbsent: RecordNever, DirectReads: true}, RecordNever},
		{"stacked", Options{RecordAbsent: RecordWhileRewriting}, RecordWhileRewriting},
		{"aprefix", Options{RecordAbsent: RecordAlways}, RecordAlways},
	} {
		p, err := filterpolicy.ByName(c.policy)
		require.NoError(t, err)
		db := &DB{opts: c.opts, policy: p}
		require.Equal(t, c.want, db.recordRule(), "%s %+v", c.policy, c.opts)
		require.Equal(t, c.want != RecordNever, db.recordsAbsent())
	}
}

// TestPreAdaptationUnderConcurrentReads: writers and compactions keep
// writing tables built or pre-adapted with known negatives (taf, stacked)
// while readers ask present keys (never a false negative) and hot absent
// keys (feeding the record). Run with -race.
func TestPreAdaptationUnderConcurrentReads(t *testing.T) {
	for _, policy := range []string{"taf", "stacked"} {
		t.Run(policy, func(t *testing.T) { concurrentKnownNegatives(t, policy) })
	}
}

func concurrentKnownNegatives(t *testing.T, policy string) {
	present, absent, extra := 40_000, 4_000, 30_000
	if testing.Short() {
		present, absent, extra = 15_000, 2_000, 10_000
	}
	db, err := Open("db", &Options{FS: vfs.NewMem(), FilterPolicy: policy, MemTableSize: 128 << 10, TargetFileSize: 64 << 10, RecordAbsent: RecordAlways})
	require.NoError(t, err)
	defer db.Close()
	knFill(t, db, 0, present)
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for !done.Load() {
				i := r.IntN(present)
				if v, err := db.Get(knKey(2 * i)); err != nil || string(v) != "value" {
					errs <- fmt.Errorf("present key %d: %q, %v", i, v, err)
					return
				}
				if _, err := db.Get(knKey(2*r.IntN(absent) + 1)); err != ErrNotFound {
					errs <- fmt.Errorf("absent key: %v", err)
					return
				}
			}
		}()
	}
	knFill(t, db, present, present+extra)
	require.NoError(t, db.Compact(nil, nil))
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	m := db.Metrics()
	t.Logf("flushes %d, compactions %d, pre-adaptations %d of %d checks, known negatives %d", m.Flushes, m.Compactions, m.PreAdaptations, m.PreAdaptChecks, m.KnownNegatives)
	require.Positive(t, m.KnownNegatives)
	if policy == "taf" {
		require.Positive(t, m.PreAdaptChecks)
	}
	for i := 0; i < present+extra; i += 3 {
		_, err := db.Get(knKey(2 * i))
		require.NoError(t, err)
	}
}

// TestFixRepeated: under FixRule FixRepeated a false positive is fixed
// only once the known-negative record holds its key: keys asked once cost
// their probes and no fix; asked again they are fixed at the second sight
// (the false positive takes a slot in the record whatever its sampling),
// and stored keys are all found. With the record off the rule is FixEvery.
func TestFixRepeated(t *testing.T) {
	const present, absent = 100_000, 20_000
	db := knStore(t, &Options{FS: vfs.NewMem(), Filter: seededPolicy(t, "taf", 3), FixRule: FixRepeated, knownNegSeed: 3}, present)
	defer db.Close()
	first := askAbsent(t, db, absent)
	m := db.Metrics()
	require.Greater(t, first, uint64(20))
	// A key that fools two tables in one Get has had its first sight at
	// the first of them: the second is fixed.
	require.LessOrEqual(t, m.Adaptations*20, first, "first sight: (nearly) nothing fixed")
	require.Equal(t, first, m.FixesDeferred+m.Adaptations)
	second := askAbsent(t, db, absent)
	m2 := db.Metrics()
	// Nearly the same false positives: round one's few fixes took some away
	// (and a taf fix may make a new one).
	state := func(m Metrics) string {
		return fmt.Sprintf("{checks %d fp %d adapt %d rebuilds %d deferred %d dropped %d preadapt %d remote reads %d flushes %d compactions %d levels %v}",
			m.FilterChecks, m.FalsePositiveProbes, m.Adaptations, m.Rebuilds, m.FixesDeferred, m.FixesDropped,
			m.PreAdaptations, m.RemoteReads, m.Flushes, m.Compactions, m.Levels)
	}
	require.InDelta(t, first-m.Adaptations, second, float64(first)/10,
		"the filters barely changed: after round one %s, after round two %s", state(m), state(m2))
	require.GreaterOrEqual(t, (m2.Adaptations-m.Adaptations)*20, second*19, "second sight: fixed")
	require.LessOrEqual(t, askAbsent(t, db, absent), first/20, "asked 3 times: fixed")
	for i := 0; i < present; i += 3 {
		_, err := db.Get(knKey(2 * i))
		require.NoError(t, err)
	}

	db2 := knStore(t, &Options{FS: vfs.NewMem(), Filter: seededPolicy(t, "taf", 3), FixRule: FixRepeated, KnownNegatives: -1}, present)
	defer db2.Close()
	askAbsent(t, db2, absent)
	require.Zero(t, db2.Metrics().FixesDeferred, "no record: every false positive fixed")
	require.Positive(t, db2.Metrics().Adaptations)

	require.ErrorIs(t, (&Options{FixRule: 9}).Validate(), ErrInvalidOptions)
}

// TestFixDefault: the zero FixRule is FixCached, with DirectReads and
// without; a rule set explicitly stays.
func TestFixDefault(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want FixRule
	}{
		{Options{}, FixCached},
		{Options{DirectReads: true}, FixCached},
		{Options{DirectReads: true, FixRule: FixEvery}, FixEvery},
		{Options{FixRule: FixAuto}, FixAuto},
	} {
		o, err := c.o.withDefaults()
		require.NoError(t, err)
		require.Equal(t, c.want, o.FixRule, "%+v", c.o)
	}
}

// TestFixCached: under FixRule FixCached a false positive of a key the
// known-negative record has not seen goes to its table's cache of false
// positives (no fix, no remote read), and the key's next Gets cost no
// probe; a false positive of a key the record holds is fixed. Stored keys
// are all found. With the record off the rule is FixEvery.
func TestFixCached(t *testing.T) {
	const present, absent = 100_000, 20_000
	db := knStore(t, &Options{FS: vfs.NewMem(), Filter: seededPolicy(t, "aprefix", 5), FixRule: FixCached, knownNegSeed: 5}, present)
	defer db.Close()
	first := askAbsent(t, db, absent)
	m := db.Metrics()
	require.Greater(t, first, uint64(20))
	// A key whose doorkeeper bit another key set is fixed at its first
	// sight (the load's window of new keys may turn the record's
	// doorkeeper on; Sketch.Seen): about 1% of them, first/10+2 is far in
	// the tail.
	misjudged := m.Adaptations
	require.LessOrEqual(t, misjudged, first/10+2, "first sight: (nearly) no fix")
	require.Equal(t, first, m.FalsePositivesCached+misjudged, "first sight: cached")
	require.True(t, misjudged > 0 || m.RemoteReads == 0, "no fix, no remote read: %d", m.RemoteReads)
	// A table's cache holds its newest false positives per set of 8 slots:
	// the few keys of a set that overflowed are false positives again.
	second := askAbsent(t, db, absent)
	require.LessOrEqual(t, second, first/4, "cached: no probe")
	require.GreaterOrEqual(t, db.Metrics().CachedNegatives+misjudged, first-second)

	// Keys the record holds (asked before) are fixed at their first false
	// positive in a table.
	for i := absent; i < 2*absent; i++ {
		db.kn.Add(knKey(2*i+1), 8)
	}
	m0 := db.Metrics()
	for i := absent; i < 2*absent; i++ {
		_, err := db.Get(knKey(2*i + 1))
		require.ErrorIs(t, err, ErrNotFound)
	}
	db.tc.waitFixes()
	m1 := db.Metrics()
	fps := m1.FalsePositiveProbes - m0.FalsePositiveProbes
	require.Positive(t, fps)
	require.Equal(t, fps, m1.Adaptations-m0.Adaptations, "held keys: fixed")
	require.Equal(t, m0.FalsePositivesCached, m1.FalsePositivesCached)
	for i := 0; i < present; i++ {
		_, err := db.Get(knKey(2 * i))
		require.NoError(t, err, "no false negative: key %d", i)
	}

	db2 := knStore(t, &Options{FS: vfs.NewMem(), Filter: seededPolicy(t, "aprefix", 5), FixRule: FixCached, KnownNegatives: -1}, present)
	defer db2.Close()
	askAbsent(t, db2, absent)
	require.Zero(t, db2.Metrics().FalsePositivesCached, "no record: every false positive fixed")
	require.Positive(t, db2.Metrics().Adaptations)
}

// TestFixReturningKeys: the default rule in memory (FixCached without
// DirectReads) caches a false positive at its key's first sight (the
// record marks the key) and fixes it when the key comes back: the cache
// answering for it, or, for the few keys the cache let go, the record
// having seen it; the second round makes one fix per key, the third ends
// every lookup at the filters; keys asked once are never fixed, but for a
// few whose doorkeeper bit another key set (with RecordAuto, whose window
// of new keys turns the record's doorkeeper on: Sketch.Seen). The record
// holds every false positive's key; with RecordNever those only (with the
// default, RecordAuto, the absent Gets of the window the load's Compact
// opened too). Stored keys are all found.
func TestFixReturningKeys(t *testing.T) {
	for _, rule := range []RecordRule{RecordAuto, RecordNever} {
		t.Run(recordRuleNames[rule], func(t *testing.T) { fixReturningKeys(t, rule) })
	}
}

func fixReturningKeys(t *testing.T, rule RecordRule) {
	const present, absent = 100_000, 20_000
	db := knStore(t, &Options{FS: vfs.NewMem(), Filter: seededPolicy(t, "aprefix", 6), RecordAbsent: rule}, present)
	defer db.Close()
	require.Equal(t, FixCached, db.opts.FixRule)
	first := askAbsent(t, db, absent)
	m1 := db.Metrics()
	require.Greater(t, first, uint64(20))
	// About the share of doorkeeper bits set, 1% here: first/10+2 is far
	// in the tail.
	misjudged := m1.Adaptations
	require.LessOrEqual(t, misjudged, first/10+2, "first sight: (nearly) no fix")
	if rule == RecordNever {
		require.Zero(t, misjudged, "no doorkeeper: no fix at a first sight")
	}
	require.Equal(t, first, m1.FalsePositivesCached+misjudged, "first sight: cached")

	second := askAbsent(t, db, absent)
	m2 := db.Metrics()
	require.LessOrEqual(t, second, first/4, "the cache answers (a few keys overflowed their sets)")
	returned := m2.CachedNegatives - m1.CachedNegatives
	// Every key back is answered by the cache or probes again, but for a
	// key whose false positive a fix of another key cleared in between
	// (two absent keys sharing a fingerprint; the fixes run while the
	// round goes on, so it happens in some runs and not others: one key
	// in about a third of the -race runs with this seed). At most 2% of
	// them.
	require.GreaterOrEqual(t, returned+misjudged+first/50+1, first-second)
	require.Equal(t, returned+second, m2.Adaptations-misjudged, "every key back: fixed (by the cache's answer, or as a false positive the record saw)")

	third := askAbsent(t, db, absent)
	m3 := db.Metrics()
	require.LessOrEqual(t, third, second, "fixed keys end at the filters")
	require.Equal(t, m2.CachedNegatives, m3.CachedNegatives, "the fixed keys left the cache")
	if rule == RecordNever {
		require.Equal(t, int(first), m3.KnownNegatives, "only the false positives' keys recorded")
	} else {
		require.GreaterOrEqual(t, m3.KnownNegatives, int(first), "the false positives' keys recorded")
	}

	// Keys asked once: cached, never fixed (but for a few the doorkeeper
	// misjudges, as in the first round).
	before := db.Metrics()
	for i := absent; i < 2*absent; i++ {
		_, err := db.Get(knKey(2*i + 1))
		require.ErrorIs(t, err, ErrNotFound)
	}
	db.tc.waitFixes()
	after := db.Metrics()
	fps := after.FalsePositiveProbes - before.FalsePositiveProbes
	fixed := after.Adaptations - before.Adaptations
	require.Positive(t, after.FalsePositivesCached-before.FalsePositivesCached)
	require.Equal(t, fps, after.FalsePositivesCached-before.FalsePositivesCached+fixed)
	require.LessOrEqual(t, fixed, fps/10+2)
	if rule == RecordNever {
		require.Zero(t, fixed)
	}
	for i := 0; i < present; i++ {
		_, err := db.Get(knKey(2 * i))
		require.NoError(t, err, "no false negative: key %d", i)
	}
}

// TestFixAuto: under FixAuto a false positive is fixed at first
// sight while absent keys repeat (new keys among hot ones are fixed at
// once), deferred while they do not (a stream of keys asked once costs
// no fix), and fixed at first sight again once the hot keys are back.
// Stored keys are found throughout.
func TestFixAuto(t *testing.T) {
	const present, hot = 100_000, 2_000
	db := knStore(t, &Options{FS: vfs.NewMem(), Filter: seededPolicy(t, "taf", 4), FixRule: FixAuto, knownNegSeed: 4}, present)
	defer db.Close()
	type counts struct{ fp, fixed, deferred uint64 }
	measure := func(ask func()) counts {
		m0 := db.Metrics()
		ask()
		db.tc.waitFixes()
		m := db.Metrics()
		return counts{m.FalsePositiveProbes - m0.FalsePositiveProbes, m.Adaptations - m0.Adaptations, m.FixesDeferred - m0.FixesDeferred}
	}
	get := func(i int) {
		_, err := db.Get(knKey(2*i + 1))
		require.ErrorIs(t, err, ErrNotFound)
	}
	hotRounds := func(n int) {
		for range n {
			for i := range hot {
				get(i)
			}
		}
	}
	// New keys among hot ones: one in ten is new.
	mixed := func(from, n int) counts {
		return measure(func() {
			for i := from; i < from+n; i++ {
				get(i)
				for j := range 9 {
					get((i*9 + j) % hot)
				}
			}
		})
	}
	hotRounds(8) // the record learns the hot keys; their false positives are fixed
	c := mixed(100_000, 20_000)
	t.Logf("new keys among hot ones: %+v", c)
	require.Greater(t, c.fp, uint64(20))
	require.Zero(t, c.deferred, "fixed at first sight")
	// A hot key asked again before its queued fix ran is a false positive
	// twice and fixed once.
	require.GreaterOrEqual(t, c.fixed*10, c.fp*9, "fixed at first sight")

	c = measure(func() {
		for i := 200_000; i < 260_000; i++ {
			get(i)
		}
	})
	t.Logf("keys asked once: %+v", c)
	require.Greater(t, c.fp, uint64(100))
	require.GreaterOrEqual(t, c.deferred, c.fp*7/10, "deferred once the record sees mostly new keys")
	require.LessOrEqual(t, c.fixed+c.deferred, c.fp)

	hotRounds(8)
	c = mixed(300_000, 20_000)
	t.Logf("new keys among hot ones again: %+v", c)
	require.Zero(t, c.deferred, "fixed at first sight again")
	require.GreaterOrEqual(t, c.fixed*10, c.fp*9, "fixed at first sight again")
	for i := 0; i < present; i += 3 {
		_, err := db.Get(knKey(2 * i))
		require.NoError(t, err)
	}
}

package compaction

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Int64("seed", 0, "seed for the randomized tests (0 = from the clock)")

// testSeed returns the seed for a randomized test and logs it, so that a
// failure can be replayed with -seed.
func testSeed(t testing.TB) int64 {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	return seed
}

// randChildren makes n sorted children with random entries over nKeys user
// keys. With dups, some internal keys appear in more than one child.
func randChildren(rng *rand.Rand, n, maxLen, nKeys int, dups bool) [][]entry {
	children := make([][]entry, n)
	used := map[string]bool{}
	var all []base.InternalKey
	for c := range children {
		m := rng.Intn(maxLen + 1)
		seen := map[string]bool{}
		for j := 0; j < m; j++ {
			var k base.InternalKey
			if dups && len(all) > 0 && rng.Intn(8) == 0 {
				k = all[rng.Intn(len(all))]
			} else {
				k = base.InternalKey{UserKey: randUserKey(rng, nKeys), Seq: uint64(rng.Intn(50)), Kind: base.KeyKind(rng.Intn(2))}
			}
			id := fmt.Sprintf("%s#%d,%d", k.UserKey, k.Seq, k.Kind)
			if seen[id] || (!dups && used[id]) {
				continue
			}
			seen[id], used[id] = true, true
			all = append(all, k)
			var v []byte
			if k.Kind == base.KeyKindSet {
				v = []byte(fmt.Sprintf("c%d-%d", c, j))
			}
			children[c] = append(children[c], entry{key: k, value: v})
		}
		sortEntries(children[c])
	}
	return children
}

// oracle is the merged order: all entries sorted by internal key, ties by
// child index.
func oracleOf(children [][]entry) []entry {
	var all []entry
	for _, c := range children {
		all = append(all, c...)
	}
	sortEntries(all) // stable: ties keep child order
	return all
}

func newMerged(children [][]entry) (base.Iterator, []*sliceIter) {
	return newMergedIn(nil, children)
}

// newMergedIn is newMerged with reuse: a non-nil m is Init'ed over the
// children (whatever its previous use left in it) instead of a new one.
func newMergedIn(m *MergingIter, children [][]entry) (base.Iterator, []*sliceIter) {
	var its []base.Iterator
	var sis []*sliceIter
	for _, c := range children {
		si := newSliceIter(c)
		sis = append(sis, si)
		its = append(its, si)
	}
	if m == nil {
		return NewMergingIter(its...), sis
	}
	m.Init(its)
	return m, sis
}

// modelIter is the oracle's cursor with the merging iterator's semantics.
type modelIter struct {
	es         []entry
	pos        int
	positioned bool
}

func (m *modelIter) valid() bool { return m.pos >= 0 && m.pos < len(m.es) }

func (m *modelIter) seekGE(key []byte) int {
	i := 0
	for i < len(m.es) && bytes.Compare(m.es[i].key.UserKey, key) < 0 {
		i++
	}
	return i
}

func (m *modelIter) do(op int, key []byte) bool {
	switch op {
	case 0:
		m.pos, m.positioned = 0, true
	case 1:
		m.pos, m.positioned = len(m.es)-1, true
	case 2:
		m.pos, m.positioned = m.seekGE(key), true
	case 3:
		m.pos, m.positioned = m.seekGE(key)-1, true
	case 4, 6:
		if !m.positioned {
			return false
		}
		if m.pos < len(m.es) {
			m.pos++
		}
	case 5, 7:
		if !m.positioned {
			return false
		}
		if m.pos >= 0 {
			m.pos--
		}
	}
	return m.valid()
}

var opNames = []string{"First", "Last", "SeekGE", "SeekLT", "Next", "Prev", "Next", "Prev"}

func doOp(it base.Iterator, op int, key []byte) bool {
	switch op {
	case 0:
		return it.First()
	case 1:
		return it.Last()
	case 2:
		return it.SeekGE(key)
	case 3:
		return it.SeekLT(key)
	case 4, 6:
		return it.Next()
	default:
		return it.Prev()
	}
}

// TestMergingIterRandomOps runs random positioning calls against the
// oracle, on new iterators and on one reused with Init (after Close, or in
// whatever state the previous round left it).
func TestMergingIterRandomOps(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	rounds := 3000
	if testing.Short() {
		rounds = 500
	}
	var reused MergingIter // every other round: Init over the last round's state
	for round := 0; round < rounds; round++ {
		nKeys := 1 + rng.Intn(40)
		children := randChildren(rng, rng.Intn(9), 1+rng.Intn(30), nKeys, round%3 == 0)
		oracle := oracleOf(children)
		it, _ := newMerged(children)
		if round%2 == 1 {
			it, _ = newMergedIn(&reused, children)
		}
		model := &modelIter{es: oracle, pos: -1}
		var trace []string
		for step := 0; step < 300; step++ {
			op := rng.Intn(len(opNames))
			if step == 0 && rng.Intn(4) == 0 {
				op = 4 + rng.Intn(2) // Next/Prev before any positioning
			}
			key := randUserKey(rng, nKeys+2)
			trace = append(trace, fmt.Sprintf("%s(%s)", opNames[op], key))
			want := model.do(op, key)
			got := doOp(it, op, key)
			same := want == got && it.Error() == nil
			if same && want {
				e := model.es[model.pos]
				same = base.CompareInternalKeys(e.key, it.Key()) == 0 && bytes.Equal(e.value, it.Value())
			}
			if same {
				continue
			}
			msg := fmt.Sprintf("seed %d round %d step %d: ops %v", seed, round, step, trace)
			require.Equal(t, want, got, msg)
			require.NoError(t, it.Error(), msg)
			if want {
				e := model.es[model.pos]
				require.Equal(t, e.key, it.Key(), msg)
				require.Equal(t, e.value, it.Value(), msg)
			} else {
				require.Equal(t, base.InternalKey{}, it.Key(), msg)
				require.Nil(t, it.Value(), msg)
			}
		}
		if round%4 != 3 { // a reused iterator is also Init'ed while open
			require.NoError(t, it.Close())
		}
	}
}

// TestMergingIterFullScans checks complete forward and backward scans,
// including from seeks, against the oracle.
func TestMergingIterFullScans(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 200; round++ {
		children := randChildren(rng, 1+rng.Intn(8), rng.Intn(100), 1+rng.Intn(200), false)
		oracle := oracleOf(children)
		it, _ := newMerged(children)
		msg := fmt.Sprintf("seed %d round %d", seed, round)
		var fwd, rev []entry
		for ok := it.First(); ok; ok = it.Next() {
			fwd = append(fwd, entry{key: it.Key(), value: it.Value()})
		}
		for ok := it.Last(); ok; ok = it.Prev() {
			rev = append([]entry{{key: it.Key(), value: it.Value()}}, rev...)
		}
		if len(oracle) == 0 {
			require.Empty(t, fwd, msg)
			require.Empty(t, rev, msg)
		} else {
			require.Equal(t, oracle, fwd, msg)
			require.Equal(t, oracle, rev, msg)
		}
		require.NoError(t, it.Close(), msg)
	}
}

func TestMergingIterNoChildren(t *testing.T) {
	it := NewMergingIter()
	require.False(t, it.First())
	require.False(t, it.Last())
	require.False(t, it.SeekGE([]byte("a")))
	require.False(t, it.SeekLT([]byte("a")))
	require.False(t, it.Next())
	require.False(t, it.Prev())
	require.NoError(t, it.Error())
	require.NoError(t, it.Close())

	it = NewMergingIter(nil, nil)
	require.False(t, it.First())
	require.NoError(t, it.Close())
}

func TestMergingIterErrorPropagation(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 200; round++ {
		children := randChildren(rng, 1+rng.Intn(6), 1+rng.Intn(30), 20, false)
		it, sis := newMerged(children)
		bad := rng.Intn(len(sis))
		sis[bad].failAfter = 1 + rng.Intn(20)
		msg := fmt.Sprintf("seed %d round %d", seed, round)
		sawErr := false
		for step := 0; step < 200; step++ {
			op := rng.Intn(len(opNames))
			ok := doOp(it, op, randUserKey(rng, 22))
			if err := it.Error(); err != nil {
				require.ErrorIs(t, err, errInjected, msg)
				require.False(t, ok, msg)
				sawErr = true
			} else {
				require.False(t, sawErr, "error must be sticky: %s", msg)
			}
			if sawErr {
				require.Equal(t, base.InternalKey{}, it.Key(), msg)
			}
		}
		if sis[bad].err != nil {
			require.True(t, sawErr, msg)
			require.ErrorIs(t, it.Close(), errInjected, msg)
		} else {
			require.NoError(t, it.Close(), msg)
		}
		for _, si := range sis {
			require.True(t, si.closed, msg)
		}
	}
}

func TestMergingIterCloseErrors(t *testing.T) {
	a := newSliceIter([]entry{{key: base.InternalKey{UserKey: []byte("a"), Seq: 1, Kind: base.KeyKindSet}}})
	b := newSliceIter(nil)
	b.closeErr = errors.New("close failed")
	it := NewMergingIter(a, b)
	require.True(t, it.First())
	err := it.Close()
	require.ErrorIs(t, err, b.closeErr)
	require.True(t, a.closed)
	require.True(t, b.closed)

	c := newSliceIter([]entry{{key: base.InternalKey{UserKey: []byte("a"), Seq: 1, Kind: base.KeyKindSet}}})
	it = NewMergingIter(c)
	require.True(t, it.First())
	require.NoError(t, it.Close())
	require.False(t, it.First(), "positioning after Close")
	require.ErrorIs(t, it.Error(), ErrClosed)
}

// BenchmarkMergingIter reports the cost per key of a full forward scan of 8
// interleaved inputs (the compaction and kv scan path).
func BenchmarkMergingIter(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("inputs=%d", n), func(b *testing.B) {
			const total = 1 << 16
			rng := rand.New(rand.NewSource(1))
			children := make([][]entry, n)
			for i := 0; i < total; i++ {
				c := rng.Intn(n)
				k := base.InternalKey{UserKey: []byte(fmt.Sprintf("user%012d", i)), Seq: uint64(i), Kind: base.KeyKindSet}
				children[c] = append(children[c], entry{key: k, value: []byte("value")})
			}
			b.ReportAllocs()
			b.ResetTimer()
			keys := 0
			for keys < b.N {
				it, _ := newMerged(children)
				for ok := it.First(); ok && keys < b.N; ok = it.Next() {
					keys++
				}
				if err := it.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package merging

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/itertest"
	"github.com/stretchr/testify/require"
)

// randChildren makes n sorted children with random entries over nKeys user
// keys. With dups, some internal keys appear in more than one child.
func randChildren(rng *rand.Rand, n, maxLen, nKeys int, dups bool) [][]itertest.Entry {
	children := make([][]itertest.Entry, n)
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
				k = base.InternalKey{UserKey: itertest.RandUserKey(rng, nKeys), Seq: uint64(rng.Intn(50)), Kind: base.KeyKind(rng.Intn(2))}
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
			children[c] = append(children[c], itertest.Entry{Key: k, Value: v})
		}
		itertest.SortEntries(children[c])
	}
	return children
}

// oracle is the merged order: all entries sorted by internal key, ties by
// child index.
func oracleOf(children [][]itertest.Entry) []itertest.Entry {
	var all []itertest.Entry
	for _, c := range children {
		all = append(all, c...)
	}
	itertest.SortEntries(all) // stable: ties keep child order
	return all
}

func newMerged(children [][]itertest.Entry) (base.Iterator, []*itertest.SliceIter) {
	return newMergedIn(nil, children)
}

// newMergedIn is newMerged with reuse: a non-nil m is Init'ed over the
// children (whatever its previous use left in it) instead of a new one.
func newMergedIn(m *Iter, children [][]itertest.Entry) (base.Iterator, []*itertest.SliceIter) {
	its, sis := itertest.Iters(children)
	if m == nil {
		return NewIter(its...), sis
	}
	m.Init(its)
	return m, sis
}

// modelIter is the oracle's cursor with the merging iterator's semantics.
type modelIter struct {
	es         []itertest.Entry
	pos        int
	positioned bool
}

func (m *modelIter) valid() bool { return m.pos >= 0 && m.pos < len(m.es) }

func (m *modelIter) seekGE(key []byte) int {
	i := 0
	for i < len(m.es) && bytes.Compare(m.es[i].Key.UserKey, key) < 0 {
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

// TestIterRandomOps runs random positioning calls against the
// oracle, on new iterators and on one reused with Init (after Close, or in
// whatever state the previous round left it).
func TestIterRandomOps(t *testing.T) {
	seed := itertest.Seed(t)
	rng := rand.New(rand.NewSource(seed))
	rounds := 3000
	if testing.Short() {
		rounds = 500
	}
	var reused Iter // every other round: Init over the last round's state
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
			key := itertest.RandUserKey(rng, nKeys+2)
			trace = append(trace, fmt.Sprintf("%s(%s)", opNames[op], key))
			want := model.do(op, key)
			got := doOp(it, op, key)
			same := want == got && it.Error() == nil
			if same && want {
				e := model.es[model.pos]
				same = base.CompareInternalKeys(e.Key, it.Key()) == 0 && bytes.Equal(e.Value, it.Value())
			}
			if same {
				continue
			}
			msg := fmt.Sprintf("seed %d round %d step %d: ops %v", seed, round, step, trace)
			require.Equal(t, want, got, msg)
			require.NoError(t, it.Error(), msg)
			if want {
				e := model.es[model.pos]
				require.Equal(t, e.Key, it.Key(), msg)
				require.Equal(t, e.Value, it.Value(), msg)
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

// TestIterFullScans checks complete forward and backward scans,
// including from seeks, against the oracle.
func TestIterFullScans(t *testing.T) {
	seed := itertest.Seed(t)
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 200; round++ {
		children := randChildren(rng, 1+rng.Intn(8), rng.Intn(100), 1+rng.Intn(200), false)
		oracle := oracleOf(children)
		it, _ := newMerged(children)
		msg := fmt.Sprintf("seed %d round %d", seed, round)
		var fwd, rev []itertest.Entry
		for ok := it.First(); ok; ok = it.Next() {
			fwd = append(fwd, itertest.Entry{Key: it.Key(), Value: it.Value()})
		}
		for ok := it.Last(); ok; ok = it.Prev() {
			rev = append([]itertest.Entry{{Key: it.Key(), Value: it.Value()}}, rev...)
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

func TestIterNoChildren(t *testing.T) {
	it := NewIter()
	require.False(t, it.First())
	require.False(t, it.Last())
	require.False(t, it.SeekGE([]byte("a")))
	require.False(t, it.SeekLT([]byte("a")))
	require.False(t, it.Next())
	require.False(t, it.Prev())
	require.NoError(t, it.Error())
	require.NoError(t, it.Close())

	it = NewIter(nil, nil)
	require.False(t, it.First())
	require.NoError(t, it.Close())
}

func TestIterErrorPropagation(t *testing.T) {
	seed := itertest.Seed(t)
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 200; round++ {
		children := randChildren(rng, 1+rng.Intn(6), 1+rng.Intn(30), 20, false)
		it, sis := newMerged(children)
		bad := rng.Intn(len(sis))
		sis[bad].FailAfter = 1 + rng.Intn(20)
		msg := fmt.Sprintf("seed %d round %d", seed, round)
		sawErr := false
		for step := 0; step < 200; step++ {
			op := rng.Intn(len(opNames))
			ok := doOp(it, op, itertest.RandUserKey(rng, 22))
			if err := it.Error(); err != nil {
				require.ErrorIs(t, err, itertest.ErrInjected, msg)
				require.False(t, ok, msg)
				sawErr = true
			} else {
				require.False(t, sawErr, "error must be sticky: %s", msg)
			}
			if sawErr {
				require.Equal(t, base.InternalKey{}, it.Key(), msg)
			}
		}
		if sis[bad].Error() != nil {
			require.True(t, sawErr, msg)
			require.ErrorIs(t, it.Close(), itertest.ErrInjected, msg)
		} else {
			require.NoError(t, it.Close(), msg)
		}
		for _, si := range sis {
			require.True(t, si.Closed, msg)
		}
	}
}

func TestIterCloseErrors(t *testing.T) {
	a := itertest.NewSliceIter([]itertest.Entry{{Key: base.InternalKey{UserKey: []byte("a"), Seq: 1, Kind: base.KeyKindSet}}})
	b := itertest.NewSliceIter(nil)
	b.CloseErr = errors.New("close failed")
	it := NewIter(a, b)
	require.True(t, it.First())
	err := it.Close()
	require.ErrorIs(t, err, b.CloseErr)
	require.True(t, a.Closed)
	require.True(t, b.Closed)

	c := itertest.NewSliceIter([]itertest.Entry{{Key: base.InternalKey{UserKey: []byte("a"), Seq: 1, Kind: base.KeyKindSet}}})
	it = NewIter(c)
	require.True(t, it.First())
	require.NoError(t, it.Close())
	require.False(t, it.First(), "positioning after Close")
	require.ErrorIs(t, it.Error(), base.ErrClosed)
}

// BenchmarkIter reports the cost per key of a full forward scan of 8
// interleaved inputs (the compaction and kv scan path).
func BenchmarkIter(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("inputs=%d", n), func(b *testing.B) {
			const total = 1 << 16
			rng := rand.New(rand.NewSource(1))
			children := make([][]itertest.Entry, n)
			for i := 0; i < total; i++ {
				c := rng.Intn(n)
				k := base.InternalKey{UserKey: []byte(fmt.Sprintf("user%012d", i)), Seq: uint64(i), Kind: base.KeyKindSet}
				children[c] = append(children[c], itertest.Entry{Key: k, Value: []byte("value")})
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

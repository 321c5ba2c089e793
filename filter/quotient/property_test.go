package quotient

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/stretchr/testify/require"
)

// TestNoFalseNegativesAtScale: 1M keys (100k with -short), every key
// queried after build, after a stream of random and repeated negative
// queries with Adapt on every false positive, and after MarshalBinary/Decode.
// With -quotient.long the stream has 10M queries.
func TestNoFalseNegativesAtScale(t *testing.T) {
	n := sizeFor(100_000, 1_000_000, 1_000_000)
	queries := sizeFor(300_000, 2_000_000, 10_000_000)
	rng := rand.New(rand.NewPCG(31, 32))
	keys := randKeys(rng, n, 1)
	hot := randKeys(rng, n/100, 2) // repeated negatives
	for _, kind := range allVariants {
		t.Run(kind.String(), func(t *testing.T) {
			b := NewBuilder(kind, Options{Seed: 555}, n)
			for _, k := range keys {
				b.Add(k)
			}
			f, remote, err := b.Finish()
			require.NoError(t, err)
			require.Equal(t, n, f.Len())
			requireNoFalseNegatives(t, f, keys)
			if kind == RSQF {
				require.ErrorIs(t, f.Adapt(hot[0]), filter.ErrNotAdaptive)
			} else {
				var key [16]byte
				key[0] = 3
				fps := 0
				for i := 0; i < queries; i++ {
					var k []byte
					if i%2 == 0 {
						k = hot[rng.IntN(len(hot))]
					} else {
						fillRandom(rng, key[1:])
						k = key[:]
					}
					if f.MayContain(k) {
						fps++
						require.NoError(t, f.Adapt(k))
					}
				}
				st := f.Stats()
				t.Logf("%v: %d queries, %d false positives, stats %+v", kind, queries, fps, st)
				require.Positive(t, st.Adaptations)
				requireNoFalseNegatives(t, f, keys)
			}
			data, err := f.MarshalBinary()
			require.NoError(t, err)
			g, err := Decode(data, remote)
			require.NoError(t, err)
			requireNoFalseNegatives(t, g, keys)
		})
	}
}

// TestManyRebuilds drives small filters far past their adaptivity budget
// (hundreds of false positives per block) so blocks overflow and rebuild
// again and again; no stored key may ever be lost.
func TestManyRebuilds(t *testing.T) {
	queries := sizeFor(300_000, 2_000_000, 10_000_000)
	rng := rand.New(rand.NewPCG(33, 34))
	for _, n := range []int{64, 3000} {
		keys := randKeys(rng, n, 1)
		negs := randKeys(rng, 4000, 2) // few distinct: heavily repeated
		for _, kind := range []Variant{UTAF, TAF, ExAF} {
			f, err := New(kind, keys, Options{Seed: uint64(n)})
			require.NoError(t, err)
			var key [16]byte
			key[0] = 3
			for i := 0; i < queries; i++ {
				k := negs[rng.IntN(len(negs))]
				if i%2 == 1 {
					fillRandom(rng, key[1:])
					k = key[:]
				}
				if f.MayContain(k) {
					require.NoError(t, f.Adapt(k))
				}
			}
			st := f.Stats()
			t.Logf("n=%d %v: %+v", n, kind, st)
			if n == 64 || kind != UTAF { // uTAF rebuilds only when a selector passes 6
				require.Positive(t, st.Rebuilds, "n=%d %v", n, kind)
			}
			requireNoFalseNegatives(t, f, keys)
			require.NoError(t, f.(*qf).validate())
		}
	}
}

func fillRandom(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// TestConcurrentAdapt: readers hammer MayContain on stored keys while a
// writer adapts to a stream of false positives (with rebuilds); run it with
// -race. A reader must never see a half-updated block (a false negative).
func TestConcurrentAdapt(t *testing.T) {
	queries := sizeFor(100_000, 1_000_000, 5_000_000)
	rng := rand.New(rand.NewPCG(35, 36))
	for _, n := range []int{300, sizeFor(5_000, 20_000, 100_000)} {
		keys := randKeys(rng, n, 1)
		negs := randKeys(rng, n, 2)
		for _, kind := range []Variant{UTAF, TAF, ExAF} {
			testConcurrentAdapt(t, kind, keys, negs, queries)
		}
	}
}

func testConcurrentAdapt(t *testing.T, kind Variant, keys, negs [][]byte, queries int) {
	{
		t.Run(fmt.Sprintf("%v/n=%d", kind, len(keys)), func(t *testing.T) {
			f, err := New(kind, keys, Options{Seed: 77})
			require.NoError(t, err)
			var stop atomic.Bool
			var missed atomic.Int64
			var reads atomic.Int64
			var wg sync.WaitGroup
			for r := 0; r < 3; r++ {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					for i := r; !stop.Load(); i++ {
						if !f.MayContain(keys[i%len(keys)]) {
							missed.Add(1)
						}
						reads.Add(1)
					}
				}(r)
			}
			wrng := rand.New(rand.NewPCG(1, 1))
			var key [16]byte
			key[0] = 3
			for i := 0; i < queries; i++ {
				k := negs[wrng.IntN(len(negs))]
				if i%2 == 1 {
					fillRandom(wrng, key[1:])
					k = key[:]
				}
				if f.MayContain(k) {
					require.NoError(t, f.Adapt(k))
				}
				if i%1024 == 0 {
					// Snapshots are taken under the adaptation lock.
					_, err := f.MarshalBinary()
					require.NoError(t, err)
				}
			}
			stop.Store(true)
			wg.Wait()
			t.Logf("%v: %d concurrent reads, stats %+v", kind, reads.Load(), f.Stats())
			require.Zero(t, missed.Load(), "false negatives under concurrent adaptation")
			require.Positive(t, f.Stats().Adaptations)
			if len(keys) <= 300 && kind != UTAF {
				require.Positive(t, f.Stats().Rebuilds)
			}
			requireNoFalseNegatives(t, f, keys)
		})
	}
}

// TestConcurrentBuilds runs builders of different sizes on several
// goroutines at once, so that the hash slices the builds recycle (a free
// list shared by the process) pass between them: every filter must be the
// one the same keys build alone, with no false negatives.
func TestConcurrentBuilds(t *testing.T) {
	const workers = 6
	rounds := sizeFor(4, 12, 12)
	rng := rand.New(rand.NewPCG(41, 42))
	sets := make([][][]byte, workers)
	want := make([][]byte, workers)
	for w := range sets {
		sets[w] = randKeys(rng, 3_000+w*7_000, uint8(10+w))
		f, _, err := buildKeys(TAF, sets[w])
		require.NoError(t, err)
		want[w], err = f.MarshalBinary()
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				// Each round takes another worker's set, so slices of
				// every size go through every worker.
				i := (w + r) % workers
				f, _, err := buildKeys(TAF, sets[i])
				if err != nil {
					errs <- err
					return
				}
				got, err := f.MarshalBinary()
				if err != nil {
					errs <- err
					return
				}
				if string(got) != string(want[i]) {
					errs <- fmt.Errorf("worker %d round %d: filter of set %d differs from its lone build", w, r, i)
					return
				}
				for _, k := range sets[i] {
					if !f.MayContain(k) {
						errs <- fmt.Errorf("worker %d round %d: false negative for %x", w, r, k)
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// buildKeys builds a filter of kind over keys, without a size hint (as a
// table's filter writer does).
func buildKeys(kind Variant, keys [][]byte) (Filter, filter.MemRemote, error) {
	b := NewBuilder(kind, Options{Seed: 99}, 0)
	for _, k := range keys {
		b.Add(k)
	}
	return b.Finish()
}

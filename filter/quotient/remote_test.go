package quotient

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/stretchr/testify/require"
)

// failingRemote returns an error that does not wrap ErrRemote.
type failingRemote struct{}

func (failingRemote) ReadSlots(int, []uint64) error { return errors.New("disk on fire") }

// flippingRemote returns tails with some bits flipped.
type flippingRemote struct {
	m    filter.MemRemote
	mask uint64
}

func (r flippingRemote) ReadSlots(first int, dst []uint64) error {
	if err := r.m.ReadSlots(first, dst); err != nil {
		return err
	}
	for i := range dst {
		dst[i] ^= r.mask
	}
	return nil
}

// findFalsePositives returns up to max absent keys the filter accepts.
func findFalsePositives(f Filter, rng *rand.Rand, max int) [][]byte {
	var out [][]byte
	for _, k := range randKeys(rng, 400*max, 3) {
		if f.MayContain(k) {
			out = append(out, k)
			if len(out) == max {
				break
			}
		}
	}
	return out
}

// TestRemoteErrors: an unreadable or inconsistent remote makes Adapt fail
// with ErrRemote and leaves the local state untouched.
func TestRemoteErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	keys := randKeys(rng, 20000, 1)
	for _, kind := range []Variant{UTAF, TAF, ExAF} {
		t.Run(kind.String(), func(t *testing.T) {
			b := NewBuilder(kind, Options{Seed: 77}, len(keys))
			for _, k := range keys {
				b.Add(k)
			}
			f0, tails, err := b.Finish()
			require.NoError(t, err)
			require.Len(t, tails, f0.Slots())
			fps := findFalsePositives(f0, rng, 50)
			require.NotEmpty(t, fps)
			data, err := f0.MarshalBinary()
			require.NoError(t, err)

			remotes := map[string]filter.Remote{
				"nil":       nil,
				"failing":   failingRemote{},
				"short":     tails[:len(tails)/2],
				"empty":     filter.MemRemote{},
				"low-bits":  flippingRemote{tails, 1},                     // remainder (chunk 0) wrong
				"all-bits":  flippingRemote{tails, ^uint64(0)},            // everything wrong
				"high-bits": flippingRemote{tails, 0xff << (64 - 8) >> 8}, // chunk 6 only
			}
			for name, remote := range remotes {
				g, err := Decode(data, remote)
				require.NoError(t, err)
				failed := 0
				for _, k := range fps {
					before := slices.Clone(g.(*qf).words)
					err := g.Adapt(k)
					if err != nil {
						require.ErrorIs(t, err, filter.ErrRemote, name)
						failed++
						require.True(t, slices.Equal(before, g.(*qf).words), "%s: failed Adapt changed the filter", name)
					}
				}
				if name == "high-bits" {
					// Selector-0 remainders still match: adaptation works
					// until a selector reaches the flipped chunk.
					continue
				}
				if name == "short" {
					require.Positive(t, failed, name)
					continue
				}
				require.Equal(t, len(fps), failed, name)
				requireNoFalseNegatives(t, g, keys)
			}
			// The faithful remote fixes every false positive found.
			g, err := Decode(data, tails)
			require.NoError(t, err)
			for _, k := range fps {
				require.NoError(t, g.Adapt(k))
			}
			require.Equal(t, uint64(len(fps)), g.Stats().Adaptations)
			require.GreaterOrEqual(t, g.Stats().RemoteReads, uint64(len(fps)))
			still := 0
			for _, k := range fps {
				if g.MayContain(k) {
					still++
				}
			}
			require.LessOrEqual(t, still, 2, "adapted keys must (almost always) stop being false positives")
			requireNoFalseNegatives(t, g, keys)
		})
	}
}

// TestAdaptOnStoredKey: telling the filter a stored key is a false positive
// (a caller bug) must not create a false negative.
func TestAdaptOnStoredKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	keys := randKeys(rng, 5000, 1)
	for _, kind := range []Variant{UTAF, TAF, ExAF} {
		f, err := New(kind, keys, Options{Seed: 8})
		require.NoError(t, err)
		for _, k := range keys {
			require.NoError(t, f.Adapt(k))
		}
		requireNoFalseNegatives(t, f, keys)
	}
}

// TestVerify: Verify accepts a filter with its own remote, before and
// after adaptation, and rejects another filter's remote or a damaged one.
func TestVerify(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	keys := randKeys(rng, 10000, 1)
	for _, kind := range allVariants {
		b := NewBuilder(kind, Options{Seed: 5}, len(keys))
		for _, k := range keys {
			b.Add(k)
		}
		f, tails, err := b.Finish()
		require.NoError(t, err)
		require.NoError(t, Verify(f))
		if kind != RSQF {
			for _, k := range findFalsePositives(f, rng, 200) {
				require.NoError(t, f.Adapt(k))
			}
			require.NoError(t, Verify(f))
		}
		data, err := f.MarshalBinary()
		require.NoError(t, err)
		for name, remote := range map[string]filter.Remote{
			"nil":      nil,
			"failing":  failingRemote{},
			"short":    tails[:len(tails)-64],
			"flipped":  flippingRemote{tails, 1 << 3},
			"shuffled": flippingRemote{tails, 0x0101010101010101},
		} {
			g, err := Decode(data, remote)
			require.NoError(t, err)
			require.ErrorIs(t, Verify(g), filter.ErrRemote, "%v %s", kind, name)
		}
	}
}

// TestForcedRebuilds: every adaptation rebuilds its block; stored keys
// stay present, adapted keys stop being false positives.
func TestForcedRebuilds(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	keys := randKeys(rng, 20000, 1)
	for _, kind := range []Variant{UTAF, TAF, ExAF} {
		f, err := New(kind, keys, Options{Seed: 6})
		require.NoError(t, err)
		q := f.(*qf)
		q.forceRebuild = true
		fps := findFalsePositives(f, rng, 40)
		for _, k := range fps {
			require.NoError(t, f.Adapt(k))
		}
		require.Equal(t, f.Stats().Adaptations, f.Stats().Rebuilds)
		require.GreaterOrEqual(t, f.Stats().Rebuilds, uint64(len(fps)*9/10))
		still := 0
		for _, k := range fps {
			if f.MayContain(k) {
				still++
			}
		}
		// A rebuild resets the block, so a later rebuild can undo an earlier
		// fix in the same block; most fixes survive.
		require.LessOrEqual(t, still, 8, "%v", kind)
		requireNoFalseNegatives(t, f, keys)
		require.NoError(t, Verify(f))
		require.NoError(t, q.validate())
	}
}

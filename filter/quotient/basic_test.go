package quotient

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/stretchr/testify/require"
)

var longTests = flag.Bool("quotient.long", false, "run the full-size quotient filter tests (1M keys, 10M adaptation queries)")

var allVariants = []Variant{RSQF, UTAF, TAF, ExAF}

// randKeys returns n distinct 16-byte keys; the first byte is tag so key
// sets with different tags never intersect.
func randKeys(rng *rand.Rand, n int, tag byte) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		k := make([]byte, 16)
		k[0] = tag
		binary.LittleEndian.PutUint64(k[1:], uint64(i))
		binary.LittleEndian.PutUint32(k[9:], rng.Uint32())
		keys[i] = k
	}
	return keys
}

func requireNoFalseNegatives(t *testing.T, f Filter, keys [][]byte) {
	t.Helper()
	for i, k := range keys {
		if !f.MayContain(k) {
			require.FailNowf(t, "false negative", "%v: key %d (%x) reported absent", f.Variant(), i, k)
		}
	}
}

func sizeFor(short, def, long int) int {
	switch {
	case *longTests:
		return long
	case testing.Short():
		return short
	}
	return def
}

func TestBasicAllKinds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := randKeys(rng, 20000, 1)
	negs := randKeys(rng, 200000, 2)
	for _, kind := range allVariants {
		t.Run(kind.String(), func(t *testing.T) {
			f, err := New(kind, keys, Options{Seed: 42})
			require.NoError(t, err)
			require.Equal(t, kind, f.Variant())
			require.Equal(t, len(keys), f.Len())
			requireNoFalseNegatives(t, f, keys)
			fp := 0
			for _, k := range negs {
				if f.MayContain(k) {
					fp++
					err := f.Adapt(k)
					if kind == RSQF {
						require.ErrorIs(t, err, filter.ErrNotAdaptive)
					} else {
						require.NoError(t, err)
					}
				}
			}
			rate := float64(fp) / float64(len(negs))
			t.Logf("%v: fp rate %.5f bits/key %.2f stats %+v", kind, rate, f.BitsPerKey(), f.Stats())
			require.Less(t, rate, 0.0037*1.5)
			requireNoFalseNegatives(t, f, keys)
			data, err := f.MarshalBinary()
			require.NoError(t, err)
			g, err := Decode(data, nil)
			require.NoError(t, err)
			requireNoFalseNegatives(t, g, keys)
			for _, k := range negs[:1000] {
				require.Equal(t, f.MayContain(k), g.MayContain(k))
			}
		})
	}
}

var _ = errors.Is
var _ = fmt.Sprint
var _ = math.Sqrt

func sqrtf(x float64) float64 { return math.Sqrt(x) }

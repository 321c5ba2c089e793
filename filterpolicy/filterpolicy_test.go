package filterpolicy

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/internal/filtertest"
	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

func key(i int) []byte    { return fmt.Appendf(nil, "user%010d", 2*i) }
func absent(i int) []byte { return fmt.Appendf(nil, "user%010d", 2*i+1) }

func sizes() (n, q int) {
	if testing.Short() {
		return 10_000, 50_000
	}
	return 50_000, 200_000
}

func fixedPolicy(t testing.TB, name string, seed uint64) Policy {
	p, err := New(name, Options{SeedSource: FixedSeed(seed)})
	require.NoError(t, err)
	return p
}

// buildBlock writes a block of p over n keys (writeBlock).
func buildBlock(p Policy, n int) []byte { return writeBlock(BlockWriter(p), n) }

// writeBlock runs Pebble's filter-writer protocol on w over key(0..n-1)
// (filtertest.WriteBlock).
func writeBlock(w pebble.FilterWriter, n int) []byte { return filtertest.WriteBlock(w, n, key) }

func TestRegistry(t *testing.T) {
	require.Equal(t, []string{"acf", "acf-cyclic", "acf-swap", "aprefix", "bloom", "caf", "exaf", "fuse", "none", "prefix", "rsqf", "stacked", "taf", "utaf"}, Names())
	for _, name := range Names() {
		p, err := ByName(name)
		require.NoError(t, err)
		require.Equal(t, name, p.Name())
		require.Equal(t, name, p.Kind().Name())
		require.Equal(t, "adaptkv."+name, PebbleName(p.Name()))
		require.Equal(t, name == "taf" || name == "aprefix" || name == "exaf" || name == "utaf" || name == "rsqf" || name == "caf" || strings.HasPrefix(name, "acf"), p.Adaptive())
	}
	_, err := ByName("cuckoo")
	require.ErrorIs(t, err, ErrUnknownPolicy)
	require.Contains(t, err.Error(), "bloom, caf, exaf, fuse")
	for _, o := range []Options{{BitsPerKey: -1}, {BitsPerKey: 65}, {RemainderBits: 3}, {RemainderBits: 17}, {LoadFactor: 1.5}, {LoadFactor: math.NaN()}} {
		_, err := New("bloom", o)
		require.ErrorIs(t, err, ErrInvalidOptions, "%+v", o)
	}
	require.Equal(t, "bloom", NewBloom(12).Name())
	// A policy of another type works if it is what it says it is (issue
	// 11: Options.Filter takes the exported interface); one whose kind does
	// not match its name, or has none, cannot write tables.
	bloom := NewBloom(10)
	wp, err := ForTable(foreignPolicy{Policy: bloom}, 1, nil)
	require.NoError(t, err)
	require.Equal(t, PebbleName(bloom.Name()), wp.Name())
	taf, err := ByName("taf")
	require.NoError(t, err)
	_, err = ForTable(foreignPolicy{Policy: bloom, kind: taf.Kind()}, 1, nil)
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = ForTable(nil, 1, nil)
	require.ErrorIs(t, err, ErrInvalidOptions)

	// Options are validated once, at New, by the kind: a taf with load
	// factor 1 is rejected there, not at its first table.
	_, err = New("taf", Options{LoadFactor: 1})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = New("stacked", Options{BitsPerKey: 2})
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.NoError(t, checkRegistry())
}

// foreignPolicy wraps a policy, optionally claiming another kind.
type foreignPolicy struct {
	Policy
	kind filter.Kind
}

func (f foreignPolicy) Kind() filter.Kind {
	if f.kind != nil {
		return f.kind
	}
	return f.Policy.Kind()
}

func TestPolicies(t *testing.T) {
	n, q := sizes()
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p := fixedPolicy(t, name, 42)
			block := buildBlock(p, n)
			h, _, err := VerifyBlock(block)
			require.NoError(t, err)
			require.Equal(t, uint64(n), h.NumKeys, "duplicates must be dropped")
			require.Equal(t, uint64(42), h.Seed)
			require.False(t, h.HasRemote, "pebble-facing blocks carry no remote")
			f, err := p.Open(block, nil)
			require.NoError(t, err)
			for i := 0; i < n; i++ {
				require.True(t, f.MayContain(key(i)), "false negative %d", i)
			}
			fp := 0
			for i := 0; i < q; i++ {
				if f.MayContain(absent(i)) {
					fp++
				}
			}
			rate := float64(fp) / float64(q)
			t.Logf("%s: fpr %.5f, %.2f bits/key", name, rate, f.BitsPerKey())
			require.LessOrEqual(t, rate, filtertest.FPRBound(filtertest.DesignFPR[name], q))
			if name != "none" {
				require.Positive(t, f.BitsPerKey())
			}
			_, isAdaptive := f.(filter.Adaptive)
			require.Equal(t, p.Adaptive(), isAdaptive)
		})
	}
}

func TestDifferentSeedsDifferentMistakes(t *testing.T) {
	n, q := sizes()
	for _, name := range []string{"bloom", "fuse", "prefix", "taf"} {
		f1, err := fixedPolicy(t, name, 1).Open(buildBlock(fixedPolicy(t, name, 1), n), nil)
		require.NoError(t, err)
		f2, err := fixedPolicy(t, name, 2).Open(buildBlock(fixedPolicy(t, name, 2), n), nil)
		require.NoError(t, err)
		both, one := 0, 0
		for i := 0; i < q; i++ {
			a, b := f1.MayContain(absent(i)), f2.MayContain(absent(i))
			if a {
				one++
				if b {
					both++
				}
			}
		}
		require.Positive(t, one, name)
		require.Less(t, both, one/4+2, "%s: seeds must decorrelate false positives", name)
	}
}

// TestEmptyAndRandomSeeds covers tables with no keys and the default seed source.
func TestEmptyAndRandomSeeds(t *testing.T) {
	for _, name := range Names() {
		p, err := ByName(name)
		require.NoError(t, err)
		block := buildBlock(p, 0)
		f, err := p.Open(block, nil)
		if err != nil {
			// A kind that cannot build an empty filter falls back to "none".
			h, _, herr := VerifyBlock(block)
			require.NoError(t, herr)
			require.Equal(t, filter.CodeNone, h.Code, "%s: %v", name, err)
			continue
		}
		_ = f.MayContain([]byte("x"))
		h1, _ := ParseHeader(buildBlock(p, 10))
		h2, _ := ParseHeader(buildBlock(p, 10))
		require.NotEqual(t, h1.Seed, h2.Seed, name)
	}
}

func TestBadBlocksAnswerMaybe(t *testing.T) {
	n := 2000
	for _, name := range Names() {
		if name == "none" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			p := fixedPolicy(t, name, 9)
			good := buildBlock(p, n)
			probe := func(block []byte, wantErr error) {
				t.Helper()
				_, err := p.Open(block, nil)
				require.ErrorIs(t, err, ErrCorruptBlock)
				if wantErr != nil {
					require.ErrorIs(t, err, wantErr)
				}
			}
			// Another kind's block.
			other := "bloom"
			if name == "bloom" {
				other = "fuse"
			}
			probe(buildBlock(fixedPolicy(t, other, 9), n), nil)
			// A newer format version.
			newer := append([]byte(nil), good...)
			newer[4] = FormatVersion + 1
			probe(newer, ErrUnsupportedVersion)
			// Bad checksum: flip a byte of the local state.
			bad := append([]byte(nil), good...)
			bad[HeaderSize+len(bad[HeaderSize:])/2] ^= 0x10
			probe(bad, nil)
			// Truncated, and garbage.
			probe(good[:len(good)-1], nil)
			probe(good[:HeaderSize-1], nil)
			probe([]byte("not a filter block at all, definitely not"), nil)
			// Every single-byte flip in the header and a sample of the body:
			// an error, never a panic; a block that still verifies has no
			// false negative.
			rng := rand.New(rand.NewPCG(1, 2))
			for trial := 0; trial < 300; trial++ {
				b := append([]byte(nil), good...)
				pos := trial
				if pos >= HeaderSize {
					pos = rng.IntN(len(b))
				}
				b[pos] ^= byte(1 + rng.IntN(255))
				f, err := p.Open(b, nil)
				if err == nil {
					for i := 0; i < n; i++ {
						require.True(t, f.MayContain(key(i)))
					}
				}
			}
		})
	}
}

// TestRemoteSection checks the block our sstable writer emits: local state
// plus the checksummed remote representation, usable in place.
func TestRemoteSection(t *testing.T) {
	n, q := sizes()
	for _, name := range []string{"taf", "exaf", "utaf", "rsqf"} {
		t.Run(name, func(t *testing.T) {
			wp, err := ForTable(fixedPolicy(t, name, 0), 77, nil)
			require.NoError(t, err)
			block := writeBlock(wp.NewWriter(pebble.TableFilter), n)
			require.NoError(t, wp.Err())
			h, _, err := VerifyBlock(block)
			require.NoError(t, err)
			require.True(t, h.HasRemote)
			require.Equal(t, len(block), h.LocalEnd()+h.RemoteSize())
			require.Equal(t, h, wp.Header())

			f, err := fixedPolicy(t, name, 0).Open(block, nil)
			require.NoError(t, err)
			af := f.(filter.Adaptive)
			fixed, fps := 0, 0
			for i := 0; i < q; i++ {
				k := absent(i)
				if !af.MayContain(k) {
					continue
				}
				fps++
				err := af.Adapt(k)
				if name == "rsqf" {
					require.ErrorIs(t, err, filter.ErrNotAdaptive)
					continue
				}
				require.NoError(t, err)
				if !af.MayContain(k) {
					fixed++
				}
			}
			require.Positive(t, fps)
			if name != "rsqf" {
				require.GreaterOrEqual(t, float64(fixed), 0.99*float64(fps))
			}
			for i := 0; i < n; i++ {
				require.True(t, af.MayContain(key(i)))
			}

			// The remote read through a ReaderAt, one read per request
			// whatever the chunks it covers.
			br := NewBlockRemote(strings.NewReader(string(block)), 0, h)
			all := make([]uint64, h.RemoteSlots)
			require.NoError(t, br.ReadSlots(0, all))
			part := make([]uint64, 100)
			require.NoError(t, br.ReadSlots(60, part))
			require.Equal(t, all[60:160], part)
			for _, first := range []int{0, 63, 64, 127, h.RemoteSlots - 70, h.RemoteSlots - 1} {
				one := make([]uint64, min(70, h.RemoteSlots-first))
				require.NoError(t, br.ReadSlots(first, one))
				require.Equal(t, all[first:first+len(one)], one, "slots from %d", first)
			}
			require.Equal(t, uint64(8), br.Reads(), "one read a request")
			require.ErrorIs(t, br.ReadSlots(h.RemoteSlots-1, make([]uint64, 2)), filter.ErrRemote)
			require.ErrorIs(t, br.ReadSlots(-1, part), filter.ErrRemote)

			// A corrupt remote chunk: reads fail, adaptation fails, no false negative.
			bad := append([]byte(nil), block...)
			off := h.LocalEnd() + 8*5
			binary.LittleEndian.PutUint64(bad[off:], ^binary.LittleEndian.Uint64(bad[off:]))
			br = NewBlockRemote(strings.NewReader(string(bad)), 0, h)
			require.ErrorIs(t, br.ReadSlots(0, part), filter.ErrRemote)
			f2, err := fixedPolicy(t, name, 0).Open(bad, nil)
			require.NoError(t, err) // the local state is intact
			for i := 0; i < 64; i++ {
				k := absent(i)
				if f2.MayContain(k) {
					_ = f2.(filter.Adaptive).Adapt(k)
				}
			}
			for i := 0; i < n; i++ {
				require.True(t, f2.MayContain(key(i)))
			}
		})
	}
}

// TestAdapts: the policies whose filters fix false positives are the
// adaptive ones but rsqf, whose filters are decoded as adaptive filters
// and never adapt.
func TestAdapts(t *testing.T) {
	var adapting []string
	for _, name := range Names() {
		p, err := ByName(name)
		require.NoError(t, err)
		if Adapts(p) {
			adapting = append(adapting, name)
			require.True(t, p.Adaptive(), name)
		}
	}
	require.ElementsMatch(t, []string{"taf", "exaf", "utaf", "caf", "aprefix", "acf", "acf-cyclic", "acf-swap"}, adapting)
	require.False(t, Adapts(nil))
}

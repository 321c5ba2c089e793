package pebblefilter

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/adaptkv/adaptkv/internal/filtertest"
	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

func key(i int) []byte    { return fmt.Appendf(nil, "user%010d", 2*i) }
func absent(i int) []byte { return fmt.Appendf(nil, "user%010d", 2*i+1) }

// fixedPolicy is the adapter of the policy name with every block seeded
// by seed.
func fixedPolicy(t testing.TB, name string, seed uint64) *Policy {
	p, err := filterpolicy.New(name, filterpolicy.Options{SeedSource: filterpolicy.FixedSeed(seed)})
	require.NoError(t, err)
	fp, err := New(p)
	require.NoError(t, err)
	return fp
}

// noKind is a policy without a filter kind.
type noKind struct{ filterpolicy.Policy }

func (noKind) Kind() filter.Kind { return nil }

// TestNewRejects: a nil policy or one without a kind is an error, not an
// adapter that panics at its first block.
func TestNewRejects(t *testing.T) {
	_, err := New(nil)
	require.ErrorIs(t, err, filterpolicy.ErrInvalidOptions)
	p, err := filterpolicy.ByName("bloom")
	require.NoError(t, err)
	_, err = New(noKind{p})
	require.ErrorIs(t, err, filterpolicy.ErrInvalidOptions)
}

// buildBlock writes a block of p over key(0..n-1) through Pebble's
// filter-writer protocol (filtertest.WriteBlock).
func buildBlock(p pebble.FilterPolicy, n int) []byte {
	return filtertest.WriteBlock(p.NewWriter(pebble.TableFilter), n, key)
}

// viewCount returns how many blocks p's view cache holds.
func viewCount(p *Policy) int {
	n := 0
	p.views.Range(func(any, any) bool { n++; return true })
	return n
}

// TestViewsOwnedByPolicy: the verified views of the blocks Pebble passes
// belong to the policy that was asked: another policy (of the same kind)
// holds none of them, a block's view is made once however often it is
// asked, and the cache is bounded (cleared past maxViews).
func TestViewsOwnedByPolicy(t *testing.T) {
	a, b := fixedPolicy(t, "taf", 3), fixedPolicy(t, "taf", 3)
	blocks := make([][]byte, 5)
	for i := range blocks {
		blocks[i] = buildBlock(a, 1000+i)
	}
	for round := 0; round < 3; round++ {
		for i, block := range blocks {
			require.True(t, a.MayContain(pebble.TableFilter, block, key(i)), "no false negative")
		}
	}
	require.Equal(t, len(blocks), viewCount(a), "one view a block")
	require.Zero(t, viewCount(b), "another policy holds none")
	require.True(t, b.MayContain(pebble.TableFilter, blocks[0], key(0)))
	require.Equal(t, 1, viewCount(b))
	require.Equal(t, len(blocks), viewCount(a))

	// Past the bound the cache starts over; answers stay right.
	small := make([][]byte, maxViews+1)
	c := fixedPolicy(t, "bloom", 3)
	for i := range small {
		small[i] = buildBlock(c, 1+i%7)
		require.True(t, c.MayContain(pebble.TableFilter, small[i], key(0)))
	}
	require.LessOrEqual(t, viewCount(c), maxViews)
	require.Equal(t, len(blocks), viewCount(a), "other policies' caches untouched")
}

// TestMayContain: for every registered kind, the adapter answers every
// stored key "maybe" and every absent key as the block's decoded filter
// does, and the blocks it writes carry no remote section.
func TestMayContain(t *testing.T) {
	n, q := 50_000, 200_000
	if testing.Short() {
		n, q = 10_000, 50_000
	}
	for _, name := range filterpolicy.Names() {
		t.Run(name, func(t *testing.T) {
			p := fixedPolicy(t, name, 42)
			block := buildBlock(p, n)
			h, _, err := filterpolicy.VerifyBlock(block)
			require.NoError(t, err)
			require.Equal(t, uint64(n), h.NumKeys, "duplicates must be dropped")
			require.False(t, h.HasRemote, "pebble-facing blocks carry no remote")
			require.Equal(t, "adaptkv."+name, p.Name())
			f, err := p.p.Open(block, nil)
			require.NoError(t, err)
			for i := 0; i < n; i++ {
				require.True(t, p.MayContain(pebble.TableFilter, block, key(i)), "false negative via pebble %d", i)
			}
			for i := 0; i < q; i++ {
				require.Equal(t, f.MayContain(absent(i)), p.MayContain(pebble.TableFilter, block, absent(i)))
			}
		})
	}
}

// TestEmptyBlock: a kind that cannot build a filter of no keys writes a
// block of kind none, and the adapter answers "maybe" for it.
func TestEmptyBlock(t *testing.T) {
	for _, name := range filterpolicy.Names() {
		p := fixedPolicy(t, name, 7)
		block := buildBlock(p, 0)
		if _, err := p.p.Open(block, nil); err != nil {
			h, _, herr := filterpolicy.VerifyBlock(block)
			require.NoError(t, herr)
			require.Equal(t, filter.CodeNone, h.Code, "%s: %v", name, err)
			require.True(t, p.MayContain(pebble.TableFilter, block, []byte("x")), name)
		}
	}
}

// TestBadBlocksAnswerMaybe: a block that is not a valid block of the
// policy's kind (another kind, a newer format, a bad checksum, truncated,
// garbage, any byte flipped) answers "maybe" for every key.
func TestBadBlocksAnswerMaybe(t *testing.T) {
	n := 2000
	for _, name := range filterpolicy.Names() {
		if name == "none" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			p := fixedPolicy(t, name, 9)
			good := buildBlock(p, n)
			probe := func(block []byte) {
				t.Helper()
				_, err := p.p.Open(block, nil)
				require.ErrorIs(t, err, filterpolicy.ErrCorruptBlock)
				for i := 0; i < 200; i++ {
					require.True(t, p.MayContain(pebble.TableFilter, block, absent(i)))
				}
			}
			other := "bloom"
			if name == "bloom" {
				other = "fuse"
			}
			probe(buildBlock(fixedPolicy(t, other, 9), n))
			newer := append([]byte(nil), good...)
			newer[4] = filterpolicy.FormatVersion + 1
			probe(newer)
			bad := append([]byte(nil), good...)
			bad[filterpolicy.HeaderSize+len(bad[filterpolicy.HeaderSize:])/2] ^= 0x10
			probe(bad)
			probe(good[:len(good)-1])
			probe(good[:filterpolicy.HeaderSize-1])
			probe([]byte("not a filter block at all, definitely not"))
			rng := rand.New(rand.NewPCG(1, 2))
			for trial := 0; trial < 300; trial++ {
				b := append([]byte(nil), good...)
				pos := trial
				if pos >= filterpolicy.HeaderSize {
					pos = rng.IntN(len(b))
				}
				b[pos] ^= byte(1 + rng.IntN(255))
				require.True(t, p.MayContain(pebble.TableFilter, b, key(trial%n)))
			}
		})
	}
}

// BenchmarkMayContain measures a negative query per policy on a 100k-key
// filter through Pebble's FilterPolicy.MayContain on the raw block (header
// peek and view cache; filterpolicy's benchmark of the same name measures
// the decoded filter).
func BenchmarkMayContain(b *testing.B) {
	const n = 100_000
	keys := make([][]byte, 4096)
	for i := range keys {
		keys[i] = absent(i * 97)
	}
	for _, name := range filterpolicy.Names() {
		p := fixedPolicy(b, name, 5)
		block := buildBlock(p, n)
		b.Run(name+"/pebble", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				p.MayContain(pebble.TableFilter, block, keys[i&(len(keys)-1)])
			}
		})
	}
}

// FuzzMayContain feeds arbitrary bytes to every adapter's MayContain:
// never a panic. Seeds are valid blocks of every kind.
func FuzzMayContain(f *testing.F) {
	var policies []*Policy
	for _, name := range filterpolicy.Names() {
		p := fixedPolicy(f, name, 3)
		f.Add(buildBlock(p, 50))
		policies = append(policies, p)
	}
	f.Fuzz(func(t *testing.T, block []byte) {
		for _, p := range policies {
			p.MayContain(pebble.TableFilter, block, []byte("k"))
		}
	})
}

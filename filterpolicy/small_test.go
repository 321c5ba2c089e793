package filterpolicy

import (
	"slices"
	"testing"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

// TestSmallSets builds every kind over 1..200 keys, with and without the
// remote section: no false negatives at any size.
func TestSmallSets(t *testing.T) {
	for _, name := range Names() {
		for _, n := range []int{1, 2, 3, 7, 31, 64, 65, 200} {
			p := fixedPolicy(t, name, uint64(n))
			wp, err := ForTable(p, uint64(n)+1000, nil)
			require.NoError(t, err)
			for i, w := range []func() pebble.FilterWriter{
				func() pebble.FilterWriter { return BlockWriter(p) },
				func() pebble.FilterWriter { return wp.NewWriter(pebble.TableFilter) },
			} {
				pebbleFacing := i == 0
				block := writeBlock(w(), n)
				f, err := p.Open(block, nil)
				require.NoError(t, err, "%s n=%d", name, n)
				for i := 0; i < n; i++ {
					require.True(t, f.MayContain(key(i)), "%s n=%d key %d", name, n, i)
				}
				if af, ok := f.(filter.Adaptive); ok && name != "rsqf" {
					for i := 0; i < 2000; i++ {
						if af.MayContain(absent(i)) {
							err := af.Adapt(absent(i))
							if pebbleFacing { // no remote in pebble-facing blocks
								require.ErrorIs(t, err, filter.ErrRemote)
							} else {
								require.NoError(t, err)
							}
						}
					}
					for i := 0; i < n; i++ {
						require.True(t, f.MayContain(key(i)), "%s n=%d key %d after adapting", name, n, i)
					}
				}
			}
		}
	}
}

// FuzzOpenBlock feeds arbitrary bytes to OpenBlock and every policy's Open:
// errors, never panics. Seeds are valid blocks of every kind.
func FuzzOpenBlock(f *testing.F) {
	for _, name := range Names() {
		p := fixedPolicy(f, name, 3)
		f.Add(buildBlock(p, 50))
		wp, _ := ForTable(p, 4, nil)
		f.Add(writeBlock(wp.NewWriter(pebble.TableFilter), 50))
	}
	policies := make([]Policy, 0, len(Names()))
	for _, name := range Names() {
		p, _ := ByName(name)
		policies = append(policies, p)
	}
	f.Fuzz(func(t *testing.T, block []byte) {
		if fl, _, err := OpenBlock(block, nil); err == nil {
			fl.MayContain([]byte("k"))
			if af, ok := fl.(filter.Adaptive); ok {
				_ = af.Adapt([]byte("k"))
			}
		}
		for _, p := range policies {
			if fl, err := p.Open(block, nil); err == nil {
				fl.MayContain([]byte("k"))
			}
		}
	})
}

// FuzzDecodeLocal fuzzes the local-state decoders behind the checksum:
// arbitrary local states of every registered kind, with the kind's
// parameters or arbitrary ones, decode to an error or to a filter whose
// queries and adaptations do not panic; an unregistered code is an error.
// The input's kind byte picks among the registered codes and one that is
// not (fuzzKindCodes), so every decoder is reached.
func FuzzDecodeLocal(f *testing.F) {
	codes := fuzzKindCodes()
	for _, name := range Names() {
		block := buildBlock(fixedPolicy(f, name, 3), 100)
		h, local, err := VerifyBlock(block)
		if err != nil {
			f.Fatal(err)
		}
		i := slices.Index(codes, h.Code)
		if i < 0 {
			f.Fatalf("%s: code %d not registered", name, h.Code)
		}
		f.Add(uint8(i), h.Param1, h.Param2, uint64(100), local)
	}
	f.Fuzz(func(t *testing.T, kind uint8, p1, p2 uint32, numKeys uint64, local []byte) {
		code := codes[int(kind)%len(codes)]
		h := Header{Version: FormatVersion, Code: code, Seed: 3, Param1: p1, Param2: p2, NumKeys: numKeys}
		fl, err := DecodeLocal(h, local, filter.MemRemote(make([]uint64, 256)))
		if _, registered := KindByCode(code); !registered {
			require.ErrorIs(t, err, ErrCorruptBlock, "unregistered code %d", code)
			return
		}
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptBlock)
			return
		}
		for i := 0; i < 20; i++ {
			if fl.MayContain(absent(i)) {
				if af, ok := fl.(filter.Adaptive); ok {
					_ = af.Adapt(absent(i))
				}
			}
		}
	})
}

// fuzzKindCodes is every registered kind's block code, then one code no
// kind has.
func fuzzKindCodes() []filter.Code {
	var codes []filter.Code
	for c := range 256 {
		if _, ok := KindByCode(filter.Code(c)); ok {
			codes = append(codes, filter.Code(c))
		}
	}
	for c := 255; ; c-- {
		if _, ok := KindByCode(filter.Code(c)); !ok {
			return append(codes, filter.Code(c))
		}
	}
}

// TestFuzzDecodeLocalReachesEveryKind: the fuzz target's kind byte maps
// onto every registered code (and one unregistered), and each kind's
// seed input decodes.
func TestFuzzDecodeLocalReachesEveryKind(t *testing.T) {
	codes := fuzzKindCodes()
	require.Len(t, codes, len(Names())+1)
	for _, name := range Names() {
		h, local, err := VerifyBlock(buildBlock(fixedPolicy(t, name, 3), 100))
		require.NoError(t, err)
		require.Contains(t, codes, h.Code, name)
		h2 := Header{Version: FormatVersion, Code: h.Code, Seed: 3, Param1: h.Param1, Param2: h.Param2, NumKeys: 100}
		_, err = DecodeLocal(h2, local, filter.MemRemote(make([]uint64, 256)))
		require.NoError(t, err, "%s: the seed input decodes", name)
	}
	_, err := DecodeLocal(Header{Version: FormatVersion, Code: codes[len(codes)-1]}, nil, nil)
	require.ErrorIs(t, err, ErrCorruptBlock)
}

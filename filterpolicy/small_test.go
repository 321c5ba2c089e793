package filterpolicy

import (
	"testing"

	"github.com/adaptkv/adaptkv/adaptive"
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
			for _, pol := range []pebble.FilterPolicy{p, wp} {
				block := buildBlock(pol, n)
				f, err := p.Open(block, nil)
				require.NoError(t, err, "%s n=%d", name, n)
				for i := 0; i < n; i++ {
					require.True(t, f.MayContain(key(i)), "%s n=%d key %d", name, n, i)
				}
				if af, ok := f.(AdaptiveFilter); ok && name != "rsqf" {
					for i := 0; i < 2000; i++ {
						if af.MayContain(absent(i)) {
							err := af.Adapt(absent(i))
							if pol == p { // no remote in pebble-facing blocks
								require.ErrorIs(t, err, adaptive.ErrRemote)
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

// FuzzOpenBlock feeds arbitrary bytes to OpenBlock and Pebble's MayContain:
// errors, never panics. Seeds are valid blocks of every kind.
func FuzzOpenBlock(f *testing.F) {
	for _, name := range Names() {
		p := fixedPolicy(f, name, 3)
		f.Add(buildBlock(p, 50))
		wp, _ := ForTable(p, 4, nil)
		f.Add(buildBlock(wp, 50))
	}
	policies := make([]Policy, 0, len(Names()))
	for _, name := range Names() {
		p, _ := ByName(name)
		policies = append(policies, p)
	}
	f.Fuzz(func(t *testing.T, block []byte) {
		if fl, _, err := OpenBlock(block, nil); err == nil {
			fl.MayContain([]byte("k"))
			if af, ok := fl.(AdaptiveFilter); ok {
				_ = af.Adapt([]byte("k"))
			}
		}
		for _, p := range policies {
			p.MayContain(pebble.TableFilter, block, []byte("k"))
		}
	})
}

// FuzzDecodeLocal fuzzes the local-state decoders behind the checksum:
// arbitrary local states of every kind decode to an error or to a filter
// whose queries and adaptations do not panic.
func FuzzDecodeLocal(f *testing.F) {
	for _, name := range Names() {
		block := buildBlock(fixedPolicy(f, name, 3), 100)
		h, local, err := VerifyBlock(block)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(h.Kind), uint64(100), local)
	}
	f.Fuzz(func(t *testing.T, kind uint8, numKeys uint64, local []byte) {
		h := Header{Version: FormatVersion, Kind: KindCode(kind%8 + 1), Seed: 3, NumKeys: numKeys}
		fl, err := DecodeLocal(h, local, adaptive.MemRemote(make([]uint64, 256)))
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptBlock)
			return
		}
		for i := 0; i < 20; i++ {
			if fl.MayContain(absent(i)) {
				if af, ok := fl.(AdaptiveFilter); ok {
					_ = af.Adapt(absent(i))
				}
			}
		}
	})
}

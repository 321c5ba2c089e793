package prefix

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func addrOf(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

func encodeKeys(t testing.TB, n int, seed uint64) []byte {
	f, err := BuildWithSeed(makeKeys(n, 's', seed), seed)
	require.NoError(t, err)
	data, err := f.MarshalBinary()
	require.NoError(t, err)
	return data
}

// reseal recomputes the checksum so that structural validation is what
// must catch a mutation.
func reseal(data []byte) {
	if len(data) < checksumSize {
		return
	}
	end := len(data) - checksumSize
	binary.LittleEndian.PutUint32(data[end:], crc32.Checksum(data[:end], castagnoli))
}

func requireCorrupt(t *testing.T, data []byte, msgAndArgs ...any) {
	t.Helper()
	f, err := Decode(data)
	require.True(t, f == nil, msgAndArgs...)
	require.Error(t, err, msgAndArgs...)
	require.True(t, errors.Is(err, ErrCorrupt), "%v", err)
}

func TestDecodeTruncated(t *testing.T) {
	for _, n := range []int{0, 1, 60, 3000} {
		data := encodeKeys(t, n, uint64(n))
		for l := 0; l < len(data); l++ {
			requireCorrupt(t, data[:l], "n=%d len=%d", n, l)
		}
		requireCorrupt(t, append(data[:len(data):len(data)], 0), "trailing byte")
	}
}

func TestDecodeBitFlips(t *testing.T) {
	data := encodeKeys(t, 3000, 2)
	for i := 0; i < len(data)*8; i++ {
		mutated := append([]byte(nil), data...)
		mutated[i/8] ^= 1 << (i % 8)
		requireCorrupt(t, mutated, "bit %d", i)
	}
}

func TestDecodeHostileHeaders(t *testing.T) {
	data := encodeKeys(t, 3000, 4)
	_, err := Decode(data)
	require.NoError(t, err)
	put := func(off int, v uint64) []byte {
		d := append([]byte(nil), data...)
		binary.LittleEndian.PutUint64(d[off:], v)
		reseal(d)
		return d
	}
	requireCorrupt(t, func() []byte { d := put(8, 4); d[0] = 'Q'; reseal(d); return d }(), "magic")
	requireCorrupt(t, func() []byte { d := put(8, 4); d[4] = 2; reseal(d); return d }(), "version")
	requireCorrupt(t, func() []byte { d := put(8, 4); d[6] = 1; reseal(d); return d }(), "reserved")
	requireCorrupt(t, func() []byte { d := put(8, 4); d[60] = 1; reseal(d); return d }(), "reserved tail")
	for _, n := range []uint64{0, 1, 2000, 4000, 1 << 40, ^uint64(0)} {
		requireCorrupt(t, put(16, n), "n=%d", n)
	}
	for _, m := range []uint64{0, 1, 126, 128, 1 << 59, ^uint64(0)} {
		requireCorrupt(t, put(24, m), "m=%d", m)
	}
	for _, b := range []uint64{0, 1 << 58, ^uint64(0)} {
		requireCorrupt(t, put(32, b), "blocks=%d", b)
	}
	entries := binary.LittleEndian.Uint64(data[40:])
	require.Positive(t, entries, "3000 keys in 127 bins overflow some bins")
	for _, e := range []uint64{0, 3001, ^uint64(0)} {
		requireCorrupt(t, put(40, e), "entries=%d", e)
	}
	// Mark an overflowed bin as not overflowed and the reverse.
	for b := 0; b < 127; b++ {
		d := append([]byte(nil), data...)
		d[headerSize+b*binBytes] ^= binNotOverflowed
		reseal(d)
		requireCorrupt(t, d, "bin %d flag", b)
	}
}

// TestDecodeResealedMutations flips random bits and fixes the checksum:
// Decode must reject the bytes or accept a structurally valid filter whose
// queries are well defined.
func TestDecodeResealedMutations(t *testing.T) {
	data := encodeKeys(t, 500, 6)
	rng := rand.New(rand.NewPCG(1, 2))
	probes := makeKeys(100, 'a', 1)
	accepted := 0
	iters := 20000
	if testing.Short() {
		iters = 4000
	}
	for it := 0; it < iters; it++ {
		d := append([]byte(nil), data...)
		for f := 0; f <= rng.IntN(4); f++ {
			bit := rng.IntN((len(d) - checksumSize) * 8)
			d[bit/8] ^= 1 << (bit % 8)
		}
		reseal(d)
		f, err := Decode(d)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			continue
		}
		accepted++
		for _, k := range probes {
			f.MayContain(k)
		}
	}
	t.Logf("accepted %d of %d resealed mutations (spare-bit flips are valid)", accepted, iters)
}

func checkDecode(t *testing.T, data []byte) {
	f, err := Decode(data)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error does not wrap ErrCorrupt: %v", err)
		}
		if f != nil {
			t.Fatalf("non-nil filter with error")
		}
		return
	}
	var k [16]byte
	for i := 0; i < 64; i++ {
		binary.LittleEndian.PutUint64(k[:], uint64(i)*0x9e3779b97f4a7c15)
		f.MayContain(k[:i%17])
	}
	again, err := f.MarshalBinary()
	if err != nil || string(again) != string(data) {
		t.Fatalf("re-encoding differs")
	}
	if f.BitsPerKey() < 0 || f.SizeBytes() != len(data) {
		t.Fatalf("bad sizes")
	}
}

// FuzzDecode feeds arbitrary bytes to Decode. The seed corpus in
// testdata/fuzz/FuzzDecode holds valid encodings and near misses.
func FuzzDecode(f *testing.F) {
	for _, n := range []int{0, 1, 40} {
		f.Add(encodeKeys(f, n, uint64(n)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
	})
}

// FuzzDecodeResealed fixes up the checksum of the fuzzed bytes before
// decoding, so the fuzzer reaches the structural validation behind it.
func FuzzDecodeResealed(f *testing.F) {
	for _, n := range []int{0, 1, 40, 300} {
		f.Add(encodeKeys(f, n, uint64(n)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = append([]byte(nil), data...)
		reseal(data)
		checkDecode(t, data)
	})
}

// TestWriteFuzzCorpus regenerates the checked-in seed corpus of FuzzDecode
// and FuzzDecodeResealed when PREFIXFILTER_WRITE_CORPUS=1; otherwise it
// checks that the corpus exists and that Decode handles every entry.
func TestWriteFuzzCorpus(t *testing.T) {
	valid := map[string][]byte{}
	for _, n := range []int{0, 1, 40, 300} {
		valid[fmt.Sprintf("valid_n%d", n)] = encodeKeys(t, n, uint64(n))
	}
	entries := map[string][]byte{"empty": {}, "magic_only": []byte(magic)}
	for name, data := range valid {
		entries[name] = data
		entries[name+"_truncated"] = data[:len(data)/2]
		entries[name+"_header_only"] = data[:headerSize]
		flipped := append([]byte(nil), data...)
		flipped[len(flipped)/3] ^= 0x10
		entries[name+"_bitflip"] = flipped
		badBin := append([]byte(nil), data...)
		badBin[headerSize] ^= 0x40 // first header bit of bin 0
		reseal(badBin)
		entries[name+"_resealed_bad_bin"] = badBin
	}
	write := os.Getenv("PREFIXFILTER_WRITE_CORPUS") == "1"
	for _, target := range []string{"FuzzDecode", "FuzzDecodeResealed"} {
		dir := filepath.Join("testdata", "fuzz", target)
		if write {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			for name, data := range entries {
				body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
			}
		}
		files, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(files), len(entries), "seed corpus in %s", dir)
	}
	for name, data := range entries {
		_, err := Decode(data)
		if _, ok := valid[name]; ok {
			require.NoError(t, err, name)
		} else {
			require.ErrorIs(t, err, ErrCorrupt, name)
		}
	}
}

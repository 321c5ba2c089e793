package quotient

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"

	"github.com/adaptkv/adaptkv/filter"
)

// Encoding (little-endian):
//
//	0  magic "AKVA"     4  version (1)   5  kind   6  remainder bits   7  0
//	8  seed             16 load factor (float64 bits)
//	24 quotient range   32 block count   40 element count
//	48 adaptations      56 rebuilds      64 remote reads
//	72 block words (block count * words per block * 8 bytes)
//	.. CRC-32C of everything before it
const (
	encMagic   = "AKVA"
	encVersion = 1
	encHeader  = 72
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// MarshalBinary implements Filter. It holds the adaptation lock, so the
// encoding is a consistent snapshot.
func (f *qf) MarshalBinary() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]byte, encHeader, encHeader+len(f.words)*8+4)
	copy(out, encMagic)
	out[4], out[5], out[6] = encVersion, byte(f.variant), byte(f.r)
	le := binary.LittleEndian
	le.PutUint64(out[8:], f.seed)
	le.PutUint64(out[16:], math.Float64bits(f.load))
	le.PutUint64(out[24:], f.nq)
	le.PutUint64(out[32:], uint64(f.nblocks))
	le.PutUint64(out[40:], uint64(f.n))
	le.PutUint64(out[48:], f.adaptations.Load())
	le.PutUint64(out[56:], f.rebuilds.Load())
	le.PutUint64(out[64:], f.remoteReads.Load())
	for i := range f.words {
		out = le.AppendUint64(out, f.load64(i))
	}
	return le.AppendUint32(out, crc32.Checksum(out, crcTable)), nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Decode rebuilds a filter from MarshalBinary output, copying it into
// memory. remote is the filter's remote representation (it may be nil for
// RSQF; an adaptive filter without one returns ErrRemote from Adapt).
// Every field and the whole structure are validated: errors wrap ErrCorrupt.
func Decode(data []byte, remote filter.Remote) (Filter, error) {
	f, err := decode(data)
	if err != nil {
		return nil, err
	}
	f.remote = remote
	return f, nil
}

func decode(data []byte) (*qf, error) {
	if len(data) < encHeader+4 {
		return nil, corrupt("%d bytes is shorter than the header", len(data))
	}
	if string(data[:4]) != encMagic {
		return nil, corrupt("bad magic %q", data[:4])
	}
	if data[4] != encVersion {
		return nil, corrupt("unsupported version %d", data[4])
	}
	le := binary.LittleEndian
	body := data[:len(data)-4]
	if got, want := crc32.Checksum(body, crcTable), le.Uint32(data[len(data)-4:]); got != want {
		return nil, corrupt("checksum mismatch (%08x != %08x)", got, want)
	}
	f := &qf{variant: Variant(data[5]), r: uint(data[6])}
	if !f.variant.valid() {
		return nil, corrupt("unknown variant %d", data[5])
	}
	if f.r < MinRemainderBits || f.r > MaxRemainderBits || data[7] != 0 {
		return nil, corrupt("bad remainder bits %d", data[6])
	}
	f.seed = le.Uint64(data[8:])
	f.load = math.Float64frombits(le.Uint64(data[16:]))
	if math.IsNaN(f.load) || f.load <= 0 || f.load > MaxLoadFactor {
		return nil, corrupt("bad load factor %v", f.load)
	}
	f.initParams()
	f.nq = le.Uint64(data[24:])
	nblocks := le.Uint64(data[32:])
	n := le.Uint64(data[40:])
	words := uint64(len(body)-encHeader) / 8
	if uint64(len(body)-encHeader)%8 != 0 || nblocks == 0 || words%uint64(f.wpb) != 0 || words/uint64(f.wpb) != nblocks {
		return nil, corrupt("block count %d does not match %d payload bytes", nblocks, len(body)-encHeader)
	}
	if f.nq == 0 || f.nq > nblocks*64 || n > nblocks*64 {
		return nil, corrupt("quotient range %d / elements %d do not fit %d blocks", f.nq, n, nblocks)
	}
	f.nblocks, f.n = int(nblocks), int(n)
	f.adaptations.Store(le.Uint64(data[48:]))
	f.rebuilds.Store(le.Uint64(data[56:]))
	f.remoteReads.Store(le.Uint64(data[64:]))
	f.words = make([]uint64, words)
	for i := range f.words {
		f.words[i] = le.Uint64(body[encHeader+8*i:])
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// validate checks the whole structure: occupied quotients in range, one
// runend per occupied quotient in order, stored offsets equal to the true
// ones, element count, and every block's adaptivity state.
func (f *qf) validate() error {
	occTotal, endTotal := 0, 0
	for b := 0; b < f.nblocks; b++ {
		occ := f.words[b*f.wpb+wOcc]
		if lim := int64(f.nq) - int64(b)*64; lim < 64 {
			var valid uint64
			if lim > 0 {
				valid = uint64(1)<<uint(lim) - 1
			}
			if occ&^valid != 0 {
				return corrupt("block %d: occupied bit beyond the quotient range", b)
			}
		}
		occTotal += bits.OnesCount64(occ)
		endTotal += bits.OnesCount64(f.words[b*f.wpb+wRunends])
	}
	if occTotal != endTotal {
		return corrupt("%d occupied quotients but %d runends", occTotal, endTotal)
	}
	if occTotal > f.n {
		return corrupt("%d runs for %d elements", occTotal, f.n)
	}
	if f.words[wMeta]&0xff != 0 {
		return corrupt("block 0 has a nonzero offset")
	}
	F, prevEnd, used := 0, -1, 0
	for b := 0; b < f.nblocks; b++ {
		meta := f.words[b*f.wpb+wMeta]
		if stored := int(meta & 0xff); stored != min(F, offsetSat) {
			return corrupt("block %d: offset %d, structure says %d", b, stored, F)
		}
		occ := f.words[b*f.wpb+wOcc]
		t := 0
		for x := occ; x != 0; x &= x - 1 {
			t++
			q := b*64 + bits.TrailingZeros64(x)
			e := f.selectRunend(b*64+F, t)
			if e < q || e <= prevEnd {
				return corrupt("quotient %d: run end %d out of order", q, e)
			}
			used += e - max(q, prevEnd+1) + 1
			prevEnd = e
		}
		if occ == 0 {
			F = max(0, F-64)
		} else {
			F = max(0, prevEnd-(b+1)*64+1)
		}
		if err := f.validateCode(b); err != nil {
			return err
		}
	}
	if used != f.n {
		return corrupt("runs hold %d slots, header says %d elements", used, f.n)
	}
	return nil
}

func (f *qf) validateCode(b int) error {
	return f.v.validateCode(f, b, f.words[b*f.wpb:(b+1)*f.wpb])
}

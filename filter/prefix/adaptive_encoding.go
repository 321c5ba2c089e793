package prefix

import (
	"encoding/binary"
	"hash/crc32"
	"slices"

	"github.com/adaptkv/adaptkv/filter"
)

// The adaptive prefix filter's encoding is the static filter's encoding
// (unchanged, so its bins keep their alignment) followed by the fix
// section (all integers little-endian):
//
//	offset  size
//	0       4      magic "APFX"
//	4       1      version (1)
//	5       3      zero
//	8       8      groups with fixes k
//	16      8      their words w in all
//	24      ...    k records in increasing group order: group index (4),
//	               words c (4), the group's c words (8 each; fixgroup.go)
//	end-4   4      CRC-32C (Castagnoli) of the section before it
//
// A fresh filter's section has k = 0 (28 bytes).
const (
	fixMagic        = "APFX"
	fixVersion      = 1
	fixHeaderSize   = 24
	fixRecordHeader = 8
	emptyFixSize    = fixHeaderSize + checksumSize
)

// MarshalBinary encodes the filter with its fixes (the form DecodeAdaptive
// reads).
func (f *AdaptiveFilter) MarshalBinary() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return appendFixSection(slices.Clip(slices.Clone(f.base.data)), f.groups), nil
}

// appendFixSection appends the fix section of groups to dst.
func appendFixSection(dst []byte, groups []atomicGroup) []byte {
	start := len(dst)
	dst = append(dst, fixMagic...)
	dst = append(dst, fixVersion, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, 0)
	dst = binary.LittleEndian.AppendUint64(dst, 0)
	var count, words uint64
	for gi := range groups {
		g := groups[gi].Load()
		if g == nil {
			continue
		}
		dst = binary.LittleEndian.AppendUint32(dst, uint32(gi))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(g.w)))
		for _, w := range g.w {
			dst = binary.LittleEndian.AppendUint64(dst, w)
		}
		count++
		words += uint64(len(g.w))
	}
	binary.LittleEndian.PutUint64(dst[start+8:], count)
	binary.LittleEndian.PutUint64(dst[start+16:], words)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// emptyFixSection is the fix section of a filter with no fixes.
func emptyFixSection(dst []byte) []byte { return appendFixSection(dst, nil) }

// DecodeAdaptive returns the adaptive filter encoded in data (as produced by
// APrefixKind's builder or MarshalBinary), reading its remote representation
// through remote (nil: adaptations fail with filter.ErrRemote). The static
// part is queried in place, so data must not be modified afterwards. Every
// error wraps ErrCorrupt; every fix is checked against the bin it fixes.
func DecodeAdaptive(data []byte, remote filter.Remote) (*AdaptiveFilter, error) {
	return decodeAdaptive(data, remote, maxCentiBitsPerKey)
}

// decodeAdaptive is DecodeAdaptive with a cap on the local state of
// maxCenti hundredths of a bit per key.
func decodeAdaptive(data []byte, remote filter.Remote, maxCenti uint64) (*AdaptiveFilter, error) {
	size := encodedLen(data)
	if size == 0 || size > uint64(len(data)) {
		return nil, corrupt("adaptive filter of %d bytes has no whole static part", len(data))
	}
	base, err := Decode(data[:size:size])
	if err != nil {
		return nil, err
	}
	f := newAdaptive(base, remote, maxCenti)
	if err := f.decodeFixes(data[size:]); err != nil {
		return nil, err
	}
	return f, nil
}

// decodeFixes installs the groups of a fix section, validating it whole.
func (f *AdaptiveFilter) decodeFixes(sec []byte) error {
	if len(sec) < emptyFixSize {
		return corrupt("fix section of %d bytes", len(sec))
	}
	if string(sec[0:4]) != fixMagic || sec[4] != fixVersion || sec[5]|sec[6]|sec[7] != 0 {
		return corrupt("bad fix section header")
	}
	end := len(sec) - checksumSize
	if got, want := crc32.Checksum(sec[:end], castagnoli), binary.LittleEndian.Uint32(sec[end:]); got != want {
		return corrupt("fix section checksum mismatch: computed %08x, stored %08x", got, want)
	}
	count := binary.LittleEndian.Uint64(sec[8:])
	words := binary.LittleEndian.Uint64(sec[16:])
	if count > uint64(len(f.groups)) || words > uint64(end) ||
		uint64(end-fixHeaderSize) != count*fixRecordHeader+8*words {
		return corrupt("fix section: %d groups, %d words in %d bytes", count, words, len(sec))
	}
	rec := sec[fixHeaderSize:end]
	prev := int64(-1)
	for len(rec) > 0 {
		gi := uint64(binary.LittleEndian.Uint32(rec))
		c := uint64(binary.LittleEndian.Uint32(rec[4:]))
		if int64(gi) <= prev || gi >= uint64(len(f.groups)) || c > uint64(len(rec)-fixRecordHeader)/8 {
			return corrupt("fix group %d (%d words) out of order or out of range", gi, c)
		}
		w := make([]uint64, c)
		for i := range w {
			w[i] = binary.LittleEndian.Uint64(rec[fixRecordHeader+8*i:])
		}
		fixes, err := decodeFixGroup(w)
		if err != nil {
			return corrupt("fix group %d: %v", gi, err)
		}
		for i := 0; i < len(fixes); {
			k := i
			for k < len(fixes) && fixes[k].j == fixes[i].j {
				k++
			}
			if err := f.base.checkFixes(gi*fixGroupBins+uint64(fixes[i].j), fixes[i:k]); err != nil {
				return err
			}
			i = k
		}
		g := &fixGroup{w: w}
		f.groups[gi].Store(g)
		f.fixBytes.Add(int64(g.size()))
		prev = int64(gi)
		rec = rec[fixRecordHeader+8*c:]
	}
	if int(f.fixBytes.Load()) > f.budget {
		return corrupt("fixes take %d bytes, above the budget of %d", f.fixBytes.Load(), f.budget)
	}
	return nil
}

// checkFixes validates the fixes of bin b against the bin: a bin that
// exists; each slot fix names an occupied slot and has an extension; each
// spare fix names a fingerprint above the maximum of an overflowed bin; a
// slot's set is consecutive, without repeats, and an exclusion is alone in
// its set.
func (f *Filter) checkFixes(b uint64, fixes []fix) error {
	if b >= f.numBins {
		return corrupt("fix for bin %d of %d", b, f.numBins)
	}
	pd := f.bins[b*binBytes : b*binBytes+binBytes]
	count, overflowed, _ := validatePD(pd)
	w0 := binary.LittleEndian.Uint64(pd[0:8])
	maxFP := (w0&fieldMask)<<8 | uint64(pd[31])
	for i, x := range fixes {
		switch {
		case x.slot == spareSlot:
			if !overflowed || uint64(x.fp) <= maxFP || uint64(x.fp) >= fingerprintRange {
				return corrupt("bin %d: bad spare fix", b)
			}
		case int(x.slot) >= count || x.l == 0:
			return corrupt("bin %d: bad fix for slot %d", b, x.slot)
		}
		inSet := i > 0 && fixes[i-1].same(x)
		for k, y := range fixes[i+1:] {
			if x.same(y) && (k > 0 || y == x || x.l == 0 || y.l == 0) || inSet && x == fixes[i-1] {
				return corrupt("bin %d: slot %d (fingerprint %d): malformed fix set", b, x.slot, x.fp)
			}
		}
	}
	return nil
}

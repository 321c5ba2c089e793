package knownneg

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"slices"

	"github.com/adaptkv/adaptkv/internal/base"

	"github.com/adaptkv/adaptkv/internal/atomicfile"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// errCorruptFile is wrapped by Decode and Load for bytes that are not a
// whole, checksummed known-negatives file. It also matches the module's one
// corruption error (kv.ErrCorruption).
var errCorruptFile = base.CorruptionKind("knownneg: corrupt known-negatives file")

// File layout (little-endian), version 1:
//
//	magic "akvn" | version u8 | hash seed u64 | entries uvarint |
//	entries x (key length uvarint, key, count uvarint) | crc32c of all before, u32
const fileVersion = 1

var (
	fileMagic  = [4]byte{'a', 'k', 'v', 'n'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// maxKeyLen bounds a key read from a file (the store's own key limit is
// far below it).
const maxKeyLen = 1 << 20

// Encode returns the file bytes of the sketch's keys and counts.
func (s *Sketch) Encode() []byte {
	l := s.Snapshot()
	b := append([]byte{}, fileMagic[:]...)
	b = append(b, fileVersion)
	b = binary.LittleEndian.AppendUint64(b, s.seed)
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, e := range l {
		b = binary.AppendUvarint(b, uint64(len(e.Key)))
		b = append(b, e.Key...)
		b = binary.AppendUvarint(b, e.Count)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// Decode adds the keys and counts of file bytes b to the sketch (which
// keeps its capacity: the most counted keys win). Errors match the
// module's corruption error (kv.ErrCorruption) and leave the sketch
// unchanged.
func (s *Sketch) Decode(b []byte) error {
	bad := func(what string) error { return fmt.Errorf("%w: %s", errCorruptFile, what) }
	if len(b) < len(fileMagic)+1+8+1+4 {
		return bad("too short")
	}
	if [4]byte(b[:4]) != fileMagic {
		return bad("bad magic")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return bad("checksum mismatch")
	}
	if body[4] != fileVersion {
		return bad(fmt.Sprintf("unsupported version %d", body[4]))
	}
	seed := binary.LittleEndian.Uint64(body[5:])
	p := body[13:]
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)) {
		return bad("bad entry count")
	}
	p = p[k:]
	type kc struct {
		key   []byte
		count uint64
	}
	entries := make([]kc, 0, n)
	for i := uint64(0); i < n; i++ {
		klen, k := binary.Uvarint(p)
		if k <= 0 || klen > maxKeyLen || klen > uint64(len(p)-k) {
			return bad(fmt.Sprintf("entry %d: bad key length", i))
		}
		key := p[k : k+int(klen)]
		p = p[k+int(klen):]
		c, k2 := binary.Uvarint(p)
		if k2 <= 0 {
			return bad(fmt.Sprintf("entry %d: bad count", i))
		}
		p = p[k2:]
		entries = append(entries, kc{key, c})
	}
	if len(p) != 0 {
		return bad("trailing bytes")
	}
	// The most counted keys first, each into an empty slot of its set (a
	// full set keeps the more counted keys it already holds), so a sketch
	// smaller than the file keeps the most counted keys with their counts.
	// Loading is not querying: it does not advance aging.
	slices.SortStableFunc(entries, func(a, b kc) int { return cmp.Compare(b.count, a.count) })
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held.Load() == 0 {
		// The file's layout: a sketch of the same capacity holds every key.
		// Only a sketch nothing was recorded in yet (Open) changes seed,
		// before any Record reads it.
		s.seed = seed
	}
	for _, e := range entries {
		s.insertLocked(hash(s.seed, e.key), e.key, e.count, false)
	}
	return nil
}

// Save writes the sketch to path atomically (package atomicfile: a
// temporary file path + ".tmp", fsync, rename, directory fsync).
func (s *Sketch) Save(fs vfs.FS, path string) error {
	return atomicfile.Write(fs, path, path+".tmp", s.Encode())
}

// Load adds the file at path to the sketch. A missing file is not an
// error (nothing is loaded); a damaged one returns an error matching the
// module's corruption error and loads nothing.
func (s *Sketch) Load(fs vfs.FS, path string) error {
	f, err := fs.Open(path)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	return s.Decode(b)
}

package sstable

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/adaptkv/adaptkv/internal/atomicfile"

	"github.com/adaptkv/adaptkv/adaptive"
	"github.com/adaptkv/adaptkv/filterpolicy"
)

// Adaptive state file layout (little-endian):
//
//	0  4  magic "akvs"
//	4  1  version (1)
//	5  1  filter kind
//	6  2  reserved, zero
//	8  8  filter seed           } bind the state to one table: a state file
//	16 4  filter block checksum } of another table (different random seed,
//	20 8  table file size       } block checksum or size) is rejected
//	28 4  payload length
//	32 .. payload: the adaptive filter's MarshalBinary (local state)
//	.. 4  crc32c of everything before it
const (
	stateHeaderSize = 32
	stateVersion    = 1
	maxStateSize    = 1 << 31
)

var stateMagic = [4]byte{'a', 'k', 'v', 's'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (t *tableFilter) encodeState(payload []byte) []byte {
	b := make([]byte, stateHeaderSize, stateHeaderSize+len(payload)+4)
	copy(b, stateMagic[:])
	b[4] = stateVersion
	b[5] = byte(t.hdr.Kind)
	binary.LittleEndian.PutUint64(b[8:], t.hdr.Seed)
	binary.LittleEndian.PutUint32(b[16:], t.hdr.Checksum)
	binary.LittleEndian.PutUint64(b[20:], t.tableSize)
	binary.LittleEndian.PutUint32(b[28:], uint32(len(payload)))
	b = append(b, payload...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeState validates a state file against this table and returns its payload.
func (t *tableFilter) decodeState(b []byte) ([]byte, error) {
	if len(b) < stateHeaderSize+4 {
		return nil, fmt.Errorf("state file of %d bytes is truncated", len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("state file checksum mismatch")
	}
	if [4]byte(b[0:4]) != stateMagic {
		return nil, fmt.Errorf("bad state file magic %q", b[0:4])
	}
	if b[4] != stateVersion {
		return nil, fmt.Errorf("state file version %d not supported", b[4])
	}
	if filterpolicy.KindCode(b[5]) != t.hdr.Kind || binary.LittleEndian.Uint64(b[8:]) != t.hdr.Seed ||
		binary.LittleEndian.Uint32(b[16:]) != t.hdr.Checksum || binary.LittleEndian.Uint64(b[20:]) != t.tableSize {
		return nil, fmt.Errorf("state file belongs to another table")
	}
	n := int(binary.LittleEndian.Uint32(b[28:]))
	if n != len(body)-stateHeaderSize {
		return nil, fmt.Errorf("state payload length %d, file holds %d", n, len(body)-stateHeaderSize)
	}
	return body[stateHeaderSize:], nil
}

// loadState replaces the pristine adaptive filter by the saved one, if a
// valid state file for this table exists.
func (t *tableFilter) loadState() {
	if t.statePath == "" {
		return
	}
	f, err := t.fs.Open(t.statePath)
	if err != nil {
		t.stateErr = fmt.Errorf("%w: %w", ErrNoState, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.stateErr = fmt.Errorf("%w: %w", ErrStateCorrupt, err)
		return
	}
	if st.Size() > maxStateSize {
		t.stateErr = fmt.Errorf("%w: state file of %d bytes", ErrStateCorrupt, st.Size())
		return
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		t.stateErr = fmt.Errorf("%w: %w", ErrStateCorrupt, err)
		return
	}
	payload, err := t.decodeState(b)
	if err != nil {
		t.stateErr = fmt.Errorf("%w: %s: %w", ErrStateCorrupt, t.statePath, err)
		return
	}
	var rem adaptive.Remote
	if t.remote != nil {
		rem = t.remote
	}
	f2, err := filterpolicy.DecodeLocal(t.hdr, payload, rem)
	if err != nil {
		t.stateErr = fmt.Errorf("%w: %s: %w", ErrStateCorrupt, t.statePath, err)
		return
	}
	af, ok := f2.(filterpolicy.AdaptiveFilter)
	if !ok {
		t.stateErr = fmt.Errorf("%w: state decodes to a static filter", ErrStateCorrupt)
		return
	}
	t.filter, t.adaptive = af, af
}

// SaveState atomically persists the adaptive filter's state to StatePath
// (temp file, fsync, rename, directory fsync). It is a no-op for static
// filters, without StatePath, or when nothing changed since the last save.
// With StateReadOnly it writes nothing and returns an error wrapping
// ErrReadOnlyState.
func (r *Reader) SaveState() error {
	sh := r.enter()
	if sh == nil {
		return ErrClosed
	}
	defer r.exit(sh)
	if r.opts.StateReadOnly {
		return fmt.Errorf("%w: %s", ErrReadOnlyState, r.opts.StatePath)
	}
	return r.saveState()
}

// saveState writes the state unless unchanged; saves are serialized.
func (t *tableFilter) saveState() error {
	if t.adaptive == nil || t.statePath == "" || t.stateReadOnly {
		return nil
	}
	t.saveMu.Lock()
	defer t.saveMu.Unlock()
	n := t.adaptations.Load() + t.preAdaptations.Load()
	if n == t.savedAdapt.Load() {
		return nil
	}
	payload, err := t.adaptive.MarshalBinary()
	if err != nil {
		return fmt.Errorf("sstable: encoding adaptive state: %w", err)
	}
	if err := atomicfile.Write(t.fs, t.statePath, t.statePath+".tmp", t.encodeState(payload)); err != nil {
		return err
	}
	t.savedAdapt.Store(n)
	return nil
}

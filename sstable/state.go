package sstable

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/internal/atomicfile"

	"github.com/adaptkv/adaptkv/filterpolicy"
)

// Adaptive state file layout (little-endian):
//
//	0  4  magic "akvs"
//	4  1  version (2; version 1 files, without the history, are read too)
//	5  1  filter kind
//	6  2  reserved, zero
//	8  8  filter seed           } bind the state to one table: a state file
//	16 4  filter block checksum } of another table (different random seed,
//	20 8  table file size       } block checksum or size) is rejected
//	28 4  payload length
//	32 8  history: adaptations  } FilterHistory at the save (version 2)
//	40 8  history: rebuilds     }
//	48 8  history: false positives
//	56 .. payload: the adaptive filter's MarshalBinary (local state)
//	.. 4  crc32c of everything before it
const (
	stateHeaderSizeV1 = 32
	stateHeaderSize   = 56
	stateVersion      = 2
	maxStateSize      = 1 << 31
)

var stateMagic = [4]byte{'a', 'k', 'v', 's'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (t *tableFilter) encodeState(payload []byte, h FilterHistory) []byte {
	b := make([]byte, stateHeaderSize, stateHeaderSize+len(payload)+4)
	copy(b, stateMagic[:])
	b[4] = stateVersion
	b[5] = byte(t.hdr.Code)
	binary.LittleEndian.PutUint64(b[8:], t.hdr.Seed)
	binary.LittleEndian.PutUint32(b[16:], t.hdr.Checksum)
	binary.LittleEndian.PutUint64(b[20:], t.tableSize)
	binary.LittleEndian.PutUint32(b[28:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(b[32:], h.Adaptations)
	binary.LittleEndian.PutUint64(b[40:], h.Rebuilds)
	binary.LittleEndian.PutUint64(b[48:], h.FalsePositives)
	b = append(b, payload...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeState validates a state file against this table and returns its
// payload and the history saved with it (zero in a version 1 file).
func (t *tableFilter) decodeState(b []byte) ([]byte, FilterHistory, error) {
	var h FilterHistory
	if len(b) < stateHeaderSizeV1+4 {
		return nil, h, fmt.Errorf("state file of %d bytes is truncated", len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, h, fmt.Errorf("state file checksum mismatch")
	}
	if [4]byte(b[0:4]) != stateMagic {
		return nil, h, fmt.Errorf("bad state file magic %q", b[0:4])
	}
	hdrSize := stateHeaderSizeV1
	switch b[4] {
	case 1:
	case stateVersion:
		hdrSize = stateHeaderSize
		if len(body) < hdrSize {
			return nil, h, fmt.Errorf("state file of %d bytes is truncated", len(b))
		}
		h = FilterHistory{Adaptations: binary.LittleEndian.Uint64(b[32:]), Rebuilds: binary.LittleEndian.Uint64(b[40:]),
			FalsePositives: binary.LittleEndian.Uint64(b[48:])}
	default:
		return nil, h, fmt.Errorf("state file version %d not supported", b[4])
	}
	if filter.Code(b[5]) != t.hdr.Code || binary.LittleEndian.Uint64(b[8:]) != t.hdr.Seed ||
		binary.LittleEndian.Uint32(b[16:]) != t.hdr.Checksum || binary.LittleEndian.Uint64(b[20:]) != t.tableSize {
		return nil, h, fmt.Errorf("state file belongs to another table")
	}
	n := int(binary.LittleEndian.Uint32(b[28:]))
	if n != len(body)-hdrSize {
		return nil, h, fmt.Errorf("state payload length %d, file holds %d", n, len(body)-hdrSize)
	}
	return body[hdrSize:], h, nil
}

// stateBuffer returns a buffer for a state file of n bytes whose payload,
// the local state the filter queries in place, starts a cache line, as a
// filter block's does (localBuffer).
func stateBuffer(n int) []byte { return filter.AlignedBytes(n, stateHeaderSize) }

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
	b := stateBuffer(int(st.Size()))
	if _, err := io.ReadFull(f, b); err != nil {
		t.stateErr = fmt.Errorf("%w: %w", ErrStateCorrupt, err)
		return
	}
	payload, hist, err := t.decodeState(b)
	if err != nil {
		t.stateErr = fmt.Errorf("%w: %s: %w", ErrStateCorrupt, t.statePath, err)
		return
	}
	var rem filter.Remote
	if t.remote != nil {
		rem = t.remote
	}
	f2, err := filterpolicy.DecodeLocal(t.hdr, payload, rem)
	if err != nil {
		t.stateErr = fmt.Errorf("%w: %s: %w", ErrStateCorrupt, t.statePath, err)
		return
	}
	af, ok := f2.(filter.Adaptive)
	if !ok {
		t.stateErr = fmt.Errorf("%w: state decodes to a static filter", ErrStateCorrupt)
		return
	}
	t.filter, t.adaptive = af, af
	t.prior = hist
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

// saveState writes the state unless unchanged since the last save (no new
// adaptation, no new false positive); saves are serialized.
func (r *Reader) saveState() error {
	t := &r.tableFilter
	if t.adaptive == nil || t.statePath == "" || t.stateReadOnly {
		return nil
	}
	t.saveMu.Lock()
	defer t.saveMu.Unlock()
	n := t.adaptations.Load() + t.preAdaptations.Load()
	fps := r.falsePositives()
	if n == t.savedAdapt.Load() && fps == t.savedFPs.Load() {
		return nil
	}
	payload, err := t.adaptive.MarshalBinary()
	if err != nil {
		return fmt.Errorf("sstable: encoding adaptive state: %w", err)
	}
	if err := atomicfile.Write(t.fs, t.statePath, t.statePath+".tmp", t.encodeState(payload, r.History())); err != nil {
		return err
	}
	t.savedAdapt.Store(n)
	t.savedFPs.Store(fps)
	return nil
}

// FilterHistory is what a table's adaptive filter has done over the
// table's life: the counts saved with its adaptive state, plus those of
// the readers since (Reader.History). A static filter has none.
type FilterHistory struct {
	// Adaptations counts the false positives fixed (pre-adaptations
	// included).
	Adaptations uint64
	// Rebuilds counts blocks rebuilt from the remote representation.
	Rebuilds uint64
	// FalsePositives counts the lookups the filter let through that
	// found no version of their key.
	FalsePositives uint64
}

// History returns the filter's history: that saved in the state file the
// reader loaded (none without one) plus this reader's counts.
func (r *Reader) History() FilterHistory {
	t := &r.tableFilter
	h := t.prior
	if t.adaptive == nil {
		return h
	}
	h.Adaptations += t.adaptations.Load() + t.preAdaptations.Load()
	h.Rebuilds += t.adaptive.Stats().Rebuilds
	h.FalsePositives += r.falsePositives()
	return h
}

// falsePositives sums the reader's false-positive probes.
func (r *Reader) falsePositives() uint64 {
	var n uint64
	for i := range r.shards {
		n += r.shards[i].fpProbes.Load()
	}
	return n
}

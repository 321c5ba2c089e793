package sstable

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/adaptkv/adaptkv/filterpolicy"
	psst "github.com/cockroachdb/pebble/v2/sstable"
)

// Properties returns the table's Pebble properties block (entry counts,
// raw and block sizes, compression, ...).
func (r *Reader) Properties() (psst.Properties, error) {
	sh := r.enter()
	if sh == nil {
		return psst.Properties{}, ErrClosed
	}
	defer r.exit(sh)
	p, err := r.pr.ReadPropertiesBlock(context.Background(), nil)
	if err != nil {
		return psst.Properties{}, fmt.Errorf("%w: %s: properties: %w", ErrCorrupt, r.path, err)
	}
	return p, nil
}

// RemoteBytes is the size of the filter's remote section on disk (0 for a
// static filter).
func (r *Reader) RemoteBytes() uint64 {
	if r.remote == nil {
		return 0
	}
	return uint64(r.hdr.RemoteSize())
}

// VerifyResult is what Verify read.
type VerifyResult struct {
	// Keys counts the point keys read (every version), Smallest and
	// Largest are the first and last user keys (nil for a table of range
	// tombstones only).
	Keys              uint64
	Smallest, Largest []byte
	// RemoteSlots counts the remote slots read (0 for a static filter).
	RemoteSlots int
}

// verifyRemoteBatch is how many remote slots Verify reads at a time.
const verifyRemoteBatch = 64 * filterpolicy.RemoteChunkSlots

// Verify reads the whole table and checks what can be checked: every data
// block (Pebble verifies each block's checksum as it reads it) through a
// scan that also checks that the keys ascend in internal-key order, the
// filter (its block decoded, and the adaptive state, if the reader was
// opened with one, not damaged) answering "maybe" for every stored user
// key (a "no" would be a false negative), and every chunk of the remote
// section (their checksums). The first damage found is returned, wrapping
// ErrCorrupt (or ErrStateCorrupt) and naming the file.
func (r *Reader) Verify() (VerifyResult, error) {
	var res VerifyResult
	if err := r.FilterError(); err != nil {
		return res, fmt.Errorf("%w: %s: filter block: %w", ErrCorrupt, r.path, err)
	}
	if err := r.StateError(); err != nil && !errors.Is(err, ErrNoState) {
		return res, err
	}
	it, err := r.NewIter(nil, nil)
	if err != nil {
		return res, err
	}
	var prev InternalKey
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if res.Keys > 0 && CompareInternalKeys(prev, k) >= 0 {
			it.Close()
			return res, fmt.Errorf("%w: %s: key %q#%d after %q#%d", ErrCorrupt, r.path, k.UserKey, k.Seq, prev.UserKey, prev.Seq)
		}
		if r.filter != nil && (res.Keys == 0 || !bytes.Equal(prev.UserKey, k.UserKey)) && !r.filter.MayContain(k.UserKey) {
			it.Close()
			return res, fmt.Errorf("%w: %s: the filter answers absent for stored key %q (a false negative)", ErrCorrupt, r.path, k.UserKey)
		}
		if res.Keys == 0 {
			res.Smallest = bytes.Clone(k.UserKey)
		}
		prev = InternalKey{UserKey: append(prev.UserKey[:0], k.UserKey...), Seq: k.Seq, Kind: k.Kind}
		res.Keys++
	}
	if err := it.Close(); err != nil {
		return res, fmt.Errorf("%w: %s: %w", ErrCorrupt, r.path, err)
	}
	if res.Keys > 0 {
		res.Largest = bytes.Clone(prev.UserKey)
	}
	if r.remote != nil {
		buf := make([]uint64, verifyRemoteBatch)
		for first := 0; first < r.remote.Slots(); first += verifyRemoteBatch {
			n := min(verifyRemoteBatch, r.remote.Slots()-first)
			if err := r.remote.ReadSlots(first, buf[:n]); err != nil {
				return res, fmt.Errorf("%w: %s: remote section: %w", ErrCorrupt, r.path, err)
			}
			res.RemoteSlots += n
		}
	}
	return res, nil
}

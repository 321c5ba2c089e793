package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Record framing constants of pebble/record (legacy chunk format).
const (
	recBlockSize     = 32 << 10
	recHeaderSize    = 7
	recFullChunk     = 1
	recFirstChunk    = 2
	recChecksumDelta = 0xa282ead8
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// recordChunkValid reports whether a valid full or first chunk of the record
// framing starts at data[p:], and returns its payload prefix.
func recordChunkValid(data []byte, p int) ([]byte, bool) {
	if p+recHeaderSize > len(data) {
		return nil, false
	}
	typ := data[p+6]
	if typ != recFullChunk && typ != recFirstChunk {
		return nil, false
	}
	length := int(binary.LittleEndian.Uint16(data[p+4 : p+6]))
	blockEnd := (p/recBlockSize + 1) * recBlockSize
	end := p + recHeaderSize + length
	if end > blockEnd || end > len(data) {
		return nil, false
	}
	c := crc32.Update(0, crcTable, data[p+6:end])
	if binary.LittleEndian.Uint32(data[p:p+4]) != (c>>15|c<<17)+recChecksumDelta {
		return nil, false
	}
	return data[p+recHeaderSize : end], true
}

// readLog reads every record of a record-framed file, calling fn for each.
// At the first unreadable record at offset off, it calls bad(off) and stops;
// bad decides whether that is a tolerated torn tail (nil) or corruption.
func readLog(data []byte, fn func(rec []byte) error, bad func(off int64, cause error) error) error {
	r := record.NewReader(bytes.NewReader(data), 0)
	for {
		off := r.Offset()
		rr, err := r.Next()
		if err == io.EOF {
			return nil
		}
		var rec []byte
		if err == nil {
			rec, err = io.ReadAll(rr)
		}
		if err != nil {
			return bad(off, err)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
}

// laterSyncedRecord reports whether a valid record starts after off whose
// synced-offset header is beyond off (requireSynced) or any valid record
// starts after off (!requireSynced).
func laterSyncedRecord(data []byte, off int64, requireSynced bool) bool {
	for p := int(off) + 1; p+recHeaderSize <= len(data); p++ {
		payload, ok := recordChunkValid(data, p)
		if !ok {
			continue
		}
		if !requireSynced {
			return true
		}
		if len(payload) >= 8 && int64(binary.LittleEndian.Uint64(payload[:8])) > off {
			return true
		}
	}
	return false
}

// replayWAL reads the WAL file at path and calls fn for each batch.
//
// Corruption policy: a record that fails its checksum or is cut short ends
// the replay. It is a torn tail, tolerated (the records from there on are
// dropped), when the file is the newest WAL (newest: every later WAL is
// empty) and no later valid record says the file had been fsynced past the
// bad record. In an older WAL it depends on the next WAL's switch record
// (sealedAt >= 0: where it says this WAL's records end):
//   - at sealedAt, with no valid record after it, it is where the records
//     end (a mapped WAL whose switch did not finish still has its zero
//     tail);
//   - before sealedAt, with no later record fsynced past it, the machine
//     crashed before the switch had fsynced the WAL: errSwitchTorn (the
//     records before the bad one count; the next WALs do not, since their
//     writes came later and none was acknowledged durable: a Sync write
//     waits for the switch). A file that ends before sealedAt is torn too.
//
// Anything else is corruption: an error wrapping ErrCorruption (an older
// WAL without a switch record after it was fsynced whole before the next
// one was named).
// It returns the offset just past the last good record.
func replayWAL(fs vfs.FS, path string, newest bool, sealedAt int64, fn func(data []byte) error) (good int64, err error) {
	data, err := readFile(fs, path)
	if err != nil {
		return 0, err
	}
	err = readLog(data, func(rec []byte) error {
		if err := fn(rec); err != nil {
			return err
		}
		return nil
	}, func(off int64, cause error) error {
		good = off
		switch {
		case sealedAt >= 0 && off == sealedAt && !laterSyncedRecord(data, off, false):
			return errSealedEnd
		case sealedAt >= 0 && off < sealedAt && !laterSyncedRecord(data, off, true):
			return errSwitchTorn
		case sealedAt < 0 && newest && !laterSyncedRecord(data, off, true):
			return errTornTail
		}
		return fmt.Errorf("%w: WAL %s: bad record at offset %d: %v", ErrCorruption, path, off, cause)
	})
	switch {
	case errors.Is(err, errTornTail), errors.Is(err, errSealedEnd):
		return good, nil
	case errors.Is(err, errSwitchTorn):
		return good, err
	case err == nil:
		good = int64(len(data))
		if sealedAt >= 0 && good < sealedAt {
			return good, errSwitchTorn // the file lost its end
		}
		if sealedAt >= 0 && good > sealedAt {
			return good, fmt.Errorf("%w: WAL %s: records to offset %d, past %d where the next WAL's switch record says they end",
				ErrCorruption, path, good, sealedAt)
		}
	}
	return good, err
}

var (
	errSealedEnd  = errors.New("kv: the end of a sealed WAL")
	errSwitchTorn = errors.New("kv: a WAL torn before its switch finished")
)

// firstRecord returns the first record of the WAL file at path, nil if it
// has none it can read. A switch record is the first record a WAL gets, so
// the first block holds it: only a first record that does not fit there
// makes it read the whole file.
func firstRecord(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	block := make([]byte, recBlockSize)
	n, err := io.ReadFull(f, block)
	_ = f.Close()
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	if rec := readFirst(block[:n]); rec != nil || n < recBlockSize {
		return rec, nil
	}
	data, err := readFile(fs, path)
	if err != nil {
		return nil, err
	}
	return readFirst(data), nil
}

// readFirst returns the first record of a WAL's data, nil if it has none
// it can read.
func readFirst(data []byte) []byte {
	var first []byte
	_ = readLog(data, func(rec []byte) error {
		first = rec
		return errStop
	}, func(int64, error) error { return errStop })
	return first
}

var errTornTail = errors.New("kv: torn tail")

// walHasData reports whether the WAL file at path holds anything but
// zeros. A mapped WAL is allocated ahead of its records, so a WAL that got
// no record is zeros, not zero bytes long; a crash can leave either.
func walHasData(fs vfs.FS, path string) (bool, error) {
	f, err := fs.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	// Read a block at a time and stop at the first nonzero byte: a WAL with
	// records answers from its first block, and only an all-zero one (a
	// mapped WAL allocated but never written) is read to its end.
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if slices.ContainsFunc(buf[:n], func(b byte) bool { return b != 0 }) {
			return true, nil
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

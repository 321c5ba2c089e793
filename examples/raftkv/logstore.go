package raftkv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/adaptkv/adaptkv/kv"
	"github.com/hashicorp/raft"
)

// LogStore is a raft.LogStore and raft.StableStore in an adaptkv store of
// its own: entry i under "l" + i (8 bytes, big endian), stable values
// under "s" + key. Every write is synced (Raft's safety rests on its term
// and vote surviving a crash), and deleting a compacted prefix of the log
// is one DeleteRange.
type LogStore struct {
	db *kv.DB
}

var _ interface {
	raft.LogStore
	raft.StableStore
} = (*LogStore)(nil)

// OpenLogStore opens (or creates) the log store in dir (opts may be nil).
func OpenLogStore(dir string, opts *kv.Options) (*LogStore, error) {
	db, err := kv.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	return &LogStore{db: db}, nil
}

// Close closes the store.
func (s *LogStore) Close() error { return s.db.Close() }

// logKey is the key of entry i.
func logKey(i uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'l'}, i) }

// Log keys span [logLow, logHigh).
var (
	logLow  = []byte{'l'}
	logHigh = []byte{'m'}
)

// FirstIndex implements raft.LogStore.
func (s *LogStore) FirstIndex() (uint64, error) { return s.edge(true) }

// LastIndex implements raft.LogStore.
func (s *LogStore) LastIndex() (uint64, error) { return s.edge(false) }

func (s *LogStore) edge(first bool) (uint64, error) {
	it, err := s.db.NewIter(&kv.IterOptions{LowerBound: logLow, UpperBound: logHigh})
	if err != nil {
		return 0, err
	}
	var ok bool
	if first {
		ok = it.First()
	} else {
		ok = it.Last()
	}
	var i uint64
	if ok {
		i = binary.BigEndian.Uint64(it.Key()[1:])
	}
	return i, it.Close()
}

// GetLog implements raft.LogStore.
func (s *LogStore) GetLog(index uint64, l *raft.Log) error {
	v, err := s.db.Get(logKey(index))
	if errors.Is(err, kv.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return err
	}
	return decodeLog(v, l)
}

// StoreLog implements raft.LogStore.
func (s *LogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: one synced batch.
func (s *LogStore) StoreLogs(logs []*raft.Log) error {
	b := s.db.NewBatch()
	for _, l := range logs {
		if err := b.Set(logKey(l.Index), encodeLog(l)); err != nil {
			return err
		}
	}
	return s.db.Apply(b, kv.Sync)
}

// DeleteRange implements raft.LogStore (min and max inclusive).
func (s *LogStore) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	end := logHigh
	if max < 1<<64-1 {
		end = logKey(max + 1)
	}
	return s.db.DeleteRange(logKey(min), end, kv.Sync)
}

func stableKey(k []byte) []byte { return append([]byte{'s'}, k...) }

// Set implements raft.StableStore.
func (s *LogStore) Set(key, val []byte) error { return s.db.Set(stableKey(key), val, kv.Sync) }

// Get implements raft.StableStore: an empty value for a key never set.
func (s *LogStore) Get(key []byte) ([]byte, error) {
	v, err := s.db.Get(stableKey(key))
	if errors.Is(err, kv.ErrNotFound) {
		return []byte{}, nil
	}
	return v, err
}

// SetUint64 implements raft.StableStore.
func (s *LogStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore: 0 for a key never set.
func (s *LogStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil || len(v) == 0 {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftkv: stable value %q of %d bytes, want 8", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// encodeLog: index, term (8 bytes each), type (1), appended-at (unix
// nanoseconds, 8), then data and extensions, each length-prefixed.
func encodeLog(l *raft.Log) []byte {
	b := make([]byte, 0, 25+len(l.Data)+len(l.Extensions)+2*binary.MaxVarintLen64)
	b = binary.BigEndian.AppendUint64(b, l.Index)
	b = binary.BigEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	b = binary.BigEndian.AppendUint64(b, uint64(l.AppendedAt.UnixNano()))
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	return append(b, l.Extensions...)
}

var errBadLog = errors.New("raftkv: malformed log entry")

func decodeLog(b []byte, l *raft.Log) error {
	if len(b) < 25 {
		return errBadLog
	}
	l.Index = binary.BigEndian.Uint64(b)
	l.Term = binary.BigEndian.Uint64(b[8:])
	l.Type = raft.LogType(b[16])
	l.AppendedAt = time.Unix(0, int64(binary.BigEndian.Uint64(b[17:])))
	data, rest, ok := field(b[25:])
	if !ok {
		return errBadLog
	}
	ext, rest, ok := field(rest)
	if !ok || len(rest) != 0 {
		return errBadLog
	}
	l.Data, l.Extensions = data, ext
	if len(l.Extensions) == 0 {
		l.Extensions = nil
	}
	if len(l.Data) == 0 {
		l.Data = nil
	}
	return nil
}

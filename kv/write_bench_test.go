package kv

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/stretchr/testify/require"
)

// writeStore is what BenchmarkWriteVsPebble writes through: the store under
// test or a pebble.DB, each with its own defaults.
type writeStore interface {
	set(key, value []byte, sync bool) error
	// stalled is how long writers have waited for flushes so far.
	stalled() time.Duration
	// background is what flushes and compactions did so far.
	background() backgroundWork
	close() error
}

// backgroundWork is the time flushes and compactions took and the table
// bytes they wrote, so the two stores' background costs can be compared.
type backgroundWork struct {
	flushTime, compactTime time.Duration
	flushes                int64
	flushed, compacted     uint64
}

// writeAmp is the table bytes flushes and compactions wrote per byte
// flushed (Metrics.WriteAmplification for the store).
func (w backgroundWork) writeAmp() float64 {
	if w.flushed == 0 {
		return 0
	}
	return float64(w.flushed+w.compacted) / float64(w.flushed)
}

type kvWriteStore struct{ db *DB }

func (s kvWriteStore) set(key, value []byte, sync bool) error {
	if sync {
		return s.db.Set(key, value, Sync)
	}
	return s.db.Set(key, value, NoSync)
}
func (s kvWriteStore) close() error           { return s.db.Close() }
func (s kvWriteStore) stalled() time.Duration { return s.db.Metrics().WriteStallTime }
func (s kvWriteStore) background() backgroundWork {
	m := s.db.Metrics()
	return backgroundWork{m.FlushTime, m.CompactionTime, int64(m.Flushes), m.BytesFlushed, m.BytesCompacted}
}

type pebbleWriteStore struct {
	db    *pebble.DB
	stall *stallClock
}

// stallClock sums Pebble's write stalls (its EventListener's
// WriteStallBegin and WriteStallEnd).
type stallClock struct {
	mu    sync.Mutex
	since time.Time
	total time.Duration
}

func (c *stallClock) begin() {
	c.mu.Lock()
	c.since = time.Now()
	c.mu.Unlock()
}

func (c *stallClock) end() {
	c.mu.Lock()
	if !c.since.IsZero() {
		c.total += time.Since(c.since)
		c.since = time.Time{}
	}
	c.mu.Unlock()
}

func (s pebbleWriteStore) stalled() time.Duration {
	s.stall.mu.Lock()
	defer s.stall.mu.Unlock()
	return s.stall.total
}

func (s pebbleWriteStore) background() backgroundWork {
	m := s.db.Metrics()
	w := backgroundWork{flushTime: m.Flush.WriteThroughput.WorkDuration, compactTime: m.Compact.Duration, flushes: m.Flush.Count}
	for l := range m.Levels {
		w.flushed += m.Levels[l].TableBytesFlushed
		w.compacted += m.Levels[l].TableBytesCompacted
	}
	return w
}

func (s pebbleWriteStore) set(key, value []byte, sync bool) error {
	if sync {
		return s.db.Set(key, value, pebble.Sync)
	}
	return s.db.Set(key, value, pebble.NoSync)
}
func (s pebbleWriteStore) close() error { return s.db.Close() }

func openWriteStore(b *testing.B, name string) writeStore {
	dir := b.TempDir()
	switch name {
	case "kv", "kv-buffered":
		db, err := Open(dir, &Options{WALBufferNoSync: name == "kv-buffered"})
		require.NoError(b, err)
		return kvWriteStore{db}
	default:
		// Pebble with its bloom filter (10 bits/key) on every level and
		// the store's defaults where an option means the same in both
		// (pebbleLikeKV).
		clock := &stallClock{}
		o := &pebble.Options{Logger: quietPebbleLogger{}, EventListener: &pebble.EventListener{
			WriteStallBegin: func(pebble.WriteStallBeginInfo) { clock.begin() },
			WriteStallEnd:   clock.end,
		}}
		pebbleLikeKV(o, Options{})
		o.EnsureDefaults()
		for i := range o.Levels {
			o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		}
		db, err := pebble.Open(dir, o)
		require.NoError(b, err)
		return pebbleWriteStore{db, clock}
	}
}

// pebbleLikeKV sets the options of o that mean the same in both engines
// to the store's for opts (defaults filled in): the memtable size, the
// memtables queued before writers stall (Pebble's count includes the
// mutable one), the L0 thresholds, the compactions at once and the open
// tables. The rest stay Pebble's.
func pebbleLikeKV(o *pebble.Options, opts Options) {
	opts.EnsureDefaults()
	o.MemTableSize = uint64(opts.MemTableSize)
	o.MemTableStopWritesThreshold = opts.MaxImmutableMemTables + 1
	o.L0CompactionThreshold = opts.L0CompactionThreshold
	o.L0StopWritesThreshold = opts.L0StopWritesThreshold
	n := opts.MaxConcurrentCompactions
	o.CompactionConcurrencyRange = func() (int, int) { return n, n }
	o.MaxOpenFiles = opts.MaxOpenFiles
}

type quietPebbleLogger struct{}

func (quietPebbleLogger) Infof(string, ...any)  {}
func (quietPebbleLogger) Errorf(string, ...any) {}
func (quietPebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// writeKey is key i of the benchmark's write stream: 16 bytes in random
// order (a 64-bit mix of i, twice), the same stream for both stores.
func writeKey(dst []byte, i uint64) []byte {
	h := i*0x9E3779B97F4A7C15 ^ 0x5851F42D4C957F2D
	dst = binary.BigEndian.AppendUint64(dst[:0], h)
	return binary.BigEndian.AppendUint64(dst, h*0xBF58476D1CE4E5B9)
}

// BenchmarkWriteVsPebble writes the same stream of 16-byte keys in random
// order with 100-byte values into the store and into a pebble.DB, both on
// the OS file system, the store with its default options and Pebble with
// the same ones where they mean the same (pebbleLikeKV: 4 MiB memtables,
// writers stall at 5, 2 compactions at once) (kv-buffered: with
// Options.WALBufferNoSync, Pebble's NoSync durability): NoSync writes from one and
// from two goroutines, and Sync writes from 16. In the plain modes every
// write has the same value (the stream of the first measurements), which snappy
// compresses to a few bytes a key in a row block and less well in a
// columnar one; the -distinct modes give each write a value of its own,
// incompressible, as most stores' values are. ns/op is the wall time per
// write of all goroutines together (so kv/pebble throughput is the inverse
// ratio of their ns/op); p50, p99 and p99.9 are the latencies of single
// writes; stall-ms is how long writers waited for flushes; flushes is how
// many memtables were flushed before the store closed; ms/flush is the
// time a flush took, compact-ms and ms/compacted-MiB the compactions' time
// in all and per MiB of tables they wrote, and flushed-B/write the table
// bytes flushed per write (what every later compaction of it rewrites).
//
//	go test ./kv -run '^$' -bench WriteVsPebble -benchtime 200000x
func BenchmarkWriteVsPebble(b *testing.B) {
	modes := []struct {
		name       string
		goroutines int
		sync       bool
		distinct   bool
	}{
		{"nosync-1", 1, false, false},
		{"nosync-2", 2, false, false},
		{"sync-16", 16, true, false},
		{"nosync-1-distinct", 1, false, true},
		{"nosync-2-distinct", 2, false, true},
		{"sync-16-distinct", 16, true, true},
	}
	for _, m := range modes {
		for _, store := range []string{"kv", "kv-buffered", "pebble"} {
			b.Run(fmt.Sprintf("%s/%s", m.name, store), func(b *testing.B) {
				benchWrites(b, openWriteStore(b, store), m.goroutines, m.sync, newWriteValues(m.distinct))
			})
		}
	}
}

// writeValues are the benchmark's 100-byte values: one random value for
// every write, or (distinct) a window of a 64 KiB random pool at an offset
// mixed from the write's number. The mix is independent of writeKey's, so
// the values next to each other in a table's 4 KiB blocks seldom share a
// byte snappy could find (two windows overlap with odds of about 1 in 330).
type writeValues struct {
	pool     []byte
	distinct bool
}

const writeValueLen = 100

func newWriteValues(distinct bool) writeValues {
	n := writeValueLen
	if distinct {
		n += 64 << 10
	}
	pool := make([]byte, n)
	for i := range pool {
		pool[i] = byte(rand.Uint32())
	}
	return writeValues{pool, distinct}
}

// value is write i's value.
func (v writeValues) value(i uint64) []byte {
	if !v.distinct {
		return v.pool
	}
	off := ((i ^ 0x2545F4914F6CDD1D) * 0xD6E8FEB86659FD93) >> 48
	return v.pool[off : off+writeValueLen]
}

func benchWrites(b *testing.B, s writeStore, goroutines int, syncWrites bool, values writeValues) {
	lat := make([][]time.Duration, goroutines)
	var next sync.Mutex
	n := uint64(0)
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	b.SetBytes(16 + writeValueLen)
	b.ResetTimer()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		// Room for every latency up front: growing the slice copied up to
		// 8 MB (and faulted its fresh pages in) inside the timed loop.
		lat[g] = make([]time.Duration, 0, b.N/goroutines+64)
		go func(g int) {
			defer wg.Done()
			var key []byte
			for {
				// Claim writes in runs of 64 so goroutines share b.N.
				next.Lock()
				start := n
				n += 64
				next.Unlock()
				if start >= uint64(b.N) {
					return
				}
				end := min(start+64, uint64(b.N))
				for i := start; i < end; i++ {
					key = writeKey(key, i)
					t0 := time.Now()
					if err := s.set(key, values.value(i), syncWrites); err != nil {
						errs <- err
						return
					}
					lat[g] = append(lat[g], time.Since(t0))
				}
			}
		}(g)
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	q := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Nanoseconds())
	}
	b.ReportMetric(q(0.50), "p50-ns")
	b.ReportMetric(q(0.99), "p99-ns")
	b.ReportMetric(q(0.999), "p99.9-ns")
	b.ReportMetric(float64(s.stalled().Milliseconds()), "stall-ms")
	bg := s.background()
	b.ReportMetric(bg.writeAmp(), "WA")
	b.ReportMetric(float64(bg.flushes), "flushes")
	b.ReportMetric(float64(bg.flushTime.Milliseconds())/float64(max(bg.flushes, 1)), "ms/flush")
	b.ReportMetric(float64(bg.compactTime.Milliseconds()), "compact-ms")
	if bg.compacted > 0 {
		b.ReportMetric(bg.compactTime.Seconds()*1e3/(float64(bg.compacted)/(1<<20)), "ms/compacted-MiB")
	}
	b.ReportMetric(float64(bg.flushed)/float64(b.N), "flushed-B/write")
	require.NoError(b, s.close())
}

package kv

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

const (
	crashEnvDir   = "KV_CRASH_DIR"
	crashEnvRound = "KV_CRASH_ROUND"
	crashEnvSync  = "KV_CRASH_SYNC"
	crashEnvNoMap = "KV_CRASH_NOMAP"
	crashEnvSeed  = "KV_CRASH_SEED"
	crashWriters  = 4
)

var flagCrashSeed = flag.Uint64("kv.crashseed", 0, "TestCrashKill: seed of the kill times and the children's reads and reopens (0 = time-based; logged)")

func crashOptions() *Options {
	return &Options{MemTableSize: 64 << 10, L0CompactionThreshold: 2, TargetFileSize: 32 << 10}
}

func crashKey(round, g, i int) []byte { return fmt.Appendf(nil, "r%02d-g%d-%08d", round, g, i) }
func crashPair(k []byte) []byte       { return append(bytes.Clone(k), "-pair"...) }
func crashValue(k []byte) []byte      { return bytes.Repeat(append(bytes.Clone(k), '/'), 6) }

// crashJunk is the j-th key that key k's writer writes and then deletes
// with a range deletion, before it writes k (every crashJunkEvery-th key);
// it sorts after k (and its pair) and before the writer's next key.
func crashJunk(k []byte, j int) []byte { return fmt.Appendf(bytes.Clone(k), "~j%d", j) }

const crashJunkEvery = 11

// writeJunk writes key k's junk keys, then deletes them with a range
// deletion.
func writeJunk(db *DB, k []byte, wo *WriteOptions) error {
	b := NewBatch()
	for j := 0; j < 3; j++ {
		_ = b.Set(crashJunk(k, j), crashValue(k))
	}
	if err := db.Apply(b, wo); err != nil {
		return err
	}
	return db.DeleteRange(crashJunk(k, 0), crashJunk(k, 9), wo)
}

// crashJunkOwner reports whether key is a junk key, and the index of the
// key it belongs to.
func crashJunkOwner(key []byte) (int, bool) {
	i := bytes.Index(key, []byte("~j"))
	if i < 8 {
		return 0, false
	}
	n, err := strconv.Atoi(string(key[i-8 : i]))
	return n, err == nil
}

// crashAbsent is a key never written that sorts right after k, inside the
// tables' key ranges: Gets of it reach the filters and adapt them.
func crashAbsent(k []byte, n int) []byte { return fmt.Appendf(bytes.Clone(k), "!%d", n) }

// crashChild writes until it is killed: crashWriters goroutines each write
// keys 0, 1, 2, ... (every 7th as a batch with a "-pair" key; before every
// crashJunkEvery-th, junk keys after it and then a range deletion of them)
// and print "ack g i" once the write returned. Meanwhile a reader asks absent keys
// among the written ones, each twice (the default fix rule fixes a false
// positive when its key returns), so the tables' filters adapt (and save their
// state when they leave the table cache and on Close), and prints the
// adaptations so far ("adapted n"); and now and then (seeded) the store
// is closed and opened again between two writes.
func crashChild(dir string, round int, durable, noMap bool, seed uint64) {
	opts := crashOptions()
	opts.DisableWALMapping = noMap
	open := func() *DB {
		db, err := Open(dir, opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child open:", err)
			os.Exit(2)
		}
		return db
	}
	// dbMu: writers and the reader hold it shared, a reopen exclusively.
	var dbMu sync.RWMutex
	db := open()
	wo := NoSync
	if durable {
		wo = Sync
	}
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		fmt.Fprintf(os.Stdout, format, args...)
		outMu.Unlock()
	}
	var written [crashWriters]atomic.Int64
	for g := 0; g < crashWriters; g++ {
		go func() {
			for i := 0; ; i++ {
				k := crashKey(round, g, i)
				dbMu.RLock()
				var err error
				if i%crashJunkEvery == crashJunkEvery-1 {
					err = writeJunk(db, k, wo)
				}
				switch {
				case err != nil:
				case i%7 == 0:
					b := NewBatch()
					_ = b.Set(k, crashValue(k))
					_ = b.Set(crashPair(k), crashValue(k))
					err = db.Apply(b, wo)
				default:
					err = db.Set(k, crashValue(k), wo)
				}
				dbMu.RUnlock()
				if err != nil {
					fmt.Fprintln(os.Stderr, "child write:", err)
					os.Exit(3)
				}
				written[g].Store(int64(i + 1))
				say("ack %d %d\n", g, i)
			}
		}()
	}
	rng := rand.New(rand.NewPCG(seed, uint64(round)))
	var adapted uint64 // over the sessions closed so far
	for n := 0; ; n++ {
		dbMu.RLock()
		for range 200 {
			g := rng.IntN(crashWriters)
			if w := written[g].Load(); w > 0 {
				k := crashAbsent(crashKey(round, g, rng.IntN(int(w))), n)
				for range 2 {
					if _, err := db.Get(k); !errors.Is(err, ErrNotFound) {
						fmt.Fprintln(os.Stderr, "child read:", err)
						os.Exit(4)
					}
				}
			}
		}
		db.tc.waitFixes()
		say("adapted %d\n", adapted+db.Metrics().Adaptations)
		dbMu.RUnlock()
		if rng.IntN(4) == 0 {
			dbMu.Lock()
			adapted += db.Metrics().Adaptations
			if err := db.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "child close:", err)
				os.Exit(5)
			}
			db = open()
			dbMu.Unlock()
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
}

// TestCrashKill runs a child process that writes (Sync in even rounds,
// NoSync in odd rounds; rounds 2 and 3 of every 4 with DisableWALMapping,
// the others with the WAL mapped where it can be) and kills it with
// SIGKILL at a random point after its first acknowledged write and its
// first round of absent Gets; every acknowledged write must survive (NoSync
// writes reached the OS, and only the process died), each writer's keys
// must form a prefix (the WAL keeps order), batches must be all-or-nothing,
// and earlier rounds stay intact. The children also adapt their filters
// (absent Gets among the written keys; the rounds together must report
// adaptations) and close and reopen the store now and then, so kills land
// in state saves and reopens too. The seed of the kill times and the
// children's choices is logged (-kv.crashseed replays them).
func TestCrashKill(t *testing.T) {
	if dir := os.Getenv(crashEnvDir); dir != "" {
		round, _ := strconv.Atoi(os.Getenv(crashEnvRound))
		seed, _ := strconv.ParseUint(os.Getenv(crashEnvSeed), 10, 64)
		crashChild(dir, round, os.Getenv(crashEnvSync) == "1", os.Getenv(crashEnvNoMap) == "1", seed)
		return
	}
	rounds := 8
	if testing.Short() {
		rounds = 4
	}
	dir := t.TempDir()
	seed := *flagCrashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -kv.crashseed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	survived := make(map[[2]int]int) // (round, writer) -> number of keys present
	var adapted uint64               // adaptations the children reported, over the rounds
	for round := 0; round < rounds; round++ {
		durable, noMap := round%2 == 0, round%4 >= 2
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnvDir+"="+dir, fmt.Sprintf("%s=%d", crashEnvRound, round),
			fmt.Sprintf("%s=%d", crashEnvSync, map[bool]int{false: 0, true: 1}[durable]),
			fmt.Sprintf("%s=%d", crashEnvNoMap, map[bool]int{false: 0, true: 1}[noMap]),
			fmt.Sprintf("%s=%d", crashEnvSeed, seed))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		acked := make([]int, crashWriters)
		for i := range acked {
			acked[i] = -1
		}
		var ackMu sync.Mutex
		var roundAdapted uint64
		firstAck := make(chan struct{})
		firstReads := make(chan struct{}) // the child's first "adapted" line
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			sc := bufio.NewScanner(out)
			once, readsOnce := false, false
			for sc.Scan() {
				var g, i int
				var a uint64
				if n, _ := fmt.Sscanf(sc.Text(), "adapted %d", &a); n == 1 {
					ackMu.Lock()
					roundAdapted = max(roundAdapted, a)
					ackMu.Unlock()
					if !readsOnce {
						readsOnce = true
						close(firstReads)
					}
					continue
				}
				if n, _ := fmt.Sscanf(sc.Text(), "ack %d %d", &g, &i); n == 2 {
					ackMu.Lock()
					acked[g] = max(acked[g], i)
					ackMu.Unlock()
					if !once {
						once = true
						close(firstAck)
					}
				}
			}
			_, _ = io.Copy(io.Discard, out)
		}()
		// The kill waits for the child's first round of absent Gets too: a
		// slow child (the race detector on a loaded machine) could be
		// killed before any, and the rounds would report no adaptation.
		for _, c := range []chan struct{}{firstAck, firstReads} {
			select {
			case <-c:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("round %d: child wrote or read nothing: %s", round, stderr.String())
			}
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		<-readDone
		err = cmd.Wait()
		require.Error(t, err, "child must have been killed; stderr: %s", stderr.String())
		require.NotContains(t, stderr.String(), "child", "round %d", round)

		db, err := Open(dir, crashOptions())
		require.NoError(t, err, "round %d: reopen after kill", round)
		total := 0
		for g := 0; g < crashWriters; g++ {
			n := checkWriterPrefix(t, db, round, g)
			require.GreaterOrEqual(t, n-1, acked[g], "round %d writer %d (sync=%v): acknowledged write lost", round, g, durable)
			survived[[2]int{round, g}] = n
			total += n
		}
		for prev := 0; prev < round; prev++ {
			for g := 0; g < crashWriters; g++ {
				require.Equal(t, survived[[2]int{prev, g}], checkWriterPrefix(t, db, prev, g), "round %d: data of round %d changed", round, prev)
			}
		}
		m := db.Metrics()
		adapted += roundAdapted
		t.Logf("round %d (sync=%v, WAL mapping off=%v): %d keys survived, acked %v, %d adaptations; levels %v",
			round, durable, noMap, total, acked, roundAdapted, m.Levels)
		require.NoError(t, db.Close())
	}
	require.Positive(t, adapted, "the children's filters adapted")
}

// checkWriterPrefix checks the keys of writer g in round: indices 0..n-1
// exactly, correct values, batch pairs all-or-nothing, and no junk key but
// those of key n (whose range deletion may be lost with it). It returns n.
func checkWriterPrefix(t *testing.T, db *DB, round, g int) int {
	prefix := fmt.Sprintf("r%02d-g%d-", round, g)
	it, err := db.NewIter(&IterOptions{LowerBound: []byte(prefix), UpperBound: []byte(prefix + "~")})
	require.NoError(t, err)
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if owner, junk := crashJunkOwner(it.Key()); junk {
			require.Equal(t, n, owner, "round %d writer %d: junk key %q survived its range deletion", round, g, it.Key())
			continue
		}
		k := crashKey(round, g, n)
		require.Equal(t, string(k), string(it.Key()), "round %d writer %d: keys must be a prefix", round, g)
		require.Equal(t, crashValue(k), it.Value())
		if n%7 == 0 {
			require.True(t, it.Next(), "round %d writer %d key %d: batch pair missing", round, g, n)
			require.Equal(t, string(crashPair(k)), string(it.Key()))
			require.Equal(t, crashValue(k), it.Value())
		}
		n++
	}
	require.NoError(t, it.Error())
	// Point reads agree with the scan.
	if n > 0 {
		v, err := db.Get(crashKey(round, g, n-1))
		require.NoError(t, err)
		require.Equal(t, crashValue(crashKey(round, g, n-1)), v)
	}
	_, err = db.Get(crashKey(round, g, n))
	require.ErrorIs(t, err, ErrNotFound)
	return n
}

// TestCrashOS simulates machine crashes with vfs.NewCrashableMem: at random
// points a crash clone keeps only fsynced data (and, in half the clones, a
// random part of the rest); every write acknowledged with Sync must be in
// the reopened clone, through flushes and compactions running meanwhile.
// It runs with the WAL written per commit group (the default) and with
// Options.WALBufferNoSync, whose Sync writes must carry every buffered
// NoSync write before them to disk.
func TestCrashOS(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprintf("WALBufferNoSync=%v", buffered), func(t *testing.T) { crashOS(t, buffered) })
	}
}

func crashOS(t *testing.T, buffered bool) {
	fs := vfs.NewCrashableMem()
	opts := &Options{FS: fs, MemTableSize: 32 << 10, L0CompactionThreshold: 2, TargetFileSize: 16 << 10, WALBufferNoSync: buffered}
	db, err := Open("db", opts)
	require.NoError(t, err)
	defer db.Close()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 2))
	n := 6000
	if testing.Short() {
		n = 2000
	}
	synced := 0 // keys [0, synced) were acknowledged with Sync
	for i := 0; i < n; i++ {
		k := fmt.Appendf(nil, "key%08d", i)
		wo := NoSync
		if i%3 == 0 {
			wo = Sync
		}
		require.NoError(t, db.Set(k, crashValue(k), wo))
		if wo == Sync {
			synced = i + 1
		}
		if rng.IntN(200) == 0 {
			pct := 0
			if rng.IntN(2) == 0 {
				pct = rng.IntN(100)
			}
			clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(rng.Uint64(), 3))})
			cdb, err := Open("db", &Options{FS: clone, MemTableSize: 32 << 10})
			require.NoError(t, err, "seed %d: open crash clone at write %d (unsynced kept %d%%)", seed, i, pct)
			for j := 0; j < synced; j++ {
				k := fmt.Appendf(nil, "key%08d", j)
				v, err := cdb.Get(k)
				require.NoError(t, err, "seed %d: synced key %d lost in crash at write %d", seed, j, i)
				require.Equal(t, crashValue(k), v)
			}
			// Nothing beyond what was written, and a prefix (WAL order).
			it, err := cdb.NewIter(nil)
			require.NoError(t, err)
			cnt := 0
			for ok := it.First(); ok; ok = it.Next() {
				require.Equal(t, fmt.Sprintf("key%08d", cnt), string(it.Key()), "seed %d", seed)
				cnt++
			}
			require.NoError(t, it.Close())
			require.LessOrEqual(t, cnt, i+1)
			require.GreaterOrEqual(t, cnt, synced)
			require.NoError(t, cdb.Close())
		}
	}
}

// walFiles returns the names of the WAL files in dir of fs with data.
func walFiles(t *testing.T, fs vfs.FS, dir string) []string {
	names, err := fs.List(dir)
	require.NoError(t, err)
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			st, err := fs.Stat(fs.PathJoin(dir, n))
			require.NoError(t, err)
			if st.Size() > 0 {
				out = append(out, n)
			}
		}
	}
	return out
}

func rewriteFile(t *testing.T, fs vfs.FS, path string, data []byte) {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

// writeWALOnly writes n synced keys that stay in the WAL (the memtable is
// never flushed) and closes the store.
func writeWALOnly(t *testing.T, fs vfs.FS, n int) string {
	db, err := Open("db", &Options{FS: fs, MemTableSize: 8 << 20})
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		k := fmt.Appendf(nil, "key%06d", i)
		require.NoError(t, db.Set(k, crashValue(k), Sync))
	}
	require.NoError(t, db.Close())
	wals := walFiles(t, fs, "db")
	require.Len(t, wals, 1)
	return fs.PathJoin("db", wals[0])
}

// TestTornWALTail cuts the WAL in the middle of its last record: recovery
// keeps every whole record and drops the torn one, and the store stays
// usable (the WAL is replaced, so a second reopen sees the same data).
func TestTornWALTail(t *testing.T) {
	for _, cut := range []int{1, 7, 20, 60} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			fs := vfs.NewMem()
			const n = 300
			path := writeWALOnly(t, fs, n)
			data, err := readFile(fs, path)
			require.NoError(t, err)
			rewriteFile(t, fs, path, data[:len(data)-cut])
			for reopen := 0; reopen < 2; reopen++ {
				db, err := Open("db", &Options{FS: fs})
				require.NoError(t, err)
				for i := 0; i < n-1; i++ {
					k := fmt.Appendf(nil, "key%06d", i)
					v, err := db.Get(k)
					require.NoError(t, err, "key %d", i)
					require.Equal(t, crashValue(k), v)
				}
				_, err = db.Get(fmt.Appendf(nil, "key%06d", n-1))
				require.ErrorIs(t, err, ErrNotFound, "the torn record must be dropped")
				// Still writable.
				require.NoError(t, db.Set([]byte("after"), []byte("x"), Sync))
				require.NoError(t, db.Close())
			}
		})
	}
}

// TestCorruptWALMiddle flips a byte inside the synced part of the WAL:
// recovery must fail with ErrCorruption, not drop the records after it.
func TestCorruptWALMiddle(t *testing.T) {
	for _, where := range []float64{0.1, 0.5, 0.8} {
		t.Run(fmt.Sprint(where), func(t *testing.T) {
			fs := vfs.NewMem()
			path := writeWALOnly(t, fs, 300)
			data, err := readFile(fs, path)
			require.NoError(t, err)
			data[int(float64(len(data))*where)] ^= 0x5a
			rewriteFile(t, fs, path, data)
			_, err = Open("db", &Options{FS: fs})
			require.ErrorIs(t, err, ErrCorruption)
		})
	}
}

// TestCorruptTable flips bytes of a table: reads report ErrCorruption (or
// the right value, for keys in blocks that are intact), never a wrong value
// or a silent miss of every key.
func TestCorruptTable(t *testing.T) {
	for _, where := range []string{"data", "footer"} {
		t.Run(where, func(t *testing.T) {
			fs := vfs.NewMem()
			db, err := Open("db", &Options{FS: fs, FilterPolicy: "bloom"})
			require.NoError(t, err)
			const n = 2000
			for i := 0; i < n; i++ {
				k := fmt.Appendf(nil, "key%06d", i)
				require.NoError(t, db.Set(k, crashValue(k), NoSync))
			}
			require.NoError(t, db.Flush())
			require.NoError(t, db.Close())
			names, err := fs.List("db")
			require.NoError(t, err)
			var sst string
			for _, nm := range names {
				if strings.HasSuffix(nm, ".sst") {
					require.Empty(t, sst, "one table expected")
					sst = fs.PathJoin("db", nm)
				}
			}
			data, err := readFile(fs, sst)
			require.NoError(t, err)
			if where == "data" {
				for off := 100; off < 110; off++ {
					data[off] ^= 0xff
				}
			} else {
				for off := len(data) - 20; off < len(data); off++ {
					data[off] ^= 0xff
				}
			}
			rewriteFile(t, fs, sst, data)

			db, err = Open("db", &Options{FS: fs, FilterPolicy: "bloom"})
			if err != nil {
				require.ErrorIs(t, err, ErrCorruption)
				return
			}
			defer db.Close()
			errs := 0
			for i := 0; i < n; i++ {
				k := fmt.Appendf(nil, "key%06d", i)
				v, err := db.Get(k)
				if err != nil {
					require.ErrorIs(t, err, ErrCorruption, "key %d", i)
					require.NotErrorIs(t, err, ErrNotFound)
					errs++
					continue
				}
				require.Equal(t, crashValue(k), v, "key %d", i)
			}
			require.Positive(t, errs, "corruption must be reported")
			it, err := db.NewIter(nil)
			if err == nil {
				for ok := it.First(); ok; ok = it.Next() {
				}
				err = it.Error()
				it.Close()
			}
			require.ErrorIs(t, err, ErrCorruption)
		})
	}
}

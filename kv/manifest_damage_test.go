package kv

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// damageStore writes keys, flushes them (the flush's edit is the
// manifest's last record, and its WAL is deleted once the edit is
// durable), writes more keys that stay in the WAL, and closes.
func damageStore(t *testing.T) (vfs.FS, string) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, KnownNegatives: -1})
	require.NoError(t, err)
	for i := range 500 {
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%05d", i), []byte("flushed"), NoSync))
	}
	require.NoError(t, db.Flush())
	for i := 500; i < 600; i++ {
		require.NoError(t, db.Set(fmt.Appendf(nil, "key%05d", i), []byte("wal"), Sync))
	}
	require.NoError(t, db.Close())
	cur, err := readFile(fs, "db/"+currentFileName)
	require.NoError(t, err)
	return fs, "db/" + strings.TrimSpace(string(cur))
}

// requireAllOrCorruption opens the store: it must fail with ErrCorruption
// or hold every acknowledged key, never open without some.
func requireAllOrCorruption(t *testing.T, fs vfs.FS, what string) (opened bool) {
	db, err := Open("db", &Options{FS: fs, KnownNegatives: -1})
	if err != nil {
		require.ErrorIs(t, err, ErrCorruption, what)
		return false
	}
	defer db.Close()
	for i := range 600 {
		_, err := db.Get(fmt.Appendf(nil, "key%05d", i))
		require.NoError(t, err, "%s: key %d lost", what, i)
	}
	return true
}

// A damaged last MANIFEST record whose edit was acted on (the flush's WAL
// is gone) is corruption, not a torn write: before, the store opened
// without the 500 flushed keys. A record torn by a crash (appended and cut
// before anything acted on it) is still tolerated.
func TestDamagedLastManifestRecord(t *testing.T) {
	fs, _ := damageStore(t)
	require.True(t, requireAllOrCorruption(t, fs, "undamaged"), "the undamaged store opens")

	for name, damage := range map[string]func([]byte) []byte{
		"last byte flipped":  func(b []byte) []byte { return flipByte(b, len(b)-1) },
		"last record cut":    func(b []byte) []byte { return b[:len(b)-3] },
		"last record halved": func(b []byte) []byte { return b[:len(b)-8] },
	} {
		fs, man := damageStore(t)
		good, err := readFile(fs, man)
		require.NoError(t, err)
		writeFile(t, fs, man, damage(good))
		opened := requireAllOrCorruption(t, fs, name)
		require.False(t, opened, "%s: the store must report the lost edit", name)
	}

	// A torn write: a new record cut short after the last good one; the
	// state before it is whole, so the store opens with everything.
	fs, man := damageStore(t)
	good, err := readFile(fs, man)
	require.NoError(t, err)
	torn := append(append([]byte{}, good...), []byte{0x12, 0x34, 0x56, 0x78, 0x10, 0x00}...)
	writeFile(t, fs, man, torn)
	require.True(t, requireAllOrCorruption(t, fs, "torn tail"), "a torn tail is tolerated")
}

// A manifest cut short at any offset, a record boundary included (no
// damaged record to see), is corruption or the whole store: cut after the
// first record, the flush's edit is gone with its WAL, and before the
// newer-WAL check the store opened without the 500 flushed keys.
func TestManifestCutAnywhere(t *testing.T) {
	base, man := damageStore(t)
	good, err := readFile(base, man)
	require.NoError(t, err)
	boundaries := 0
	for n := range len(good) {
		fs := cloneFS(t, base, "db")
		// A copy: Pebble's MemFS may scribble over a written buffer (under
		// -race, its invariants build), and good is cut again next round.
		writeFile(t, fs, man, bytes.Clone(good[:n]))
		cut := fmt.Sprintf("cut at %d of %d", n, len(good))
		if st, err := readManifest(fs, "db"); err == nil && st.torn < 0 {
			boundaries++
		}
		require.False(t, requireAllOrCorruption(t, fs, cut), "%s: every cut loses the flush's edit", cut)
	}
	require.Positive(t, boundaries, "no cut fell on a record boundary")
}

// Other damage: each damaged file gives ErrCorruption or every key, never
// a store that opens without acknowledged data.
func TestDamagedFilesNeverLoseData(t *testing.T) {
	for _, c := range []struct {
		name   string
		file   func(fs vfs.FS) string
		damage func([]byte) []byte
	}{
		{"CURRENT garbage", func(vfs.FS) string { return "db/" + currentFileName }, func([]byte) []byte { return []byte("MANIFEST-x\n") }},
		{"CURRENT empty", func(vfs.FS) string { return "db/" + currentFileName }, func([]byte) []byte { return nil }},
		{"MANIFEST first byte", func(fs vfs.FS) string { return manifestOf(t, fs) }, func(b []byte) []byte { return flipByte(b, 0) }},
		{"MANIFEST middle", func(fs vfs.FS) string { return manifestOf(t, fs) }, func(b []byte) []byte { return flipByte(b, len(b)/2) }},
		{"table middle", func(fs vfs.FS) string { return firstWithSuffix(t, fs, ".sst") }, func(b []byte) []byte { return flipByte(b, len(b)/3) }},
		{"table truncated", func(fs vfs.FS) string { return firstWithSuffix(t, fs, ".sst") }, func(b []byte) []byte { return b[:len(b)/2] }},
		{"WAL middle", func(fs vfs.FS) string { return firstWithSuffix(t, fs, ".log") }, func(b []byte) []byte { return flipByte(b, len(b)/2) }},
	} {
		fs, _ := damageStore(t)
		path := c.file(fs)
		b, err := readFile(fs, path)
		require.NoError(t, err, c.name)
		writeFile(t, fs, path, c.damage(b))
		db, err := Open("db", &Options{FS: fs, KnownNegatives: -1})
		if err != nil {
			require.ErrorIs(t, err, ErrCorruption, c.name)
			continue
		}
		for i := range 600 {
			_, err := db.Get(fmt.Appendf(nil, "key%05d", i))
			if err != nil {
				require.ErrorIs(t, err, ErrCorruption, "%s: key %d", c.name, i)
			}
		}
		require.NoError(t, db.Close())
	}
}

func manifestOf(t *testing.T, fs vfs.FS) string {
	cur, err := readFile(fs, "db/"+currentFileName)
	require.NoError(t, err)
	return "db/" + strings.TrimSpace(string(cur))
}

func firstWithSuffix(t *testing.T, fs vfs.FS, suffix string) string {
	names, err := fs.List("db")
	require.NoError(t, err)
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			return "db/" + n
		}
	}
	t.Fatalf("no %s file", suffix)
	return ""
}

// damageRichStore is damageStore with every kind of file: tables (with
// adaptive filters whose state files were saved), the MANIFEST, CURRENT,
// the WAL holding the last acknowledged keys (synced) and KNOWNNEG. Key
// "tail", written last, is the WAL's last record: damage to it reads as a
// torn tail, which recovery drops by design (docs/ARCHITECTURE.md), so it
// is the one key a damaged store may lose.
func damageRichStore(t *testing.T) vfs.FS {
	fs := vfs.NewMem()
	opts := &Options{FS: fs, MemTableSize: 64 << 10, TargetFileSize: 32 << 10}
	db, err := Open("db", opts)
	require.NoError(t, err)
	fillDamageStore(t, db)
	// 5000 distinct absent Gets in the tables' range: about 18 false
	// positives to adapt (state files; none at all is an e^-18 event), and
	// known negatives.
	for i := range 5000 {
		_, err := db.Get(fmt.Appendf(nil, "key%05d-absent%d", i%1500, i/1500))
		require.ErrorIs(t, err, ErrNotFound)
	}
	require.NoError(t, db.Set([]byte("tail"), []byte("last"), Sync))
	require.NoError(t, db.Close())
	return fs
}

// fillDamageStore writes keys 0..1499 (NoSync) into the tables of db,
// flushed and compacted, and keys 1500..1599 (Sync) into its WAL.
func fillDamageStore(t *testing.T, db *DB) {
	for i := range 1500 {
		require.NoError(t, db.Set(damageKey(i), damageValue(i), NoSync))
	}
	require.NoError(t, db.Flush())
	require.NoError(t, db.Compact(nil, nil))
	for i := 1500; i < 1600; i++ {
		require.NoError(t, db.Set(damageKey(i), damageValue(i), Sync))
	}
}

// copyStoreFiles copies every file but LOCK of the store in dir of from,
// open or not, to toDir of to. Copied from the OS file system while the
// store is open, it is what a process killed at that moment leaves (the
// page cache is the files' content).
func copyStoreFiles(t *testing.T, from vfs.FS, dir string, to vfs.FS, toDir string) {
	names, err := from.List(dir)
	require.NoError(t, err)
	for _, n := range names {
		if n == "LOCK" {
			continue
		}
		b, err := readFile(from, from.PathJoin(dir, n))
		require.NoError(t, err)
		writeFile(t, to, to.PathJoin(toDir, n), b)
	}
}

func damageKey(i int) []byte   { return fmt.Appendf(nil, "key%05d", i) }
func damageValue(i int) []byte { return fmt.Appendf(nil, "value-%d-%s", i, strings.Repeat("v", i%50)) }

// cloneFS copies the store in dir into a new in-memory file system.
func cloneFS(t *testing.T, fs vfs.FS, dir string) vfs.FS {
	out := vfs.NewMem()
	require.NoError(t, out.MkdirAll(dir, 0o755))
	copyStoreFiles(t, fs, dir, out, dir)
	return out
}

// TestDamageEveryFile damages each file of a store in many ways (bit flips
// at random offsets, truncations, zeroed ranges, deletion), reopens a copy
// each time, and requires ErrCorruption (from Open or from the Gets that
// touch the damage) or every acknowledged key with its value: never a
// store that answers "not found" or a wrong value for acknowledged data.
// Damage to an adaptive state file or KNOWNNEG is never an error: the
// store opens and answers every key (KnownNegativesError says why the
// record is empty).
func TestDamageEveryFile(t *testing.T) {
	damageEveryFile(t, damageRichStore(t), []string{"table", "wal", "manifest", "current", "state", "knownneg"}, 0)
}

// TestDamageCrashedMappedWAL is TestDamageEveryFile on a copy of an open
// store (what a killed process leaves) whose WAL is mapped: the WAL's
// records are followed by the zeros allocated ahead. Damage there too must
// be ErrCorruption or right answers.
func TestDamageCrashedMappedWAL(t *testing.T) {
	if !walMappingSupported {
		t.Skip("WALs are mapped on Linux only")
	}
	dir := t.TempDir()
	db, err := Open(dir, &Options{MemTableSize: 1 << 20, L0CompactionThreshold: 1000, L0CompactionFileThreshold: 1000, L0StopWritesThreshold: 1000})
	require.NoError(t, err)
	fillDamageStore(t, db)
	require.NoError(t, db.Set([]byte("tail"), []byte("last"), Sync))
	base := vfs.NewMem()
	require.NoError(t, base.MkdirAll("db", 0o755))
	copyStoreFiles(t, vfs.Default, dir, base, "db")
	require.NoError(t, db.Close())
	damageEveryFile(t, base, []string{"table", "wal", "manifest", "current"}, 16<<10)
}

// damageEveryFile runs TestDamageEveryFile's damages on every file of the
// store in base's "db" (keys 0..1599 acknowledged, "tail" last), and
// requires the store to have files of kinds. walHead, if positive, aims
// half the damages to WALs at their first walHead bytes.
func damageEveryFile(t *testing.T, base vfs.FS, kinds []string, walHead int) {
	names, err := base.List("db")
	require.NoError(t, err)
	seen := map[string]bool{}
	rng := rand.New(rand.NewPCG(17, 18))
	// at draws a damage offset in good: anywhere, or with walHead > 0 in
	// a WAL, every other time within its first walHead bytes, where its
	// records are when zeros follow them.
	draws := 0
	at := func(good []byte, kind string) int {
		draws++
		if walHead > 0 && draws%2 == 0 && len(good) > walHead && kind == "wal" {
			return rng.IntN(walHead)
		}
		return rng.IntN(max(len(good), 1))
	}
	flips := 12
	if testing.Short() {
		flips = 4
	}
	type outcome struct{ openFailed, getFailed, whole int }
	results := map[string]*outcome{}
	for _, name := range names {
		if name == "LOCK" {
			continue
		}
		kind := fileKind(name)
		seen[kind] = true
		good, err := readFile(base, "db/"+name)
		require.NoError(t, err)
		// damages[i] returns the damaged bytes and whether to delete the
		// file instead; cuts[i] says it removes a suffix (truncation or
		// deletion).
		var damages []func([]byte) ([]byte, bool)
		var cuts []bool
		for range flips {
			cuts = append(cuts, false)
			i := at(good, kind)
			damages = append(damages, func(b []byte) ([]byte, bool) {
				if len(b) == 0 {
					return []byte{1}, false
				}
				return flipByte(b, i), false
			})
		}
		for range flips / 2 {
			n := at(good, kind)
			damages = append(damages, func(b []byte) ([]byte, bool) { return b[:n], false })
			off := at(good, kind)
			cuts = append(cuts, true, false)
			damages = append(damages, func(b []byte) ([]byte, bool) {
				b = bytes.Clone(b)
				clear(b[off:min(off+16, len(b))])
				return b, false
			})
		}
		damages = append(damages, func([]byte) ([]byte, bool) { return nil, true })
		cuts = append(cuts, true)
		for di, damage := range damages {
			what := fmt.Sprintf("%s damage %d", name, di)
			fs := cloneFS(t, base, "db")
			b, del := damage(bytes.Clone(good))
			if del {
				require.NoError(t, fs.Remove("db/"+name))
			} else {
				writeFile(t, fs, "db/"+name, b)
			}
			o := results[kind]
			if o == nil {
				o = &outcome{}
				results[kind] = o
			}
			db, err := Open("db", &Options{FS: fs, MemTableSize: 64 << 10, TargetFileSize: 32 << 10})
			// A state file or KNOWNNEG is only a hint: damaged or missing,
			// the table's pristine filter or an empty record, never an
			// error (README, "What the filters learn").
			hint := kind == "state" || kind == "knownneg"
			if hint {
				require.NoError(t, err, what)
				if kind == "knownneg" && !del && !bytes.Equal(b, good) {
					require.ErrorIs(t, db.KnownNegativesError(), ErrCorruption, "%s: a damaged record is reported", what)
				}
			}
			if err != nil {
				require.ErrorIs(t, err, ErrCorruption, what)
				o.openFailed++
				continue
			}
			failed := false
			// A WAL cut at a record boundary (truncated, or deleted) reads
			// as a torn tail: nothing records how long it was, so recovery
			// keeps the records before the cut (a prefix of the WAL's
			// keys, 1500 on) and cannot tell. Every other loss is an error.
			walCut := kind == "wal" && cuts[di]
			lostFrom := -1
			for i := range 1600 {
				v, err := db.Get(damageKey(i))
				if walCut && i >= 1500 && errors.Is(err, ErrNotFound) {
					if lostFrom < 0 {
						lostFrom = i
					}
					continue
				}
				require.True(t, lostFrom < 0 || err != nil, "%s: key %d present after lost key %d: not a prefix", what, i, lostFrom)
				if err != nil {
					require.ErrorIs(t, err, ErrCorruption, "%s: key %d", what, i)
					failed = true
					continue
				}
				require.Equal(t, damageValue(i), v, "%s: key %d", what, i)
			}
			if v, err := db.Get([]byte("tail")); err == nil {
				require.Equal(t, []byte("last"), v, what)
			}
			require.False(t, hint && failed, "%s: a damaged hint made a Get fail", what)
			if failed {
				o.getFailed++
			} else {
				o.whole++
			}
			require.NoError(t, db.Close(), what)
		}
	}
	for kind, o := range results {
		t.Logf("%-8s: ErrCorruption at Open %d, at Get %d, every key right %d", kind, o.openFailed, o.getFailed, o.whole)
	}
	for _, k := range kinds {
		require.True(t, seen[k], "the store has no %s file", k)
	}
}

func fileKind(name string) string {
	switch {
	case strings.HasSuffix(name, ".sst"):
		return "table"
	case strings.HasSuffix(name, ".log"):
		return "wal"
	case strings.HasPrefix(name, "MANIFEST"):
		return "manifest"
	case name == currentFileName:
		return "current"
	case strings.HasSuffix(name, ".fstate"):
		return "state"
	case name == knownNegFileName:
		return "knownneg"
	}
	return name
}

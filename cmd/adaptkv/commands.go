package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/adaptkv/adaptkv/filter"
	"github.com/adaptkv/adaptkv/kv"
	"github.com/adaptkv/adaptkv/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// open opens the store in dir read-only.
func open(dir string) (*kv.DB, error) {
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		return nil, fmt.Errorf("%s is not a store (no CURRENT): %w", dir, err)
	}
	db, err := kv.Open(dir, &kv.Options{ReadOnly: true})
	if errors.Is(err, kv.ErrLocked) {
		return nil, fmt.Errorf("%s is in use by a running process (its LOCK is held): %w", dir, err)
	}
	return db, err
}

// withStore checks that args holds min to max arguments and runs fn on
// the store in args[0], opened read-only.
func withStore(args []string, min, max int, fn func(db *kv.DB) error) error {
	if len(args) < min || len(args) > max {
		return errUsage
	}
	db, err := open(args[0])
	if err != nil {
		return err
	}
	err = fn(db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// display prints b as text when every byte is printable ASCII, else as
// hex:<digits> (what parseKey reads back).
func display(b []byte) string {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return "hex:" + hex.EncodeToString(b)
		}
	}
	if bytes.HasPrefix(b, []byte("hex:")) {
		return "hex:" + hex.EncodeToString(b)
	}
	return string(b)
}

// parseKey reads a key given as text or as hex:<digits>.
func parseKey(s string) ([]byte, error) {
	if h, ok := strings.CutPrefix(s, "hex:"); ok {
		b, err := hex.DecodeString(h)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", s, err)
		}
		return b, nil
	}
	return []byte(s), nil
}

// tables says "1 table" or "n tables".
func tables(n int) string {
	if n == 1 {
		return "1 table"
	}
	return fmt.Sprintf("%d tables", n)
}

// size prints n bytes in binary units.
func size(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, u := float64(n), 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", f, units[u])
}

func (c *cli) lsm(args []string) error {
	return withStore(args, 1, 1, func(db *kv.DB) error {
		ts, err := db.Tables()
		if err != nil {
			return err
		}
		m := db.Metrics()
		var total uint64
		for _, t := range ts {
			total += t.Size
		}
		fmt.Fprintf(c.out, "%s: %s, %s; known negatives: %d keys, %s\n",
			args[0], tables(len(ts)), size(total), m.KnownNegatives, size(uint64(max(m.KnownNegativeBytes, 0))))
		for lvl, l := range m.Levels {
			if l.NumFiles > 0 {
				fmt.Fprintf(c.out, "L%d: %s, %s, read amplification %d\n", lvl, tables(l.NumFiles), size(l.Size), l.Sublevels)
			}
		}
		if len(ts) == 0 {
			return nil
		}
		fmt.Fprintln(c.out)
		tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "level\ttable\tsize\tkeys\tkey range\tfilter\tbits/key\tremote\tfixes\tfalse positives")
		for _, t := range ts {
			rng := fmt.Sprintf("[%s, %s]", display(t.Smallest), display(t.Largest))
			if t.RangeDels {
				rng += " +range dels"
			}
			fixes := fmt.Sprint(t.History.Adaptations)
			if t.StateError != nil {
				fixes = "state damaged"
			}
			fmt.Fprintf(tw, "L%d\t%06d.sst\t%s\t%d\t%s\t%s\t%.1f\t%s\t%s\t%d\n", t.Level, t.FileNum, size(t.Size), t.Keys, rng,
				t.FilterKind, t.BitsPerKey, size(t.RemoteBytes), fixes, t.History.FalsePositives)
		}
		return tw.Flush()
	})
}

func (c *cli) check(args []string) error {
	if len(args) != 1 {
		return errUsage
	}
	db, err := open(args[0])
	if err != nil {
		return fmt.Errorf("%s: damaged: %w", args[0], err) // the manifest or a WAL
	}
	rep, err := db.Check()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: damaged: %w", args[0], err)
	}
	fmt.Fprintf(c.out, "%s: ok: manifest, WALs, %s (%s, %d keys, every stored key passes its filter, %d remote slots), state files\n",
		args[0], tables(rep.Tables), size(rep.Bytes), rep.Keys, rep.RemoteSlots)
	return nil
}

func (c *cli) get(args []string) error {
	if len(args) != 2 {
		return errUsage
	}
	key, err := parseKey(args[1])
	if err != nil {
		return err
	}
	return withStore(args[:1], 1, 1, func(db *kv.DB) error {
		v, err := db.Get(key)
		if errors.Is(err, kv.ErrNotFound) {
			return errAbsent
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(c.out, display(v))
		return nil
	})
}

func (c *cli) scan(args []string) error {
	if len(args) < 1 || len(args) > 3 || c.limit < 0 {
		return errUsage
	}
	var o kv.IterOptions
	var err error
	if len(args) > 1 {
		if o.LowerBound, err = parseKey(args[1]); err != nil {
			return err
		}
	}
	if len(args) > 2 {
		if o.UpperBound, err = parseKey(args[2]); err != nil {
			return err
		}
	}
	return withStore(args[:1], 1, 1, func(db *kv.DB) error {
		it, err := db.NewIter(&o)
		if err != nil {
			return err
		}
		n := 0
		for ok := it.First(); ok && (c.limit == 0 || n < c.limit); ok = it.Next() {
			if c.keysOnly {
				fmt.Fprintln(c.out, display(it.Key()))
			} else {
				fmt.Fprintf(c.out, "%s %s\n", display(it.Key()), display(it.Value()))
			}
			n++
		}
		return it.Close()
	})
}

func (c *cli) manifest(args []string) error {
	if len(args) != 1 {
		return errUsage
	}
	name, edits, err := kv.ReadManifest(vfs.Default, args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s: %d edits\n", name, len(edits))
	for i, e := range edits {
		var parts []string
		if e.HasLogNum {
			parts = append(parts, fmt.Sprintf("log %06d", e.LogNum))
		}
		if e.HasNextFileNum {
			parts = append(parts, fmt.Sprintf("next file %d", e.NextFileNum))
		}
		if e.HasLastSeq {
			parts = append(parts, fmt.Sprintf("last seq %d", e.LastSeq))
		}
		fmt.Fprintf(c.out, "#%d %s\n", i, strings.Join(parts, ", "))
		for _, d := range e.Deleted {
			fmt.Fprintf(c.out, "  deleted L%d %06d.sst\n", d.Level, d.FileNum)
		}
		for _, a := range e.Added {
			rd := ""
			if a.RemoteSize > 0 {
				rd = fmt.Sprintf(" (remote %s)", size(a.RemoteSize))
			}
			if a.RangeDels {
				rd += " +range dels"
			}
			fmt.Fprintf(c.out, "  added   L%d %06d.sst %s [%s, %s]%s\n", a.Level, a.FileNum, size(a.Size), display(a.Smallest), display(a.Largest), rd)
		}
	}
	return nil
}

func (c *cli) sstable(args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	var failed []string
	for _, path := range args {
		if err := c.describeTable(path); err != nil {
			fmt.Fprintf(c.out, "%s: damaged: %v\n", path, err)
			failed = append(failed, path)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("damaged: %s", strings.Join(failed, ", "))
	}
	return nil
}

// describeTable prints one table file and verifies it whole.
func (c *cli) describeTable(path string) error {
	state := strings.TrimSuffix(path, ".sst") + ".fstate"
	r, err := sstable.Open(vfs.Default, path, sstable.ReaderOptions{StatePath: state, StateReadOnly: true})
	if err != nil {
		return err
	}
	defer r.Close()
	props, err := r.Properties()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "  %s\t%s\n", k, fmt.Sprintf(format, a...)) }
	fmt.Fprintf(tw, "%s\n", path)
	row("format", "%s blocks, compression %s", r.Format(), props.CompressionName)
	row("entries", "%d (%d deletions, %d range tombstones)", props.NumEntries, props.NumDeletions, props.NumRangeDeletions)
	row("sizes", "data %s in %d blocks, index %s, filter %s, raw keys %s, raw values %s", size(props.DataSize),
		props.NumDataBlocks, size(props.IndexSize), size(props.FilterSize), size(props.RawKeySize), size(props.RawValueSize))
	m := r.Metrics()
	row("filter", "%s, %d keys, %s in memory, %s remote", r.FilterKind(), m.FilterKeys, size(m.FilterBytes), size(r.RemoteBytes()))
	_, adapts := r.Filter().(filter.Adaptive)
	switch serr := r.StateError(); {
	case !adapts:
	case serr == nil && fileExists(state):
		h := r.History()
		row("adaptive state", "%s: %d fixes, %d rebuilds, %d false positives", filepath.Base(state), h.Adaptations, h.Rebuilds, h.FalsePositives)
	case serr == nil || errors.Is(serr, sstable.ErrNoState):
		row("adaptive state", "none saved (the pristine filter)")
	default:
		row("adaptive state", "damaged: %v", serr)
	}
	res, verr := r.Verify()
	if verr == nil {
		row("key range", "[%s, %s]", display(res.Smallest), display(res.Largest))
		if rd := r.RangeDels(); rd.Len() > 0 {
			start, end := rd.Bounds()
			row("range tombstones", "%d fragments over [%s, %s)", rd.Len(), display(start), display(end))
		}
		row("checksums", "ok: %d keys read, each passes the filter; %d remote slots read", res.Keys, res.RemoteSlots)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return verr
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

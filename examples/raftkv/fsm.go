package raftkv

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/adaptkv/adaptkv/kv"
	"github.com/hashicorp/raft"
)

// FSM is the Raft state machine: an adaptkv store in Dir/store. Apply
// writes each committed Command as one batch; Snapshot checkpoints the
// store; Restore replaces it with a checkpoint from another node.
type FSM struct {
	dir  string
	opts kv.Options

	mu       sync.RWMutex // Restore swaps db under the write lock
	db       *kv.DB
	restores atomic.Int64
}

// storeDir and restoreDir are the store's directory and the one a restore
// is unpacked into before it takes the store's place.
const (
	storeDir   = "store"
	restoreDir = "restore.tmp"
)

// OpenFSM opens (or creates) the state machine's store under dir. opts
// may be nil; its FS must be nil (the store is on the real file system,
// which snapshots are streamed from).
func OpenFSM(dir string, opts *kv.Options) (*FSM, error) {
	f := &FSM{dir: dir}
	if opts != nil {
		f.opts = *opts
	}
	if f.opts.FS != nil {
		return nil, errors.New("raftkv: the FSM's store lives on the real file system (Options.FS must be nil)")
	}
	// A restore cut short by a crash after the old store was removed: the
	// unpacked one, whole (it was opened before the swap), takes its place.
	if _, err := os.Stat(filepath.Join(dir, storeDir)); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, restoreDir, "CURRENT")); err == nil {
			if err := os.Rename(filepath.Join(dir, restoreDir), filepath.Join(dir, storeDir)); err != nil {
				return nil, err
			}
		}
	}
	_ = os.RemoveAll(filepath.Join(dir, restoreDir))
	db, err := kv.Open(filepath.Join(dir, storeDir), &f.opts)
	if err != nil {
		return nil, err
	}
	f.db = db
	return f, nil
}

// Apply implements raft.FSM: the entry's Command as one batch (NoSync: the
// Raft log holds it durably, and a restarted node restores its latest
// snapshot and applies the log after it). It returns nil or the error.
func (f *FSM) Apply(l *raft.Log) interface{} {
	b, err := decodeCommand(l.Data)
	if err != nil {
		return err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.db.Apply(b, kv.NoSync)
}

// View runs fn on the store under the FSM's read lock (no Restore swaps
// it meanwhile).
func (f *FSM) View(fn func(db *kv.DB) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return fn(f.db)
}

// Restores counts the snapshots restored since OpenFSM.
func (f *FSM) Restores() int64 { return f.restores.Load() }

// Close closes the store.
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.db.Close()
}

// Snapshot implements raft.FSM: a checkpoint of the store (Apply is not
// running), streamed by Persist.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	tmp, err := os.MkdirTemp(f.dir, "snapshot-")
	if err != nil {
		return nil, err
	}
	cp := filepath.Join(tmp, "checkpoint")
	f.mu.RLock()
	err = f.db.Checkpoint(cp)
	f.mu.RUnlock()
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	return &fsmSnapshot{tmp: tmp, dir: cp}, nil
}

// fsmSnapshot is a checkpoint waiting to be streamed.
type fsmSnapshot struct{ tmp, dir string }

// Persist writes the checkpoint's files to sink as a tar archive.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	err := writeArchive(sink, s.dir)
	if err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release removes the checkpoint.
func (s *fsmSnapshot) Release() { os.RemoveAll(s.tmp) }

func writeArchive(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := addFile(tw, dir, e.Name()); err != nil {
			return err
		}
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, dir, name string) error {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: st.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// Restore implements raft.FSM: it unpacks the archive next to the store,
// opens it (a damaged checkpoint fails here, the store untouched), and
// swaps it in.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	tmp := filepath.Join(f.dir, restoreDir)
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := readArchive(rc, tmp); err != nil {
		return fmt.Errorf("raftkv: restore: %w", err)
	}
	check, err := kv.Open(tmp, &kv.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("raftkv: restore: the snapshot does not open: %w", err)
	}
	if err := check.Close(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.db.Close(); err != nil {
		return err
	}
	store := filepath.Join(f.dir, storeDir)
	if err := os.RemoveAll(store); err != nil {
		return err
	}
	if err := os.Rename(tmp, store); err != nil {
		return err
	}
	db, err := kv.Open(store, &f.opts)
	if err != nil {
		return err
	}
	f.db = db
	f.restores.Add(1)
	return nil
}

func readArchive(r io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || h.Name != filepath.Base(h.Name) || h.Name == "." || h.Name == ".." {
			return fmt.Errorf("unexpected archive entry %q", h.Name)
		}
		if err := writeFile(filepath.Join(dir, h.Name), tr); err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

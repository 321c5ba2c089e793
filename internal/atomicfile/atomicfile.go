// Package atomicfile replaces a small file so that a crash leaves either
// its old contents or its new ones, never a mix: the data goes to a
// temporary file beside it, which is fsynced, renamed over the target, and
// made durable by an fsync of the directory. The store's CURRENT file, the
// tables' adaptive state files and the known-negatives file are written
// this way.
package atomicfile

import (
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Write replaces path with data through the temporary file tmp (removed
// if the write fails).
func Write(fs vfs.FS, path, tmp string, data []byte) (err error) {
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = fs.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = fs.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(fs, fs.PathDir(path))
}

// SyncDir fsyncs directory dir, making the entries created, renamed or
// removed in it durable.
func SyncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

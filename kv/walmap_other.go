//go:build !linux

package kv

import "github.com/cockroachdb/pebble/v2/vfs"

// walMappingSupported is false off Linux, where the WAL is always written
// with write(2): whether fsync writes back pages dirtied through a mapping
// is not something every system promises.
const walMappingSupported = false

func mapWAL(vfs.File, int, int) (*walMapping, error) { return nil, errNoWALMapping }

func (m *walMapping) grow(int) error { return errNoWALMapping }

func (m *walMapping) unmap() error { return nil }

func (m *walMapping) populateAhead() {}

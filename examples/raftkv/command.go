package raftkv

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/adaptkv/adaptkv/kv"
)

// Operation codes of a Command's encoding.
const (
	opSet         byte = 1
	opDelete      byte = 2
	opDeleteRange byte = 3
)

// ErrBadCommand reports a Raft entry that is not a Command's encoding.
var ErrBadCommand = errors.New("raftkv: malformed command")

// Command is a list of writes that the group applies atomically, in order:
// one Raft entry, one kv.Batch on every node. Build it with Set, Delete and
// DeleteRange; the first invalid write (an empty key, start >= end, ...)
// is kept and returned by Node.Apply before anything is proposed.
type Command struct {
	data []byte
	n    int
	err  error
	b    kv.Batch // validates each write as the store will
}

// NewCommand returns an empty command.
func NewCommand() *Command { return &Command{} }

// Set adds a write of key -> value.
func (c *Command) Set(key, value []byte) *Command {
	return c.add(c.b.Set(key, value), opSet, key, value)
}

// Delete adds a deletion of key.
func (c *Command) Delete(key []byte) *Command {
	return c.add(c.b.Delete(key), opDelete, key, nil)
}

// DeleteRange adds a deletion of every key in [start, end).
func (c *Command) DeleteRange(start, end []byte) *Command {
	return c.add(c.b.DeleteRange(start, end), opDeleteRange, start, end)
}

func (c *Command) add(err error, op byte, a, b []byte) *Command {
	c.b.Reset() // it only validates
	if c.err != nil {
		return c
	}
	if err != nil {
		c.err = fmt.Errorf("raftkv: write %d: %w", c.n, err)
		return c
	}
	c.data = append(c.data, op)
	c.data = binary.AppendUvarint(c.data, uint64(len(a)))
	c.data = append(c.data, a...)
	if op != opDelete {
		c.data = binary.AppendUvarint(c.data, uint64(len(b)))
		c.data = append(c.data, b...)
	}
	c.n++
	return c
}

// Len is the number of writes.
func (c *Command) Len() int { return c.n }

// encode returns the Raft entry, or the first invalid write's error.
func (c *Command) encode() ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.n == 0 {
		return nil, fmt.Errorf("raftkv: empty command")
	}
	return c.data, nil
}

// decodeCommand turns a Raft entry into the batch it stands for.
func decodeCommand(data []byte) (*kv.Batch, error) {
	b := kv.NewBatch()
	for len(data) > 0 {
		op := data[0]
		data = data[1:]
		a, rest, ok := field(data)
		if !ok {
			return nil, ErrBadCommand
		}
		data = rest
		var v []byte
		if op != opDelete {
			if v, data, ok = field(data); !ok {
				return nil, ErrBadCommand
			}
		}
		var err error
		switch op {
		case opSet:
			err = b.Set(a, v)
		case opDelete:
			err = b.Delete(a)
		case opDeleteRange:
			err = b.DeleteRange(a, v)
		default:
			err = fmt.Errorf("%w: operation %d", ErrBadCommand, op)
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// field reads one length-prefixed byte string.
func field(p []byte) (v, rest []byte, ok bool) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return nil, nil, false
	}
	return p[k : k+int(n)], p[k+int(n):], true
}

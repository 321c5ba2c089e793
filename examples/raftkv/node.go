package raftkv

import (
	"errors"
	"fmt"
	"time"

	"github.com/adaptkv/adaptkv/kv"
	"github.com/hashicorp/raft"
)

// Config configures a Node. ID, Dir, Transport, Logs, Stable and Snapshots
// are required.
type Config struct {
	// ID is the server's Raft ID; Dir holds its FSM's store.
	ID  raft.ServerID
	Dir string
	// Transport, Logs, Stable and Snapshots are Raft's (its in-memory
	// ones in tests; its TCP transport, a LogStore and its file snapshot
	// store in cmd/raftkvd).
	Transport raft.Transport
	Logs      raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
	// Raft tunes the group (nil: raft.DefaultConfig()); its LocalID is set
	// to ID.
	Raft *raft.Config
	// Store configures the FSM's store (nil: defaults).
	Store *kv.Options
}

// Node is one member of the group: a Raft instance and its FSM.
type Node struct {
	Raft *raft.Raft
	FSM  *FSM
}

// ErrNotLeader is returned by the calls that must run on the leader when
// the node is not (raft.ErrNotLeader wrapped; ask Node.Leader).
var ErrNotLeader = raft.ErrNotLeader

// NewNode starts a node. A new group is formed with Bootstrap on one of
// its nodes; a node restarted with its Logs, Stable and Snapshots finds
// its group again.
func NewNode(cfg Config) (*Node, error) {
	if cfg.ID == "" || cfg.Dir == "" || cfg.Transport == nil || cfg.Logs == nil || cfg.Stable == nil || cfg.Snapshots == nil {
		return nil, errors.New("raftkv: Config needs ID, Dir, Transport, Logs, Stable and Snapshots")
	}
	rc := raft.DefaultConfig()
	if cfg.Raft != nil {
		c := *cfg.Raft
		rc = &c
	}
	rc.LocalID = cfg.ID
	fsm, err := OpenFSM(cfg.Dir, cfg.Store)
	if err != nil {
		return nil, err
	}
	r, err := raft.NewRaft(rc, fsm, cfg.Logs, cfg.Stable, cfg.Snapshots, cfg.Transport)
	if err != nil {
		fsm.Close()
		return nil, err
	}
	return &Node{Raft: r, FSM: fsm}, nil
}

// Bootstrap forms a new group of servers (run it on one node, once).
func (n *Node) Bootstrap(servers []raft.Server) error {
	return n.Raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
}

// Apply proposes c through the leader and waits until this node (the
// leader) has applied it. An invalid write in c is reported before
// anything is proposed.
func (n *Node) Apply(c *Command, timeout time.Duration) error {
	data, err := c.encode()
	if err != nil {
		return err
	}
	f := n.Raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		return err
	}
	if resp := f.Response(); resp != nil {
		if err, ok := resp.(error); ok {
			return err
		}
	}
	return nil
}

// Get reads key from this node's store: fast, and on a follower possibly
// behind the leader (stale reads allowed).
func (n *Node) Get(key []byte) (v []byte, err error) {
	err = n.FSM.View(func(db *kv.DB) error {
		v, err = db.Get(key)
		return err
	})
	return v, err
}

// GetLinearizable reads key on the leader after a Raft barrier (every
// entry committed before the call is applied here) and a check that this
// node still leads: the read sees every write acknowledged before it.
func (n *Node) GetLinearizable(key []byte, timeout time.Duration) ([]byte, error) {
	if err := n.Raft.Barrier(timeout).Error(); err != nil {
		return nil, err
	}
	if err := n.Raft.VerifyLeader().Error(); err != nil {
		return nil, err
	}
	return n.Get(key)
}

// Leader returns the address and ID of the leader this node knows ("" if
// none).
func (n *Node) Leader() (raft.ServerAddress, raft.ServerID) { return n.Raft.LeaderWithID() }

// Shutdown stops Raft, then closes the store.
func (n *Node) Shutdown() error {
	err := n.Raft.Shutdown().Error()
	if cerr := n.FSM.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("raftkv: shutdown: %w", err)
	}
	return nil
}

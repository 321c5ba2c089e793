package raftkv

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/adaptkv/adaptkv/kv"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// testRaftConfig is fast timing for a group in one process; snapshots only
// when asked, keeping 16 entries behind them.
func testRaftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.HeartbeatTimeout = 150 * time.Millisecond
	c.ElectionTimeout = 150 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotThreshold = 1 << 40
	c.SnapshotInterval = time.Hour
	c.TrailingLogs = 16
	c.Logger = hclog.NewNullLogger()
	return c
}

// member is one node with the stores it keeps across a restart.
type member struct {
	id     raft.ServerID
	addr   raft.ServerAddress
	dir    string
	trans  *raft.InmemTransport
	logs   *raft.InmemStore
	snaps  *raft.InmemSnapshotStore
	node   *Node
	killed bool
}

type group struct {
	t       *testing.T
	members []*member
}

func newGroup(t *testing.T, n int) *group {
	g := &group{t: t}
	for i := 0; i < n; i++ {
		m := &member{id: raft.ServerID(fmt.Sprintf("n%d", i+1)), dir: filepath.Join(t.TempDir(), "fsm"),
			logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
		m.addr, m.trans = raft.NewInmemTransport("")
		g.members = append(g.members, m)
	}
	g.connect()
	var servers []raft.Server
	for _, m := range g.members {
		g.start(m)
		servers = append(servers, raft.Server{ID: m.id, Address: m.addr})
	}
	require.NoError(t, g.members[0].node.Bootstrap(servers))
	t.Cleanup(func() {
		for _, m := range g.members {
			if !m.killed {
				m.node.Shutdown()
			}
		}
	})
	return g
}

func (g *group) connect() {
	for _, a := range g.members {
		for _, b := range g.members {
			if a != b {
				a.trans.Connect(b.addr, b.trans)
			}
		}
	}
}

func (g *group) start(m *member) {
	node, err := NewNode(Config{ID: m.id, Dir: m.dir, Transport: m.trans, Logs: m.logs, Stable: m.logs,
		Snapshots: m.snaps, Raft: testRaftConfig()})
	require.NoError(g.t, err)
	m.node, m.killed = node, false
}

// leader waits for a live member to lead.
func (g *group) leader() *member {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range g.members {
			if !m.killed && m.node.Raft.State() == raft.Leader {
				return m
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatal("no leader within 10s")
	return nil
}

// write applies writes [from, to) through the leader, retrying once
// through a new leader if leadership moved under it; every tenth write
// range-deletes the keys it wrote ten writes before.
func (g *group) write(model map[string]string, from, to int) {
	for i := from; i < to; i++ {
		c := NewCommand().Set(key(i), fmt.Appendf(nil, "v%d", i))
		if i%10 == 9 {
			c.DeleteRange(key(i-9), key(i-5)) // keys i-9..i-6
		}
		var err error
		for try := 0; try < 3; try++ {
			if err = g.leader().node.Apply(c, 5*time.Second); err == nil {
				break
			}
		}
		require.NoError(g.t, err, "write %d", i)
		model[string(key(i))] = fmt.Sprintf("v%d", i)
		if i%10 == 9 {
			for j := i - 9; j < i-5; j++ {
				delete(model, string(key(j)))
			}
		}
	}
}

func key(i int) []byte { return fmt.Appendf(nil, "key%06d", i) }

// contents lists a node's store.
func contents(t *testing.T, n *Node) map[string]string {
	got := map[string]string{}
	require.NoError(t, n.FSM.View(func(db *kv.DB) error {
		it, err := db.NewIter(nil)
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			got[string(it.Key())] = string(it.Value())
		}
		return it.Close()
	}))
	return got
}

// converge waits until every live member holds the model.
func (g *group) converge(model map[string]string) {
	deadline := time.Now().Add(10 * time.Second)
	for _, m := range g.members {
		if m.killed {
			continue
		}
		for {
			got := contents(g.t, m.node)
			if len(got) == len(model) && fmt.Sprint(got) == fmt.Sprint(model) {
				break
			}
			if time.Now().After(deadline) {
				require.Equal(g.t, model, got, "member %s", m.id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestGroup: writes through the leader, the leader killed, writes under
// the new one, the old leader restarted behind a compacted log so that it
// catches up from a snapshot (a checkpoint of the leader's store), and
// every node ends with the same contents; linearizable reads on the leader
// see every acknowledged write, stale reads on a follower converge.
func TestGroup(t *testing.T) {
	g := newGroup(t, 3)
	model := map[string]string{}
	g.write(model, 0, 200)
	g.converge(model)

	old := g.leader()
	require.NoError(t, old.node.Shutdown())
	old.killed = true
	g.write(model, 200, 400)
	lead := g.leader()
	require.NotEqual(t, old.id, lead.id)
	v, err := lead.node.GetLinearizable(key(399), 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "v399", string(v))
	_, err = lead.node.GetLinearizable(key(390), 5*time.Second) // range-deleted
	require.ErrorIs(t, err, kv.ErrNotFound)
	for _, m := range g.members {
		if !m.killed && m != lead {
			_, err := m.node.GetLinearizable(key(1), time.Second)
			require.True(t, errors.Is(err, raft.ErrNotLeader), "a follower does not serve linearizable reads: %v", err)
		}
	}

	// Compact the leader's log past everything the old leader has.
	require.NoError(t, lead.node.Raft.Snapshot().Error())
	g.write(model, 400, 450)
	require.NoError(t, lead.node.Raft.Snapshot().Error())

	g.start(old) // the same log, stable and snapshot stores, and store directory
	g.converge(model)
	require.Positive(t, old.node.FSM.Restores(), "the restarted node caught up from a snapshot")
	v, err = old.node.Get(key(449))
	require.NoError(t, err)
	require.Equal(t, "v449", string(v))

	g.write(model, 450, 500)
	g.converge(model)
}

// TestCommandValidation: an invalid write is refused before it is
// proposed; a malformed entry is an error response, the same on every node.
func TestCommandValidation(t *testing.T) {
	_, err := NewCommand().DeleteRange([]byte("b"), []byte("a")).encode()
	require.ErrorIs(t, err, kv.ErrInvalidRange)
	_, err = NewCommand().Set(nil, []byte("v")).encode()
	require.ErrorIs(t, err, kv.ErrEmptyKey)
	_, err = NewCommand().encode()
	require.Error(t, err)
	_, err = decodeCommand([]byte{opSet, 5, 'a'})
	require.ErrorIs(t, err, ErrBadCommand)
	_, err = decodeCommand([]byte{9, 1, 'a', 1, 'b'})
	require.ErrorIs(t, err, ErrBadCommand)
	data, err := NewCommand().Set([]byte("k"), []byte("v")).Delete([]byte("d")).DeleteRange([]byte("a"), []byte("c")).encode()
	require.NoError(t, err)
	b, err := decodeCommand(data)
	require.NoError(t, err)
	require.Equal(t, 3, b.Count())
}

// TestLogStore runs the adaptkv-backed LogStore through what Raft asks of
// it, across a reopen.
func TestLogStore(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenLogStore(dir, nil)
	require.NoError(t, err)
	first, err := s.FirstIndex()
	require.NoError(t, err)
	require.Zero(t, first)
	var logs []*raft.Log
	for i := uint64(1); i <= 100; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: i / 10, Type: raft.LogCommand, Data: fmt.Appendf(nil, "d%d", i),
			AppendedAt: time.Unix(0, int64(i))})
	}
	require.NoError(t, s.StoreLogs(logs[:50]))
	for _, l := range logs[50:] {
		require.NoError(t, s.StoreLog(l))
	}
	require.NoError(t, s.DeleteRange(1, 40))
	require.NoError(t, s.SetUint64([]byte("CurrentTerm"), 7))
	require.NoError(t, s.Set([]byte("LastVoteCand"), []byte("n2")))
	require.NoError(t, s.Close())

	s, err = OpenLogStore(dir, nil)
	require.NoError(t, err)
	defer s.Close()
	first, err = s.FirstIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(41), first)
	last, err := s.LastIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(100), last)
	var l raft.Log
	require.ErrorIs(t, s.GetLog(40, &l), raft.ErrLogNotFound)
	require.NoError(t, s.GetLog(77, &l))
	require.Equal(t, *logs[76], l)
	term, err := s.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.Equal(t, uint64(7), term)
	v, err := s.Get([]byte("LastVoteCand"))
	require.NoError(t, err)
	require.Equal(t, "n2", string(v))
	v, err = s.Get([]byte("never"))
	require.NoError(t, err)
	require.Empty(t, v)
	n, err := s.GetUint64([]byte("never"))
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestLibraryHasNoRaft: the library's packages do not depend on Raft.
func TestLibraryHasNoRaft(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/adaptkv/adaptkv/kv").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "github.com/adaptkv/adaptkv/kv")
	for _, line := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		require.NotContains(t, line, "hashicorp", "kv depends on %s", line)
	}
}

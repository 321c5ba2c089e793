// Command raftkvd runs one node of a replicated adaptkv store: the store is
// the state machine of a Raft group (package raftkv), over Raft's TCP
// transport, with Raft's file snapshot store and the log kept in an
// adaptkv store of its own (raftkv.LogStore).
//
//	raftkvd -id n1 -dir /var/lib/n1 -raft 10.0.0.1:7000 -http 10.0.0.1:8000 -bootstrap
//	raftkvd -id n2 -dir /var/lib/n2 -raft 10.0.0.2:7000 -http 10.0.0.2:8000 -join 10.0.0.1:8000
//
// HTTP API (writes and consistent reads on the leader; elsewhere 503 with
// the leader's Raft address in X-Raft-Leader):
//
//	GET    /kv/KEY                 the value from this node (may be stale on a follower)
//	GET    /kv/KEY?consistent=1    the value after a Raft barrier on the leader (linearizable)
//	PUT    /kv/KEY                 set KEY to the request body
//	DELETE /kv/KEY                 delete KEY
//	POST   /delete-range?start=A&end=B   delete every key in [A, B)
//	POST   /join?id=ID&addr=RAFTADDR     add a voter (on the leader)
//	GET    /status                 this node's Raft state and leader
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/adaptkv/adaptkv/examples/raftkv"
	"github.com/adaptkv/adaptkv/kv"
	"github.com/hashicorp/raft"
)

const applyTimeout = 10 * time.Second

func main() {
	id := flag.String("id", "", "this node's Raft ID (required)")
	dir := flag.String("dir", "", "data directory (required): store/, raft/ (log), snapshots/")
	raftAddr := flag.String("raft", "127.0.0.1:7000", "Raft TCP address")
	httpAddr := flag.String("http", "127.0.0.1:8000", "HTTP API address")
	bootstrap := flag.Bool("bootstrap", false, "form a new group with this node alone (once, on the first node)")
	join := flag.String("join", "", "HTTP address of a member to ask to add this node")
	flag.Parse()
	if *id == "" || *dir == "" {
		flag.Usage()
		os.Exit(2)
	}
	n, closeNode, err := start(*id, *dir, *raftAddr)
	if err != nil {
		log.Fatal(err)
	}
	if *bootstrap {
		err := n.Bootstrap([]raft.Server{{ID: raft.ServerID(*id), Address: raft.ServerAddress(*raftAddr)}})
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			log.Fatal(err)
		}
	}
	if *join != "" {
		q := url.Values{"id": {*id}, "addr": {*raftAddr}}
		resp, err := http.Post("http://"+*join+"/join?"+q.Encode(), "", nil)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			log.Fatalf("join: %s: %s", resp.Status, body)
		}
	}
	srv := &http.Server{Addr: *httpAddr, Handler: handler(n)}
	go func() {
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			log.Fatal(err)
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	_ = srv.Close()
	if err := closeNode(); err != nil {
		log.Fatal(err)
	}
}

// start opens a node's stores under dir and starts it on raftAddr.
func start(id, dir, raftAddr string) (*raftkv.Node, func() error, error) {
	addr, err := net.ResolveTCPAddr("tcp", raftAddr)
	if err != nil {
		return nil, nil, err
	}
	trans, err := raft.NewTCPTransport(raftAddr, addr, 3, 10*time.Second, os.Stderr)
	if err != nil {
		return nil, nil, err
	}
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(dir, "snapshots"), 2, os.Stderr)
	if err != nil {
		return nil, nil, err
	}
	logs, err := raftkv.OpenLogStore(filepath.Join(dir, "raft"), nil)
	if err != nil {
		return nil, nil, err
	}
	n, err := raftkv.NewNode(raftkv.Config{ID: raft.ServerID(id), Dir: dir, Transport: trans, Logs: logs,
		Stable: logs, Snapshots: snaps})
	if err != nil {
		logs.Close()
		return nil, nil, err
	}
	return n, func() error { return errors.Join(n.Shutdown(), logs.Close()) }, nil
}

// handler serves the HTTP API of node n.
func handler(n *raftkv.Node) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /kv/{key}", func(w http.ResponseWriter, r *http.Request) {
		k := []byte(r.PathValue("key"))
		var v []byte
		var err error
		if r.URL.Query().Get("consistent") != "" {
			v, err = n.GetLinearizable(k, applyTimeout)
		} else {
			v, err = n.Get(k)
		}
		if reply(w, n, err) {
			_, _ = w.Write(v)
		}
	})
	mux.HandleFunc("PUT /kv/{key}", func(w http.ResponseWriter, r *http.Request) {
		v, err := io.ReadAll(io.LimitReader(r.Body, kv.MaxValueSize+1))
		if err == nil {
			err = n.Apply(raftkv.NewCommand().Set([]byte(r.PathValue("key")), v), applyTimeout)
		}
		reply(w, n, err)
	})
	mux.HandleFunc("DELETE /kv/{key}", func(w http.ResponseWriter, r *http.Request) {
		reply(w, n, n.Apply(raftkv.NewCommand().Delete([]byte(r.PathValue("key"))), applyTimeout))
	})
	mux.HandleFunc("POST /delete-range", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		reply(w, n, n.Apply(raftkv.NewCommand().DeleteRange([]byte(q.Get("start")), []byte(q.Get("end"))), applyTimeout))
	})
	mux.HandleFunc("POST /join", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f := n.Raft.AddVoter(raft.ServerID(q.Get("id")), raft.ServerAddress(q.Get("addr")), 0, applyTimeout)
		reply(w, n, f.Error())
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		addr, id := n.Leader()
		fmt.Fprintf(w, "state %s\nleader %s %s\nlast index %d\napplied index %d\n", n.Raft.State(), id, addr,
			n.Raft.LastIndex(), n.Raft.AppliedIndex())
	})
	return mux
}

// reply writes the status for err and reports whether the call succeeded.
func reply(w http.ResponseWriter, n *raftkv.Node, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, kv.ErrNotFound):
		http.Error(w, "not found", http.StatusNotFound)
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
		addr, _ := n.Leader()
		w.Header().Set("X-Raft-Leader", string(addr))
		http.Error(w, "not the leader", http.StatusServiceUnavailable)
	case errors.Is(err, kv.ErrEmptyKey), errors.Is(err, kv.ErrKeyTooLarge), errors.Is(err, kv.ErrValueTooLarge),
		errors.Is(err, kv.ErrInvalidRange):
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
	return false
}

// Package raftkv runs an adaptkv store as the state machine of a Raft
// group (github.com/hashicorp/raft): the way past one machine for an
// embedded store is a consensus library that replicates commands into it,
// not a home-made one.
//
// Writes (Set, Delete, DeleteRange, batches of them) are Raft log entries;
// every node applies them in log order to its own store (FSM.Apply). A Raft
// snapshot is a checkpoint of the store (kv.DB.Checkpoint: its tables,
// their adapted filters and the known negatives), streamed as an archive
// of its files; a node that restores one opens it in place of its store,
// filters as adapted as the leader's. Reads are served by the local store
// (Node.Get: fast, possibly stale on a follower) or through the leader
// after a Raft barrier that applies every committed entry and a check that
// it still leads (Node.GetLinearizable).
//
// LogStore keeps Raft's log and its stable state in an adaptkv store of
// their own (synced writes; a compacted prefix goes with one DeleteRange).
//
// This package is a module of its own, so the library's module graph holds
// no Raft dependency; cmd/raftkvd runs a node over Raft's TCP transport
// with a file snapshot store and an HTTP API.
package raftkv

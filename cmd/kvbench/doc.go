// Command kvbench answers one question: how much read amplification does
// each filter policy save, and at what cost?
//
// It loads the same YCSB data set (keys "user"+FNV-64 of the record number,
// 100-byte values) into one adaptkv store per filter policy and into a Pebble
// peer (a real pebble.DB with Pebble's bloom filter on every level, read
// with DB.Get as "pebble" and with SeekPrefixGE on a reused UseL6Filters
// iterator as "pebble-l6"), runs YCSB workloads read from property files
// (core A-F plus kvbench's negzipf, mixed, churn, shift and adversary, which
// read absent keys; churn and shift insert while they read, and shift
// changes its hot absent set halfway), and prints per policy and
// workload: throughput, latency percentiles, filter checks and table probes
// per Get, false-positive probes per 1k Gets, data block reads, filter
// memory, adaptations, and a lower bound on the false positives an ideal
// adaptive filter would pay. Every count is a delta of the
// store's own counters around the run phase, never an estimate.
//
// The tree every store gets: 80% of the records bulk-loaded and compacted
// into the last level, the remaining 20% written through the normal path
// (memtable flushes to L0, compactions to the base level), so that reads
// consult several tables. Every adaptkv store gets the same shape (L0, L1
// and L6 in the default run); the Pebble peer, with the same options, picks
// L5 as its base level by its dynamic level sizing and had no L0 table left
// after the load, so it checks fewer tables per Get (see checks/get).
//
// Absent keys are a stored key plus "!", the workload's name and the seed: they sort
// right after a stored key, inside the tables' key ranges, so only filters
// can rule them out; each workload has its own absent universe, so the
// adaptations one workload causes do not help the next.
//
// The adversary workload follows section 6.1 of the telescoping adaptive
// filter paper: round 1 queries fresh absent keys, each round queries its set
// Q adversarysubrounds times, and only keys that were a false positive in a
// round stay in Q. A false positive is read from the store's
// false_positive_probes counter across the Get.
//
// The built-in workloads are the files in the module's testdata/workloads,
// compiled into the binary (package internal/ycsb embeds a copy that a test
// keeps byte-identical), so "go install ./cmd/kvbench" gives a kvbench that
// runs from any directory. A -workloads entry that names an existing file is
// read from that file instead.
//
// Run "go run ./cmd/kvbench -h" for the flags.
package main

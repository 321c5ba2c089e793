// Command kvbench answers one question: how much read amplification does
// each filter policy save, and at what cost?
//
// It loads the same YCSB data set (keys "user"+FNV-64 of the record number,
// 100-byte values) into one adaptkv store per filter policy and into a Pebble
// peer (a real pebble.DB with Pebble's bloom filter on every level, read
// with DB.Get as "pebble" and with SeekPrefixGE on a reused UseL6Filters
// iterator as "pebble-l6"), runs YCSB workloads read from property files
// (core A-F plus kvbench's negzipf, neguniform, mixed, churn, shift and adversary, which
// read absent keys; churn and shift insert while they read, and shift
// changes its hot absent set halfway; and shortscan, YCSB E with one-row
// scans), and prints per policy and
// workload: throughput, latency percentiles, filter checks and table probes
// per Get, false-positive probes per 1k Gets, data block reads, filter
// memory, adaptations, and a lower bound on the false positives an ideal
// adaptive filter would pay. Every count is a delta of the
// store's own counters around the run phase, never an estimate.
//
// The tree every store gets: 80% of the records bulk-loaded and compacted
// into the last level, the remaining 20% written through the normal path
// (memtable flushes to L0, compactions to the base level), so that reads
// consult several tables. The 20% go in steps of half a memtable, each
// flushed and followed by the compactions it sets off: no flush depends on
// the timing of background work, so every store of one engine ends with
// the same levels, and an absent Get checks as many tables in each. The peers are configured alike: the options that
// mean the same in both engines (memtable size, memtables and L0 depth at
// which writes stall, L0 trigger, compactions at once, table and level
// sizes, block size and cache, open tables) take the adaptkv store's
// values, and the run header prints them and every option that differs.
// The workloads run one after another on each store; one that follows a
// workload that wrote starts once the store's compactions have settled, as
// the first starts after the load. Each workload also reports the stores'
// peak memtable memory and (-interleave 0) the process's peak resident
// set; -repeat N runs everything N times in rotated store order and
// reports medians with their ranges, and -markdown writes them as the
// tables of docs/BENCHMARKS.md.
// The stores are loaded one after another and then run each workload
// together, taking turns of -interleave operations (10000; interleave.go,
// schedule.go): each store's figures count its own turns, and a slow or
// fast moment of a shared machine falls on all of them alike.
// -interleave 0 runs each store's workloads alone, one store after
// another, as -target and -write always do.
//
// Throughput counts the store's own time. Each operation is timed between
// two clock reads around the store's call alone; drawing the next
// operation, formatting its key, filling its value and counting it happen
// outside them, and the time between one call's end and the next one's
// start comes off the elapsed time (runner.go, worker), as the adversary
// times only its Gets: kvbench's own work, about a tenth of a microsecond
// an operation and the same for every store, does not dilute the ratios
// between stores. A paced run (-target) counts its wall time.
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
// false_positive_probes counter across the Get (Store.FalsePositiveProbes:
// a few atomic loads, so that the timed Gets run on the caches they would
// have without it).
//
// The built-in workloads are the files in the module's testdata/workloads,
// compiled into the binary (package internal/ycsb embeds a copy that a test
// keeps byte-identical), so "go install ./cmd/kvbench" gives a kvbench that
// runs from any directory. A -workloads entry that names an existing file is
// read from that file instead.
//
// With -write it measures writes instead (write.go): the same streams of
// keys and incompressible values, over value sizes, writer counts, Sync or
// NoSync and key orders, into a fresh adaptkv store and a fresh Pebble peer
// per run, with per-write latency in a bounded log-linear histogram
// (p50/p99/p99.9), the longest write, stall time, the adaptkv Sync writes'
// waits for WAL switches still finishing, flushes, compactions and write
// amplification.
//
// Run "go run ./cmd/kvbench -h" for the flags.
package main

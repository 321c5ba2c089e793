// Package ycsb holds the YCSB-style pieces kvbench needs: the key naming
// ("user" + FNV-64 of the record number), the request-distribution
// generators (zipfian with Gray et al.'s method, scrambled zipfian, skewed
// latest, uniform), and the parser for YCSB workload property files with
// kvbench's extensions for absent-key reads (negativeproportion,
// negativedistribution, ...) and the adversarial stream of the telescoping
// adaptive filter paper (section 6.1). It embeds kvbench's built-in workload
// files (Builtin, BuiltinNames), a copy of the module's testdata/workloads
// kept identical by a test.
//
// The generators follow YCSB's CoreWorkload (site.ycsb.generator) so that a
// workload file means the same thing here as in YCSB; the code is our own.
package ycsb

// Package prefix implements the prefix family of filter kinds: the Prefix
// Filter of Even, Even and Morrison ("Prefix Filter: Practically and
// Theoretically Better Than Bloom", VLDB 2022) as a static, seeded
// approximate-membership filter, and its adaptive form.
//
// A key hashes (128-bit MurmurHash3) to a bin, by multiply-shift range
// reduction, and to a 13-bit mini-fingerprint: quotient 0..24 and a one-byte
// remainder. The bin table is an array of n/(0.95·25) pocket dictionaries
// PD(25,8,25) of 32 bytes each: a 50-bit unary header, 25 remainders, an
// overflow flag and the bin's maximum quotient. Every bin keeps the smallest
// fingerprints mapped to it (the prefix invariant, paper section 4.1); those
// that do not fit go to the spare, a small split-block Bloom filter over
// (bin, fingerprint) pairs that holds about 6% of the keys. A query reads one
// bin and consults the spare only when the bin overflowed and the key's
// fingerprint exceeds the bin's maximum, so about 95% of queries touch one
// 32-byte bin (one cache line), and most of those end after one SWAR compare.
//
// The false-positive rate is about 0.39% at 11.5 bits per key (the paper
// reports 0.37-0.39% at 11.55-12.13 bits per key); Pebble's 10 bits/key Bloom
// filter gives 1.3%. Filters are immutable and safe for concurrent use. The
// binary encoding carries the seed, the sizes and a CRC-32C; Decode validates
// it fully and answers queries directly over the encoded bytes.
//
// AdaptiveFilter (kind "aprefix") is the same filter made adaptive: its bins
// and spare stay as built, and a false positive adds, beside them, a short
// extension of the stored fingerprint it matched (the TAF paper's exAF,
// section 5), read only when a query's bin says "maybe". Queries stay
// lock-free; see adaptive.go and docs/ARCHITECTURE.md.
package prefix

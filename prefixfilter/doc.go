// Package prefixfilter implements the Prefix Filter of Even, Even and
// Morrison ("Prefix Filter: Practically and Theoretically Better Than Bloom",
// VLDB 2022) as a static, seeded approximate-membership filter.
//
// A key hashes (128-bit MurmurHash3) to a bin and a 13-bit mini-fingerprint
// (quotient 0..24, one-byte remainder), the bin by multiply-shift range
// reduction. The bin table is an array of 32-byte
// pocket dictionaries PD(25,8,25): a 50-bit unary header, 25 remainders, an
// overflow flag and the bin's maximum quotient. There are n/(0.95·25) bins.
// Every bin keeps the smallest fingerprints mapped to it (the prefix
// invariant, paper section 4.1); the ones that do not fit go to the spare, a
// small split-block Bloom filter over (bin, fingerprint) pairs holding about
// 6% of the keys. A query reads one bin: only when the bin overflowed and the
// key's fingerprint is larger than the bin's maximum does it consult the
// spare, so about 95% of queries touch one 32-byte bin (one cache line).
//
// The false-positive rate is about 0.39% at 11.5 bits per key (the paper
// reports 0.37-0.39% at 11.55-12.13); Pebble's 10 bits/key Bloom filter gives
// 1.3%. Filters
// are immutable and safe for concurrent use. The binary encoding carries the
// seed, the sizes and a CRC-32C; Decode validates it and answers queries
// directly over the encoded bytes.
package prefixfilter

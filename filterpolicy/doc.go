// Package filterpolicy makes every adaptkv filter a Pebble FilterPolicy and
// decodes filter blocks into in-memory filters.
//
// Every filter kind is one type implementing filter.Kind, registered by one
// line in kinds.go (none, bloom, fuse, prefix, rsqf, taf, exaf, utaf,
// stacked); policies are found by name with ByName or New, which validates
// the options once through the kind. Each writes a
// self-describing block: a 48-byte header (magic, format version, filter
// kind, seed, parameters, crc32c) followed by the filter's local state and,
// when our sstable writer builds it (ForTable), the adaptive filters'
// remote representation. A block that is not valid for a policy makes
// Pebble's MayContain answer "maybe", never a false negative; Open and
// OpenBlock report the problem as an error wrapping ErrCorruptBlock. A
// table's WriterPolicy also takes the store's known negatives: a stacked
// filter is built around them, an adaptive one fixes its false positives
// among them before its block is written (pre-adaptation, preadapt.go).
//
// Static filters are queried in place over the block bytes; adaptive ones
// are decoded into memory (they change) and get the table's remote. Pebble
// hands MayContain the raw block on every query, so the verified view of
// each block is cached by address, seed and checksum. See
// docs/ARCHITECTURE.md, "Filter kinds".
package filterpolicy

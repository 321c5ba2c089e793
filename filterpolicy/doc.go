// Package filterpolicy is the registry of filter kinds and their block
// format: it writes a table's filter block and decodes blocks into
// in-memory filters.
//
// Every filter kind is one type implementing filter.Kind (package filter
// and the family packages under it), registered by one line in kinds.go;
// policies are found by name with ByName or New, which validates the
// options once through the kind. Each writes a self-describing block: a
// 48-byte header (magic, format version, filter kind, seed, parameters,
// crc32c) followed by the filter's local state and, when our sstable
// writer builds it (ForTable), the adaptive filters' remote
// representation. Open and OpenBlock report a block that is not valid as
// an error wrapping ErrCorruptBlock. A table's WriterPolicy also takes the
// store's known negatives: a stacked filter is built around them, an
// adaptive one fixes its false positives among them before its block is
// written (pre-adaptation, preadapt.go).
//
// Static filters are queried in place over the block bytes; adaptive ones
// are decoded into memory (they change) and get the table's remote.
// Package pebblefilter makes a Policy a Pebble FilterPolicy. See
// docs/ARCHITECTURE.md, "Filter kinds".
package filterpolicy

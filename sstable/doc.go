// Package sstable writes and reads adaptkv's tables: Pebble sstables
// (format Pebblev5, snappy data blocks) whose filter block is adaptkv's
// self-describing block (package filterpolicy).
//
// For adaptive policies the filter block also carries the filter's remote
// representation: every filter slot's 64-bit hash tail, in slot order, in
// checksummed 64-slot chunks after the local state. Open reads only the
// block header and the local state into memory; a false positive found by
// a point lookup reads just the chunks the adaptation needs, with
// positioned reads on the table file.
//
// A Reader is Pebble's reader plus the table's filter piece (tableFilter in
// filterreader.go, the model is LevelDB's FilterBlockReader: finding and
// decoding the filter block, adapting, the adaptive state file); a Reader
// opened with SkipFilter (compaction inputs) has none. Its Get consults the
// in-memory filter first, does Pebble's point lookup (an iterator's SeekGE)
// on "maybe", and when no version of the key is in the table, tells the
// filter to adapt, at once or through ReaderOptions.QueueFix, which takes
// the fix off the lookup (a failed adaptation is counted, never fails the
// Get). A table written with known negatives (WriterOptions.KnownNegatives)
// has an adaptive filter that fixed its false positives among them as it
// was built, from the hashes in memory. Every step is counted (Metrics); block
// reads are counted where Pebble's reader reads the file, so with a block
// cache they are cache misses. The adaptive filter's state survives restarts in a state file
// written atomically and bound to its table; a missing or bad one means the
// table's pristine filter (StateError says why), never a false negative.
// With ReaderOptions.StateReadOnly the state file is loaded but never
// written. A corrupt filter block means no filter (FilterError says why).
//
// Lookups take no lock and write no word shared across goroutines: each
// registers in, and counts into, a cache-line stripe chosen per goroutine,
// and Close waits for the stripes to drain. An owner that already keeps
// Close from racing with lookups (kv's table cache: a reference per
// lookup) sets ReaderOptions.ClosedByOwner, and lookups only count.
package sstable

// Package quotient implements the quotient-filter family of filter kinds:
// adaptive filters on a blocked rank-and-select
// quotient filter (RSQF): filters that fix their false positives so that a
// key found to be a false positive is unlikely to be one again.
//
// Every variant shares one layout: 64-slot blocks holding an occupieds word, a
// runends word, an 8-bit offset packed with a 56-bit code word, and the
// 64 packed r-bit remainders. A key hashes (128-bit MurmurHash3, seeded) to
// h1, h2: the home slot (quotient) is a multiply-shift reduction of h1, and
// every remainder bit comes from the 64-bit tail h2. Filters are built from
// all keys at once, so slot positions never move; the remote representation
// (one tail per slot, in slot order; filter.Remote) is produced at build time and
// read only when a false positive is fixed.
//
//   - RSQF: the static baseline; Adapt returns ErrNotAdaptive.
//   - TAF: the telescoping adaptive filter (Lee, McCauley, Singh, Stein,
//     sections 3-5): each element has a hash-selector i and stores the i-th
//     r-bit chunk of its tail; a false positive increments the selectors of the
//     colliding elements. Selectors of a block live in a 56-bit arithmetic
//     code (appendix C.2); when it overflows the block is rebuilt.
//   - UTAF: the same filter with one plain selector byte per slot, the
//     baseline that isolates the cost of the coding.
//   - ExAF: the broom filter (appendix C.4): a false positive extends the
//     colliding fingerprint with the shortest run of further tail bits that
//     separates it from the query; extensions live in a 56-bit code.
//   - CAF: the cache-augmented filter (the broom filter paper's "adapt
//     or cache?"): the RSQF with a FIFO cache of recent false positives in
//     each block's code word (caf.go).
//
// The shared structure (runs, offsets, remainders, the seqlock, the remote)
// is one type; what a Variant adds is its scheme (scheme.go): how a run
// that holds the key's remainder answers, how an adaptation decodes, checks
// and fixes a block, how Decode and Verify check it. A filter picks its
// scheme once, when it is built or decoded.
//
// Space (local state only): 3 + r words of 64 bits per 64 slots, that is
// (r + 3) / alpha bits per key, 11.58 at r = 8 and alpha = 0.95 for RSQF,
// TAF, exAF and CAF alike; the uTAF adds 8 bits per slot. The RSQF baseline keeps
// the (unused) code word so all variants share one layout.
//
// Adapt checks every tail it reads against the local state (the tail's
// fingerprint must equal what the slot stores) and fails with filter.ErrRemote,
// changing nothing, when they disagree, so a wrong remote cannot create a
// false negative. Verify checks a whole filter against its remote.
//
// Queries are lock-free and safe while Adapt runs: every shared word is read
// and written with sync/atomic under a sequence lock (internal/seqlock): a
// reader detects (and retries after) an adaptation that overlapped its read,
// so it never acts on a half-updated block, and one that keeps overlapping
// adaptations waits for the one being published rather than answer "maybe"
// (a maybe the filter never had is a wasted table probe). Adaptations are
// serialized per filter.
//
// Each variant is a filter kind (kind.go: RSQFKind, TAFKind, ExAFKind,
// UTAFKind, CAFKind implement filter.Kind), registered in package
// filterpolicy. See docs/ARCHITECTURE.md, "Filter kinds".
package quotient

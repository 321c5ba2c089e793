package manifest

import (
	"bytes"
	"encoding/binary"
	"sort"

	"github.com/adaptkv/adaptkv/internal/base"
)

// Search finds, in a sorted run of tables (a level below L0, or an L0
// sublevel), the first table whose largest key is at or after a key: a
// point read's one binary search per level. Comparing the key with the
// tables' largest keys one by one costs two dependent loads each (the
// table's metadata, then its key's bytes); Search compares 8-byte words
// laid out together instead: after the prefix every largest key of the run
// shares, the next 8 bytes of each, big-endian and zero-padded, so that
// comparing words orders as comparing keys does, except for equal words,
// which a binary search of the full keys among them settles.
type Search struct {
	common []byte   // the prefix every table's largest user key shares
	words  []uint64 // per table: the 8 bytes of its largest key after common
}

// NewSearch returns the Search of ts, sorted by key and not overlapping.
func NewSearch(ts []*base.TableMeta) Search {
	if len(ts) == 0 {
		return Search{}
	}
	common := ts[0].Largest.UserKey
	for _, t := range ts[1:] {
		k := t.Largest.UserKey
		n := 0
		for n < len(common) && n < len(k) && common[n] == k[n] {
			n++
		}
		common = common[:n]
	}
	s := Search{common: common, words: make([]uint64, len(ts))}
	for i, t := range ts {
		s.words[i] = wordAfter(t.Largest.UserKey, len(common))
	}
	return s
}

// wordAfter returns the 8 bytes of key after its first skip, big-endian,
// zero-padded: for keys a < b sharing their first skip bytes,
// wordAfter(a) <= wordAfter(b).
func wordAfter(key []byte, skip int) uint64 {
	var b [8]byte
	copy(b[:], key[skip:])
	return binary.BigEndian.Uint64(b[:])
}

// Find returns the index of the first table of ts (the run s was made
// from) whose largest user key is >= key, or len(ts) if none is.
func (s *Search) Find(ts []*base.TableMeta, key []byte) int {
	n := len(s.words)
	if n == 0 {
		return 0
	}
	c := len(s.common)
	if len(key) < c || !bytes.Equal(key[:c], s.common) {
		// key leaves the shared prefix: it sorts before every largest key
		// or after all of them.
		if bytes.Compare(key[:min(c, len(key))], s.common) < 0 {
			return 0
		}
		return n
	}
	w := wordAfter(key, c)
	lo, hi := 0, n // the first word >= w
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.words[m] < w {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == n || s.words[lo] > w {
		return lo // words differ: the keys compare as their words do
	}
	// The tables whose word equals key's, [lo, end): compare the keys.
	end := lo + sort.Search(n-lo, func(i int) bool { return s.words[lo+i] > w })
	return lo + sort.Search(end-lo, func(i int) bool { return bytes.Compare(ts[lo+i].Largest.UserKey, key) >= 0 })
}

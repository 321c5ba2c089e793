package memtable

import "bytes"

// SplitKeys returns at most n-1 distinct user keys, ascending, that cut
// the memtable's entries into about n parts of similar counts: a part
// holds the entries from one key (or the start) up to the next. They are
// picked evenly from the nodes of the highest level of the skiplist that
// has some 64n of them; the nodes of a level are a random sample of the
// entries (each reaches level l with probability b^-l for branching factor
// b), so a part's count is off by about an eighth (one standard deviation,
// from some 64 samples a part). The keys are copies. None for n < 2 or a
// memtable too small to cut.
func (m *MemTable) SplitKeys(n int) [][]byte {
	count := m.Len()
	if n < 2 || count < 2*n {
		return nil
	}
	b := 1 << m.levelBits
	lvl, nodes := 0, count
	for lvl+1 < int(m.height.Load()) && nodes/b >= 64*n {
		lvl++
		nodes /= b
	}
	dir := *m.chunks.Load()
	var sample []*node
	for x := m.head; ; {
		nx := ref(x.link(lvl).Load())
		if nx == 0 {
			break
		}
		x = m.node(&dir, nx)
		sample = append(sample, x)
	}
	// A cut at the first user key would leave the part before it empty.
	prev := m.next(m.head).userKey()
	var keys [][]byte
	for i := 1; i < n; i++ {
		k := sample[i*len(sample)/n].userKey()
		if bytes.Compare(k, prev) <= 0 {
			continue
		}
		keys = append(keys, bytes.Clone(k))
		prev = k
	}
	return keys
}

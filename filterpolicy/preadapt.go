package filterpolicy

import (
	"slices"

	"github.com/adaptkv/adaptkv/filter"
)

// Pre-adaptation: an adaptive filter built for a new table (a flush or a
// compaction output) is asked the store's known negatives in the table's
// key range that the table does not hold, and fixes its false positives
// among them before its block is written. The builder has every slot's
// hash word in memory, so a fix costs no read of the table file, and the
// fixes are part of the block: the first reader of the table sees a filter
// that already knows the hot absent keys. See kv's "Known negatives".

// PreAdaptStats counts what one block build's pre-adaptation did.
type PreAdaptStats struct {
	// Checked is the number of known negatives queried in the new filter.
	Checked int
	// Fixed is the number of false positives among them the filter fixed.
	Fixed int
	// Failed is the number of false positives it could not fix (the
	// block is written without those fixes).
	Failed int
}

// PreAdaptBudget bounds the known negatives a new table's filter checks to
// four times its keys (the most counted first, at least 4096): a check
// costs a filter query and a false positive a fix, so the bound keeps
// pre-adaptation proportional to the table's write cost however many known
// negatives its key range holds (a small flush of a wide key range). The
// keys left out are the least asked; the read path fixes them if they come
// back. Measured on kvbench churn (taf, wasted probes against the ideal
// bound): half the table's keys 2.9x, twice 1.4-1.8x, four times 0.8-1.1x.
func PreAdaptBudget(tableKeys uint64) int { return max(4096, int(min(4*tableKeys, 1<<30))) }

// preAdapt fixes, in the adaptive filter whose just-built local state and
// remote words are given, the false positives among negs (known negatives
// in the table's range that it does not hold, sorted by key): all of them
// within PreAdaptBudget, else the most counted. It returns the local state to write:
// the adapted one, or local itself when nothing was fixed or the filter
// could not be decoded (pre-adaptation is a hint: the block is correct
// without it).
func preAdapt(h Header, local []byte, remote []uint64, negs []filter.KnownNegative) ([]byte, PreAdaptStats) {
	var st PreAdaptStats
	if len(negs) == 0 {
		return local, st
	}
	h.HasRemote, h.RemoteSlots = true, len(remote)
	// Decode may alias its input and Adapt change it in place: work on a copy.
	f, err := decodeLocal(h, slices.Clone(local), filter.MemRemote(remote))
	if err != nil {
		return local, st
	}
	af, ok := f.(filter.Adaptive)
	if !ok {
		return local, st
	}
	if budget := PreAdaptBudget(h.NumKeys); len(negs) > budget {
		// The most counted, fixed least counted first: a kind whose fix
		// information is bounded (aprefix) drops a bin's oldest fixes for
		// new ones, so the most asked keys are fixed last and kept.
		order := filter.MostCounted(negs)[:budget]
		top := make([]filter.KnownNegative, budget)
		for i, j := range order {
			top[budget-1-i] = negs[j]
		}
		negs = top
	}
	for _, n := range negs {
		st.Checked++
		key := n.Key
		if !af.MayContain(key) {
			continue
		}
		if af.Adapt(key) != nil {
			st.Failed++
			continue
		}
		st.Fixed++
	}
	if st.Fixed == 0 {
		return local, st
	}
	adapted, err := af.MarshalBinary()
	if err != nil {
		st.Failed += st.Fixed
		st.Fixed = 0
		return local, st
	}
	return adapted, st
}

package sstable

import (
	"bytes"
	"fmt"
)

// PreAdaptResult counts what PreAdapt did.
type PreAdaptResult struct {
	// Checked is the number of keys queried in the filter.
	Checked int
	// Maybe is the number the filter answered "maybe" for.
	Maybe int
	// Fixed is the number of false positives fixed (the table holds no
	// version of the key and the filter adapted).
	Fixed int
	// Failed is the number of false positives the filter could not fix
	// (the filter stays as it was for them; see LastAdaptError).
	Failed int
}

// PreAdapt queries the filter with keys the caller knows are asked often
// and absent elsewhere (the store's known negatives) and fixes the false
// positives among them, as GetInternal would on a real lookup: each
// "maybe" probes the table, and a key of which the table holds no version
// adapts the filter. A key the table holds is left alone. Without an
// adaptive filter it does nothing.
//
// It is for a table already written: a writer given the known negatives
// (WriterOptions.KnownNegatives, as the store's flushes and compactions
// do) fixes them while it builds the filter, without probes or remote
// reads. It is safe concurrently with lookups. Its fixes are counted in
// Metrics.PreAdaptations, apart from the read path's counters, and saved
// with the adaptive state like any other. The error is the first probe
// error (the table is unreadable); adaptation failures are only counted.
func (r *Reader) PreAdapt(keys [][]byte) (PreAdaptResult, error) {
	var res PreAdaptResult
	if r.adaptive == nil {
		return res, nil
	}
	sh := r.enter()
	if sh == nil {
		return res, ErrClosed
	}
	defer r.exit(sh)
	for _, key := range keys {
		res.Checked++
		if !r.filter.MayContain(key) {
			continue
		}
		res.Maybe++
		held, err := r.holdsUserKey(key)
		if err != nil {
			return res, err
		}
		if held {
			continue
		}
		if !r.adapt(key) {
			res.Failed++
			continue
		}
		res.Fixed++
		r.preAdaptations.Add(1)
	}
	r.preAdaptChecks.Add(uint64(res.Checked))
	return res, nil
}

// holdsUserKey reports whether the table holds any version of userKey.
func (r *Reader) holdsUserKey(userKey []byte) (bool, error) {
	it, err := r.newIter()
	if err != nil {
		return false, err
	}
	kv := it.SeekGE(userKey, 0)
	held := kv != nil && bytes.Equal(kv.K.UserKey, userKey)
	if kv == nil {
		err = it.Error()
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("%w: %s: %w", ErrCorrupt, r.path, err)
	}
	return held, nil
}

// Package filtertest plays the query streams of the TAF paper's evidence
// (Lee, McCauley, Singh, Stein, section 6.1) against any filter, for the
// tests of the filter packages: the repeated-query order and the
// adversarial rounds; it also holds the design false-positive rates and
// Pebble's filter-writer protocol (WriteBlock). It holds no assertions;
// callers check the counts.
package filtertest

import "math/rand/v2"

// Filter is what the streams query; Adapt is called on every false
// positive when the stream adapts.
type Filter interface {
	MayContain(key []byte) bool
	Adapt(key []byte) error
}

// RepeatedOrder returns each of the indices 0..u-1 reps times, shuffled:
// the repeated-query stream (every absent key asked reps times in a random
// interleaving).
func RepeatedOrder(rng *rand.Rand, u, reps int) []int32 {
	order := make([]int32, 0, reps*u)
	for r := 0; r < reps; r++ {
		for i := 0; i < u; i++ {
			order = append(order, int32(i))
		}
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order
}

// Adversary plays the adversarial stream of section 6.1 on the absent keys
// q (reordered in place): rounds of 10 shuffled subrounds, each querying
// every key of q and, when adapt is set, fixing every false positive; after
// a round only the keys that were false positives in it stay. It stops
// after at least two rounds once fewer than n/100 keys stay (n: the stored
// keys), when none stays, or after 8 rounds, and returns the last round's
// false positives and queries and the rounds played. An Adapt error ends
// it.
func Adversary(f Filter, adapt bool, n int, q [][]byte, rng *rand.Rand) (fps, queries, rounds int, err error) {
	const subrounds, maxRounds = 10, 8
	for rounds = 1; ; rounds++ {
		hit := make([]bool, len(q))
		fps = 0
		for s := 0; s < subrounds; s++ {
			rng.Shuffle(len(q), func(i, j int) { q[i], q[j] = q[j], q[i]; hit[i], hit[j] = hit[j], hit[i] })
			for i, k := range q {
				if f.MayContain(k) {
					fps++
					hit[i] = true
					if adapt {
						if err := f.Adapt(k); err != nil {
							return fps, queries, rounds, err
						}
					}
				}
			}
		}
		queries = subrounds * len(q)
		var next [][]byte
		for i, k := range q {
			if hit[i] {
				next = append(next, k)
			}
		}
		if len(next) == 0 || rounds >= maxRounds || (rounds >= 2 && float64(len(next)) < 0.01*float64(n)) {
			return fps, queries, rounds, nil
		}
		q = next
	}
}

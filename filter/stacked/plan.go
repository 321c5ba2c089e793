package stacked

import "math"

// The planner picks the number of layers (1, 3 or 5), the known negatives
// to build with (the most counted ones, as in section 3.5, "Number of
// Known Negatives") and each layer's false-positive rate, minimizing the
// expected false-positive rate of equation (1) (section 4.1) under the
// space of section 4.2, for a budget of bitsPerKey bits per positive.
//
// It follows the paper's continuous approximation (section 3.5): inner
// layers share one rate (the paper's equal-FPR start), the first layer
// takes the rest of the budget; a grid search replaces the ISRES and
// COBYLA solvers, which a few hundred evaluations of closed forms make
// unnecessary.

// psiAssumed is the share of negative queries assumed to go to the known
// negatives the store handed over (the paper's psi for the whole list).
// The store knows the known negatives' counts but not the volume of the
// other negative queries (it does not count keys it does not hold), so the
// planner assumes an even split: half of the absent Gets go to keys it
// recorded. Zipfian workloads put more there (kvbench churn: about 90%),
// so 0.5 errs towards robustness (a larger first layer, section 4.3,
// "Tuning for Expected Performance vs. Robustness").
const psiAssumed = 0.5

// bloomBits is s(alpha) of a Bloom filter at its optimal number of hash
// functions: log2(1/alpha) / ln 2 bits per element.
func bloomBits(alpha float64) float64 { return -math.Log2(alpha) / math.Ln2 }

// bloomAlpha inverts bloomBits.
func bloomAlpha(bits float64) float64 { return math.Exp(-bits * math.Ln2 * math.Ln2) }

// plan is a stack's shape: the rates of its layers and how many of the
// most counted known negatives it is built with.
type plan struct {
	alphas    []float64 // alphas[i] is the rate of layer i+1
	negatives int       // the most counted known negatives used
	psi       float64   // the share of negative queries assumed to go to them
	efpr      float64   // expected false-positive rate, equation (1)
}

// efpr is equation (1) of section 4.1: known negatives pass only if every
// positive layer lets them through; unknown negatives are rejected by a
// negative layer (layer 2i rejects what reached it with probability
// 1-alpha_2i) or pass the whole stack.
func efpr(alphas []float64, psi float64) float64 {
	known := 1.0
	for i := 0; i < len(alphas); i += 2 {
		known *= alphas[i]
	}
	unknown, reach := 0.0, 1.0
	for i, a := range alphas {
		if i%2 == 1 { // a negative layer: rejects, i.e. answers "present"
			unknown += reach * (1 - a)
		}
		reach *= a
	}
	unknown += reach
	return psi*known + (1-psi)*unknown
}

// stackBits is the space of section 4.2: positive layer 2i+1 holds the
// positives that passed every negative layer before it (n times the
// product of the even rates), negative layer 2i the known negatives that
// passed every positive layer before it (k times the product of the odd
// rates).
func stackBits(alphas []float64, n, k float64) float64 {
	bits := 0.0
	pos, neg := n, k
	for i, a := range alphas {
		if i%2 == 0 {
			bits += max(pos*bloomBits(a), minLayerBits)
			neg *= a
		} else {
			bits += max(neg*bloomBits(a), minLayerBits)
			pos *= a
		}
	}
	return bits
}

// planFor returns the best plan for n positives with a budget of
// bitsPerKey bits each, given the known negatives' counts sorted from the
// most counted down. layers, when non-zero, forces the number of layers
// (tests).
func planFor(n int, bitsPerKey float64, counts []uint64, layers int) plan {
	budget := bitsPerKey * float64(n)
	one := plan{alphas: []float64{bloomAlpha(bitsPerKey)}}
	one.efpr = efpr(one.alphas, 0)
	if n == 0 || len(counts) == 0 || layers == 1 {
		return one
	}
	var total float64
	cum := make([]float64, len(counts)+1)
	for i, c := range counts {
		total += float64(c)
		cum[i+1] = total
	}
	best := one
	best.efpr = efpr(one.alphas, psiAssumed) // the same for every psi
	if layers != 0 {
		best.efpr = math.Inf(1)
	}
	// The known negatives used: the most counted k, for k the whole list
	// and its halvings down to 1/64.
	var ks []int
	for k := len(counts); k >= 1 && len(ks) < 7; k /= 2 {
		ks = append(ks, k)
	}
	for _, t := range []int{3, 5} {
		if layers != 0 && t != layers {
			continue
		}
		for _, k := range ks {
			psi := psiAssumed
			if total > 0 {
				psi *= cum[k] / total
			}
			// Inner rates on a log grid from 0.5 down to 1e-4.
			for inner := 0.5; inner > 1e-4; inner *= 0.8 {
				alphas := make([]float64, t)
				for i := range alphas {
					alphas[i] = inner
				}
				// The first layer takes what the inner layers leave; their
				// size depends on its rate, so iterate to the fixed point.
				alphas[0] = bloomAlpha(bitsPerKey)
				feasible := true
				for range 8 {
					rest := stackBits(alphas, float64(n), float64(k)) - max(float64(n)*bloomBits(alphas[0]), minLayerBits)
					left := budget - rest
					if left <= 0 {
						feasible = false
						break
					}
					alphas[0] = min(bloomAlpha(left/float64(n)), 1)
				}
				if !feasible || stackBits(alphas, float64(n), float64(k)) > budget*1.0001 {
					continue
				}
				if e := efpr(alphas, psi); e < best.efpr {
					best = plan{alphas: alphas, negatives: k, psi: psi, efpr: e}
				}
			}
		}
	}
	return best
}

package filtertest

import "math"

// DesignFPR is the first-time false-positive rate each registered filter
// kind is designed for, at its default options; the table and policy tests
// hold every kind to it (FPRBound). A new kind adds its line here.
//
// Pebble's blocked bloom at 10 bits/key and 6 probes is about 1.2%; binary
// fuse 8 is 2^-8; the Prefix Filter about 0.37-0.39% (paper Table 3), and
// the adaptive prefix filter answers a first-time query as it does; the
// quotient filters about LoadFactor*2^-r <= 2^-8 (TAF paper section 3, exAF
// appendix C.4).
var DesignFPR = map[string]float64{
	"none": 1, "bloom": 0.0125, "fuse": 1.0 / 256, "prefix": 0.004, "aprefix": 0.004,
	"rsqf": 1.0 / 256, "utaf": 1.0 / 256, "taf": 1.0 / 256, "exaf": 1.0 / 256,
	// stacked with no known negatives: one Bloom layer at 12 bits/key.
	"stacked": 0.00317,
	// adaptive cuckoo filters, 11-bit slots at 95% load: k*b comparisons
	// against 2^w-1 fingerprint values (w = 11, 10 for cyclic's selector).
	"acf": 4 * 0.95 / 2047, "acf-cyclic": 4 * 0.95 / 1023, "acf-swap": 8 * 0.95 / 2047,
	"caf": 1.0 / 256,
}

// FPRBound is p plus 4 binomial standard deviations over n trials: the
// largest measured rate a test accepts for a design rate p.
func FPRBound(p float64, n int) float64 {
	return p + 4*math.Sqrt(p*(1-p)/float64(n))
}

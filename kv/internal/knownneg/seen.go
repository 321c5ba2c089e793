package knownneg

// Seen and SeenHeld: the "asked before" of the store's second-sight fix
// rules, read on false positives.

// Seen reports whether key was asked before: the "asked before" of the
// store's second-sight fix rules, unsampled (Record's sampling would blur
// it: a key held after its first ask with probability 1/Every). A key the
// sketch does not hold takes a slot (counted as one miss of Record's
// weight, unless another goroutine holds the lock), so that its next
// sight finds it. While the doorkeeper is on (nearly all recent keys new:
// Sampling.SecondSight), a key first seen sets its doorkeeper bit instead
// and takes no slot; a key whose bit is set, on or off, takes its slot and
// counts as asked before: its earlier sight, or a bit another key set
// (with DefaultSampling's miss weight of 2, at most 12% of the bits are
// set when the doorkeeper is cleared; see doorBitsPerSlot). A stream of
// false positives of new keys then costs a bit each, not the lock, a
// slot's lines and a copy of the key (2% of kvbench neguniform's Gets
// with the adaptive prefix filter), and a key that comes back is still
// seen at its second sight unless the doorkeeper was cleared in between
// (every aging period). Called on false positives, and with DirectReads
// on the returns a table's cache of false positives answers (kv's
// cachedReturn).
func (s *Sketch) Seen(key []byte) bool {
	held, marked := s.look(key)
	return held || marked
}

// SeenHeld is Seen that counts a key as asked before only if the sketch
// holds it: a doorkeeper bit, which may be another key's, does not count
// (the key takes its slot all the same, so its next sight finds it held).
// A key is then asked before at its second sight while the doorkeeper is
// off and at its third while it is on; a gate that pays a device read for
// every key it passes spares the reads of the keys another key's bit
// would pass. Called on false positives only.
func (s *Sketch) SeenHeld(key []byte) bool {
	held, _ := s.look(key)
	return held
}

// look is Seen's work: held says the sketch held key, marked that its
// doorkeeper bit was set (then, or a key not held, it takes a slot unless
// this was its first sight while the doorkeeper is on).
func (s *Sketch) look(key []byte) (held, marked bool) {
	h := hash(s.seed, key)
	if s.holds(h) {
		return true, false
	}
	switch {
	case s.door == nil:
	case s.doorOn.Load():
		if s.firstSight(h) {
			s.countMiss(uint64(s.sampling.Every * s.sampling.MissEvery))
			return false, false
		}
		marked = true
	default:
		// A bit set while the doorkeeper was on still marks a sight.
		w, bit := s.doorBit(h)
		marked = w.Load()&bit != 0
	}
	s.takeMiss(h, key)
	return false, marked
}

package knownneg

// Recording windows. A store whose wasted probes are cheap records absent
// Gets only while they can pay: the record carries what the read path
// learned into the tables a flush or compaction writes, so it is worth
// keeping only while tables are being rewritten. SetWindow makes Record
// count only within windows, each opened by OpenWindow and closed once
// about the window's weight has been counted since (about that many
// absent Gets, as sampling weighs them); outside a window Record is the
// load of a flag. Seen, Contains and Add are not windowed.

// SetWindow makes Record count only within windows of about weight
// counted weight (0: always, the default); call it before any other
// method. The sketch starts with its window closed.
func (s *Sketch) SetWindow(weight uint64) { s.window = weight }

// OpenWindow opens Record's window, or restarts an open one, for about
// the SetWindow weight from now, and reports whether it did: false if
// another goroutine holds the sketch's lock (a miss being taken, or a
// Snapshot, whose flush or compaction has just opened the window), so
// that a caller on a path that must not wait can try again later. Without
// SetWindow it does nothing and reports true.
func (s *Sketch) OpenWindow() bool {
	if s.window == 0 {
		return true
	}
	if !s.mu.TryLock() {
		return false
	}
	defer s.mu.Unlock()
	s.windowEnd = s.total() + s.window
	s.open.Store(true)
	return true
}

// Recording reports whether Record counts now.
func (s *Sketch) Recording() bool { return s.window == 0 || s.open.Load() }

// total is the counted weight since New (summing the stripes: for
// OpenWindow and age's checks, not for every Record). Under mu it only
// grows: aging moves weight from counted to aged under mu.
func (s *Sketch) total() uint64 { return s.aged.Load() + uint64(s.counted.Load()) }

// closeWindowIfDone closes the window once the counted weight reached its
// end. age calls it every period/agingChecks of a stripe's weight, so the
// window closes up to striped.Stripes x that much late (more if the lock
// is busy at a check: the check is skipped).
func (s *Sketch) closeWindowIfDone() {
	if !s.open.Load() || !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	if s.total() >= s.windowEnd {
		s.open.Store(false)
	}
}

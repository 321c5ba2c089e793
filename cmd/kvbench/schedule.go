package main

import "time"

// This file decides when a workload's operations run: at a paced rate
// (-target), and in turns with the other stores' (-interleave).

// pacer holds a worker to a rate (YCSB's -target): operation i starts no
// earlier than start + i/rate. It sleeps only when ahead by more than
// pacerSlack, so a worker that fell behind runs its operations back to
// back until it has caught up, and the rate holds on average.
type pacer struct {
	interval time.Duration // 0: unthrottled
	start    time.Time
}

// pacerSlack is how far ahead of its schedule a worker may run before it
// sleeps: a sleep is a timer and a wake-up, tens of microseconds.
const pacerSlack = 50 * time.Microsecond

func newPacer(rate float64, start time.Time) pacer {
	if rate <= 0 {
		return pacer{}
	}
	return pacer{interval: time.Duration(float64(time.Second) / rate), start: start}
}

// wait returns when operation i is due, or less than pacerSlack before.
func (p pacer) wait(i uint64) {
	if p.interval == 0 {
		return
	}
	if d := time.Until(p.start.Add(time.Duration(i) * p.interval)); d > pacerSlack {
		time.Sleep(d)
	}
}

// storeTurn is one store's place in a workload whose stores take turns
// (-interleave): its workers wait for a token on run before each slice of
// per operations and report on done when the slice, or their stream, is
// over; takeTurns hands the tokens out and times each turn, so that spent
// is the store's time in its own turns and nothing else.
type storeTurn struct {
	per      uint64        // operations a worker runs a turn
	workers  int           // workers that will ask for turns
	run      chan struct{} // a token per worker per turn
	done     chan bool     // a worker's slice is over (true: its stream is)
	quit     chan struct{} // closed when the store's run returns (it may have started no worker)
	finished chan struct{} // closed once spent holds the store's last turn
	spent    time.Duration
}

// newStoreTurn returns the turn of a store whose workers run ops
// operations a turn between them.
func newStoreTurn(ops uint64, workers int) *storeTurn {
	return &storeTurn{per: max(1, ops/uint64(workers)), workers: workers, run: make(chan struct{}),
		done: make(chan bool), quit: make(chan struct{}), finished: make(chan struct{})}
}

// worker returns one worker's side of t (nil, which never waits, for a
// store that runs alone).
func (t *storeTurn) worker() *workerTurn {
	if t == nil {
		return nil
	}
	return &workerTurn{t: t}
}

// elapsed returns the time the store spent in its turns, once every
// worker has finished; wall is what a store that runs alone measured.
func (t *storeTurn) elapsed(wall time.Duration) time.Duration {
	if t == nil {
		return wall
	}
	<-t.finished
	return t.spent
}

// workerTurn is a worker's side of its store's turns.
type workerTurn struct {
	t       *storeTurn
	holding bool // the worker is inside a turn
}

// step is called before the worker's operation i: it waits for the
// store's next turn before the first operation and after every per; true
// if it waited.
func (w *workerTurn) step(i uint64) bool {
	if w == nil || (w.holding && i%w.t.per != 0) {
		return false
	}
	if w.holding {
		w.t.done <- false
	}
	<-w.t.run
	w.holding = true
	return true
}

// finish reports that the worker has run its last operation (or failed);
// a worker that ran none still takes its turn to say so.
func (w *workerTurn) finish() {
	if w == nil {
		return
	}
	if !w.holding {
		<-w.t.run
	}
	w.holding = false
	w.t.done <- true
}

// takeTurns runs the stores' turns round-robin, in the order given, until
// every worker of every store has finished: a turn sends each of the
// store's live workers a token and waits for all of them to report, so
// one store's operations run at a time, and every store meets the
// machine's slow and fast moments alike.
func takeTurns(ts []*storeTurn) {
	live := make([]int, len(ts))
	left := 0
	for i, t := range ts {
		live[i] = t.workers
		if live[i] > 0 {
			left++
		} else {
			close(t.finished)
		}
	}
	for left > 0 {
		for i, t := range ts {
			if live[i] == 0 {
				continue
			}
			start := time.Now()
			if !t.turn(&live[i]) {
				live[i] = 0 // the store's run returned without its workers
			}
			t.spent += time.Since(start)
			if live[i] == 0 {
				close(t.finished)
				left--
			}
		}
	}
}

// turn runs one turn of t's *live workers and counts those that finished;
// false if the store's run has returned without them.
func (t *storeTurn) turn(live *int) bool {
	n := *live
	for k := 0; k < n; k++ {
		select {
		case t.run <- struct{}{}:
		case <-t.quit:
			return false
		}
	}
	for k := 0; k < n; k++ {
		select {
		case last := <-t.done:
			if last {
				*live--
			}
		case <-t.quit:
			return false
		}
	}
	return true
}

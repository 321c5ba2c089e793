package main

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress is a progress bar on stderr, fed by an atomic counter so that
// workers never contend on the bar's lock; a nil *progress is silent.
type progress struct {
	bar  *progressbar.ProgressBar
	done atomic.Int64
	stop chan struct{}
	wait chan struct{}
}

func newProgress(w io.Writer, desc string, total int64) *progress {
	p := &progress{
		bar: progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		),
		stop: make(chan struct{}),
		wait: make(chan struct{}),
	}
	go func() {
		defer close(p.wait)
		t := time.NewTicker(150 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				_ = p.bar.Set64(p.done.Load())
			}
		}
	}()
	return p
}

func (p *progress) add(n int64) {
	if p != nil {
		p.done.Add(n)
	}
}

func (p *progress) finish() {
	if p == nil || p.stop == nil {
		return
	}
	close(p.stop)
	<-p.wait
	p.stop = nil
	_ = p.bar.Finish()
}

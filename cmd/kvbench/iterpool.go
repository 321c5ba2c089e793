package main

import (
	"errors"
	"sync/atomic"
)

// iterPool keeps the iterators of point reads made with SeekPrefixGE
// (pebble-l6, and adaptkv stores under -read seekprefix) for reuse. An
// iterator reads the state it was opened on, so reusing one is only right
// while nothing was written: each is kept with the count of completed
// writes it was opened at and closed instead of reused once a write
// completed after that. Read-only phases reuse them; under writes each read
// opens a new one, as a user of either engine would have to.
type iterPool[I interface{ Close() error }] struct {
	writes atomic.Uint64 // completed writes: an iterator opened before one is stale
	pool   chan pooledIter[I]
}

// pooledIter is an iterator and the write count it was opened at.
type pooledIter[I any] struct {
	it     I
	writes uint64
}

func newIterPool[I interface{ Close() error }]() *iterPool[I] {
	return &iterPool[I]{pool: make(chan pooledIter[I], 64)}
}

// get returns a pooled iterator that has seen every completed write, or
// one open makes.
func (p *iterPool[I]) get(open func() (I, error)) (pooledIter[I], error) {
	w := p.writes.Load() // before opening: the iterator sees these writes
	for {
		select {
		case pi := <-p.pool:
			if pi.writes == w {
				return pi, nil
			}
			if err := pi.it.Close(); err != nil {
				return pooledIter[I]{}, err
			}
			continue
		default:
		}
		it, err := open()
		return pooledIter[I]{it: it, writes: w}, err
	}
}

// put keeps pi for a later get, or closes it when the pool is full.
func (p *iterPool[I]) put(pi pooledIter[I]) error {
	select {
	case p.pool <- pi:
		return nil
	default:
		return pi.it.Close()
	}
}

// wrote counts a completed write (pooled iterators opened before are
// stale) and returns err.
func (p *iterPool[I]) wrote(err error) error {
	p.writes.Add(1)
	return err
}

// close closes the pooled iterators.
func (p *iterPool[I]) close() error {
	var errs []error
	for {
		select {
		case pi := <-p.pool:
			errs = append(errs, pi.it.Close())
		default:
			return errors.Join(errs...)
		}
	}
}

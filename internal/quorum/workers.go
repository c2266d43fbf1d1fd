package quorum

import "sync"

// Workers runs node calls on goroutines that stay parked between calls, so
// that a call starts on a stack already grown to what a call through
// go-redis needs: a fresh goroutine per call would grow (copy) its stack
// on every call. The zero value is ready to use; it is safe for
// concurrent use.
type Workers struct {
	mu     sync.Mutex
	idle   []chan func() // parked workers, each waiting on its own channel
	closed bool
}

// maxIdle bounds the parked workers: one per node call of a few rounds in
// flight at once; a worker finding the pool full ends.
const maxIdle = 64

// Go runs f on a parked worker, or on a new one when none is parked (or w
// is nil or closed).
func (w *Workers) Go(f func()) {
	if w == nil {
		go f()
		return
	}
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		ch <- f // unbuffered: the worker is parked on it
		return
	}
	w.mu.Unlock()
	go w.work(f)
}

func (w *Workers) work(f func()) {
	var ch chan func()
	for {
		f()
		w.mu.Lock()
		if w.closed || len(w.idle) >= maxIdle {
			w.mu.Unlock()
			return
		}
		if ch == nil {
			ch = make(chan func())
		}
		w.idle = append(w.idle, ch)
		w.mu.Unlock()
		if f = <-ch; f == nil { // Close
			return
		}
	}
}

// Close ends the parked workers; calls running now end when they return.
// Go still works after Close, on a goroutine of its own per call.
func (w *Workers) Close() {
	w.mu.Lock()
	idle := w.idle
	w.idle, w.closed = nil, true
	w.mu.Unlock()
	for _, ch := range idle {
		ch <- nil
	}
}

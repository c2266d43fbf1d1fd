package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock"
)

// demoCmd: workers contend for one lock; halfway through, one node stops
// answering and comes back. An in-process counter of holders proves that no
// two workers were ever inside at once.
func demoCmd(fs *flag.FlagSet) runner {
	nodesFlag := fs.String("nodes", "", "comma-separated redis:// `URLS`, one per node (default: start 5 local nodes)")
	workers := fs.Int("workers", 8, "contending workers")
	duration := fs.Duration("duration", 8*time.Second, "how long to run")
	ttl := fs.Duration("ttl", 2*time.Second, "lock TTL")
	hold := fs.Duration("hold", 2*time.Millisecond, "time spent inside the critical section")
	embedded := fs.Bool("embedded", false, "run the 5 nodes in-process (miniredis) even if redis-server is installed")
	metricsAddr := fs.String("metrics-addr", "", "serve the OpenTelemetry metrics for Prometheus at this address, e.g. 127.0.0.1:9464 (default: off)")
	return func(_ []string, out, _ io.Writer) error {
		if *workers < 1 || *duration <= 0 || *hold < 0 || *ttl <= 0 {
			return usageErr("--workers, --duration and --ttl must be positive, --hold not negative")
		}
		if *embedded && *nodesFlag != "" {
			return usageErr("--embedded starts its own nodes; it does not go with --nodes")
		}

		dm, err := startMetrics(*metricsAddr)
		if err != nil {
			return err
		}
		defer dm.Close()

		var urls []string
		var local []localNode
		if *nodesFlag == "" {
			nodes, kind, err := startNodes(5, *embedded)
			if err != nil {
				return err
			}
			defer func() {
				for _, n := range nodes {
					n.Close()
				}
			}()
			local, urls = nodes, urlsOf(nodes)
			fmt.Fprintf(out, "redlock demo: 5 nodes on %s\n", kind)
		} else {
			urls = splitURLs(*nodesFlag)
			fmt.Fprintf(out, "redlock demo: %d nodes given with --nodes (no fault injected)\n", len(urls))
		}
		if err := pingAll(urls); err != nil {
			return err
		}
		if dm.URL != "" {
			fmt.Fprintf(out, "metrics: %s\n", dm.URL)
		}
		c, err := redlock.NewFromURLs(urls, dm.Options()...)
		if err != nil {
			return &exitError{exitUsage, err}
		}
		defer c.Close()
		fmt.Fprintf(out, "%d workers contend for %q (TTL %v, %v inside), quorum %d of %d, for %v\n\n",
			*workers, "redlock:demo", *ttl, *hold, c.Quorum(), len(urls), *duration)

		ctx, cancel := context.WithTimeout(context.Background(), *duration)
		defer cancel()
		var (
			holders, overlaps atomic.Int32
			busy              atomic.Int64 // ns spent holding
			mu                sync.Mutex
			perWorker         = make([]int, *workers)
			lat               []time.Duration
			secLat            []time.Duration
			secCount          int
			errs              = map[string]int{}
		)
		var wg sync.WaitGroup
		for w := 0; w < *workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for ctx.Err() == nil {
					start := time.Now()
					l, err := c.Lock(ctx, "redlock:demo", *ttl)
					if err != nil {
						if ctx.Err() == nil {
							mu.Lock()
							errs[shortErr(err)]++
							mu.Unlock()
						}
						continue
					}
					waited := time.Since(start)
					in := time.Now()
					if holders.Add(1) > 1 {
						overlaps.Add(1)
					}
					time.Sleep(*hold)
					holders.Add(-1)
					busy.Add(int64(time.Since(in)))
					_ = l.Release(context.Background())
					mu.Lock()
					perWorker[w]++
					lat = append(lat, waited)
					secLat = append(secLat, waited)
					secCount++
					mu.Unlock()
				}
			}(w)
		}

		// Live view and fault schedule.
		var timeline []string
		begin := time.Now()
		faultAt, healAt := *duration/3, 2**duration/3
		faulted, healed := false, false
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		addrs := c.Nodes()
		prevFail := dm.nodeFailures()
		state := func() string {
			now := dm.nodeFailures()
			failed := failureCells(addrs, now, prevFail)
			prevFail = now
			s := make([]string, len(urls))
			for i := range s {
				s[i] = "up"
				if faulted && !healed && i == 2 {
					s[i] = "DOWN"
				}
				if failed[i] != "-" {
					s[i] += "(" + failed[i] + " failed)"
				}
			}
			return strings.Join(s, " ")
		}
		// Per second: the share of it someone held the lock, and what the
		// hand-off did (locks passed on with no round trip; waits ended by a
		// node's release notification or by the backoff timer).
		prevBusy, prevTick := int64(0), begin
		prevHS := c.Stats().Handoff
		fmt.Fprintf(out, "%6s %10s %5s %12s %12s %7s %9s %6s   %s\n", "time", "locks/s", "util", "wait p50", "wait max",
			"passed", "notified", "timer", "nodes (failed node calls in the last second)")
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case <-tick.C:
				el := time.Since(begin)
				if local != nil && !faulted && el >= faultAt {
					if err := local[2].Fault(); err == nil {
						faulted = true
						timeline = append(timeline, fmt.Sprintf("%5.1fs node 3 (%s) stopped", el.Seconds(), local[2].Addr()))
					}
				} else if local != nil && faulted && !healed && el >= healAt {
					if err := local[2].Heal(); err == nil {
						healed = true
						timeline = append(timeline, fmt.Sprintf("%5.1fs node 3 (%s) back", el.Seconds(), local[2].Addr()))
					}
				}
				mu.Lock()
				p50, max := quantile(secLat, 0.5), quantile(secLat, 1)
				n := secCount
				secLat, secCount = secLat[:0], 0
				mu.Unlock()
				now, b, hs := time.Now(), busy.Load(), c.Stats().Handoff
				util := float64(b-prevBusy) / float64(now.Sub(prevTick))
				fmt.Fprintf(out, "%5.0fs %10d %4.0f%% %12v %12v %7d %9d %6d   %s\n", el.Seconds(), n, 100*util, p50.Round(time.Microsecond), max.Round(time.Microsecond),
					hs.Handed-prevHS.Handed, hs.Notified-prevHS.Notified, hs.Timer-prevHS.Timer, state())
				prevBusy, prevTick, prevHS = b, now, hs
			}
		}
		wg.Wait()
		if faulted && !healed {
			_ = local[2].Heal()
		}
		elapsed := time.Since(begin)

		mu.Lock()
		defer mu.Unlock()
		total := 0
		for _, n := range perWorker {
			total += n
		}
		fmt.Fprintf(out, "\nsummary after %v\n", elapsed.Round(time.Millisecond))
		fmt.Fprintf(out, "  acquisitions:     %d (%.0f/s)\n", total, float64(total)/elapsed.Seconds())
		fmt.Fprintf(out, "  per worker:       %v\n", perWorker)
		fmt.Fprintf(out, "  overlaps:         %d (two workers inside at once)\n", overlaps.Load())
		fmt.Fprintf(out, "  lock utilization: %.0f%% of the time someone was inside\n", 100*float64(busy.Load())/float64(elapsed))
		fmt.Fprintf(out, "  wait to acquire:  p50 %v  p99 %v  max %v\n", quantile(lat, 0.5).Round(time.Microsecond),
			quantile(lat, 0.99).Round(time.Microsecond), quantile(lat, 1).Round(time.Microsecond))
		hs := c.Stats().Handoff
		share := 0.0
		if total > 0 {
			share = 100 * float64(hs.Handed) / float64(total)
		}
		fmt.Fprintf(out, "  hand-off:         %d of %d acquisitions passed on without a round trip (%.0f%%)\n", hs.Handed, total, share)
		fmt.Fprintf(out, "  waits ended by:   release notification %d, local release %d, previous waiter left %d, timer %d\n",
			hs.Notified, hs.Local, hs.Promoted, hs.Timer)
		if hs.SubscribeErrors+hs.ReceiveErrors+hs.Stalls > 0 {
			fmt.Fprintf(out, "  notifications:    %d subscribe errors, %d receive errors, %d stalled connections, %d reconnects\n",
				hs.SubscribeErrors, hs.ReceiveErrors, hs.Stalls, hs.Reconnects)
		}
		if len(errs) > 0 {
			keys := make([]string, 0, len(errs))
			for k := range errs {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(out, "  failed Lock calls: %d × %s\n", errs[k], k)
			}
		}
		for _, t := range timeline {
			fmt.Fprintf(out, "  fault: %s\n", t)
		}
		fails := dm.nodeFailures()
		for i, a := range addrs {
			if len(fails[a]) == 0 {
				continue
			}
			types := make([]string, 0, len(fails[a]))
			for typ, n := range fails[a] {
				types = append(types, fmt.Sprintf("%d %s", n, typ))
			}
			sort.Strings(types)
			fmt.Fprintf(out, "  node %d (%s) failed calls: %s\n", i+1, a, strings.Join(types, ", "))
		}
		if overlaps.Load() > 0 {
			return fmt.Errorf("%d overlaps: mutual exclusion violated", overlaps.Load())
		}
		if total == 0 {
			return errors.New("no lock was acquired")
		}
		return nil
	}
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, " ["); i > 0 {
		s = s[:i]
	}
	return s
}

// quantile returns the q-quantile of d (sorting it); 0 for none.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := int(q * float64(len(d)-1))
	return d[i]
}

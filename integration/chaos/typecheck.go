package chaos

import (
	"fmt"
	"sort"
	"time"

	"github.com/redlock-go/redlock/observe"
)

// The typed checkers: pure functions over the records of a typed run.
// Like Overlaps, two intervals overlap when one begins (Acq) before the
// other ends (End); an interval that ends as it begins held nothing.

// RWConflicts is the read-write lock's guarantee: the number of pairs
// where a writer's interval overlaps a reader's or another writer's
// interval of the same key from another client, with the first few
// described.
func RWConflicts(recs []Record) (int, []string) {
	rw := only(recs, func(r Record) bool { return r.Kind == kindRead || r.Kind == kindWrite })
	return conflicts(rw, func(a, b Record) bool {
		return (a.Kind == kindWrite || b.Kind == kindWrite) && a.Client != b.Client
	})
}

// ReentrantConflicts is the reentrant lock's guarantee: the number of
// pairs of overlapping entries of different holds of one key (entries of
// one hold may overlap), with the first few described.
func ReentrantConflicts(recs []Record) (int, []string) {
	re := only(recs, func(r Record) bool { return r.Kind == kindReentrant })
	return conflicts(re, func(a, b Record) bool { return a.Hold != b.Hold })
}

// Excess is the semaphore's guarantee: the number of permit acquisitions
// that made more than n holders of one semaphore at once, with the first
// few described.
func Excess(recs []Record, n int) (int, []string) {
	count := 0
	var ex []string
	sweep(only(recs, func(r Record) bool { return r.Kind == kindSemaphore }), func(open []Record, r Record) {
		if len(open)+1 <= n {
			return
		}
		count++
		if len(ex) < 3 {
			ex = append(ex, fmt.Sprintf("key %s: client %d acquired at %d beside %d holders of %d permits (%s)",
				r.Key, r.Client, r.Acq, len(open), n, describe(open)))
		}
	})
	return count, ex
}

var (
	kindRead      = string(observe.KindRead)
	kindWrite     = string(observe.KindWrite)
	kindSemaphore = string(observe.KindSemaphore)
	kindReentrant = string(observe.KindReentrant)
)

// conflicts counts the overlapping pairs of one key for which conflict
// holds.
func conflicts(recs []Record, conflict func(a, b Record) bool) (int, []string) {
	n := 0
	var ex []string
	sweep(recs, func(open []Record, r Record) {
		for _, o := range open {
			if !conflict(o, r) {
				continue
			}
			n++
			if len(ex) < 3 {
				ex = append(ex, fmt.Sprintf("key %s: client %d %s [%d,%d] overlaps client %d %s [%d,%d] by %v",
					r.Key, o.Client, o.Kind, o.Acq, o.End(), r.Client, r.Kind, r.Acq, r.End(), time.Duration(min(o.End(), r.End())-r.Acq)))
			}
		}
	})
	return n, ex
}

// sweep calls visit, key by key in order of acquisition, with each record
// and the earlier records of its key still open when it was acquired.
func sweep(recs []Record, visit func(open []Record, r Record)) {
	by := map[string][]Record{}
	for _, r := range recs {
		if r.End() > r.Acq {
			by[r.Key] = append(by[r.Key], r)
		}
	}
	for _, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Acq < rs[j].Acq })
		var open []Record
		for _, r := range rs {
			still := open[:0]
			for _, o := range open {
				if o.End() > r.Acq {
					still = append(still, o)
				}
			}
			open = still
			visit(open, r)
			open = append(open, r)
		}
	}
}

func only(recs []Record, keep func(Record) bool) []Record {
	var out []Record
	for _, r := range recs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

func describe(rs []Record) string {
	s := ""
	for i, r := range rs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("client %d [%d,%d]", r.Client, r.Acq, r.End())
	}
	return s
}

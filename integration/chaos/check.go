package chaos

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Overlaps is checker 1, mutual exclusion: the number of pairs of holder
// intervals of one key that overlap, with the first few described.
func Overlaps(recs []Record) (int, []string) {
	by := map[string][]Record{}
	for _, r := range recs {
		by[r.Key] = append(by[r.Key], r)
	}
	n := 0
	var ex []string
	for k, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Acq < rs[j].Acq })
		// Sweep: compare each interval with every earlier one still open.
		for i := range rs {
			for j := i - 1; j >= 0; j-- {
				if rs[j].End() > rs[i].Acq && rs[j].Client != rs[i].Client {
					n++
					if len(ex) < 3 {
						ex = append(ex, fmt.Sprintf("key %s: client %d held [%d,%d] overlaps client %d [%d,%d] by %v",
							k, rs[j].Client, rs[j].Acq, rs[j].End(), rs[i].Client, rs[i].Acq, rs[i].End(),
							time.Duration(rs[j].End()-rs[i].Acq)))
					}
				}
				if rs[i].Acq-rs[j].Acq > int64(time.Minute) {
					break
				}
			}
		}
	}
	return n, ex
}

// mutex model for porcupine: state is the holder's client id or -1.
type mutexIn struct {
	Acquire bool
	Client  int
}

var mutexModel = porcupine.Model{
	Init: func() interface{} { return -1 },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		in := input.(mutexIn)
		h := state.(int)
		if in.Acquire {
			return h == -1, in.Client
		}
		return h == in.Client, -1
	},
	DescribeOperation: func(input, output interface{}) string {
		in := input.(mutexIn)
		if in.Acquire {
			return fmt.Sprintf("acquire(%d)", in.Client)
		}
		return fmt.Sprintf("release(%d)", in.Client)
	},
}

// Linearizable is checker 3: per key, the history of successful acquires
// ([Lock called, Lock returned]) and releases (Release's window, cut at the
// validity deadline: past it the lock has ended whether released or not)
// checked against a mutex model. It returns the number of keys whose
// history is not linearizable and of keys where porcupine timed out.
func Linearizable(recs []Record, timeout time.Duration) (illegal, unknown int) {
	by := map[string][]porcupine.Operation{}
	for _, r := range recs {
		end := r.End()
		relRet := min(r.RelRet, max(r.Valid, r.RelCall))
		if relRet < end {
			relRet = end
		}
		by[r.Key] = append(by[r.Key],
			porcupine.Operation{ClientId: r.Client, Input: mutexIn{true, r.Client}, Call: r.Call, Return: r.Acq},
			porcupine.Operation{ClientId: r.Client, Input: mutexIn{false, r.Client}, Call: end, Return: relRet})
	}
	for _, ops := range by {
		switch porcupine.CheckOperationsTimeout(mutexModel, ops, timeout) {
		case porcupine.Illegal:
			illegal++
		case porcupine.Unknown:
			unknown++
		}
	}
	return illegal, unknown
}

// Unavailability is the time, averaged over keys, in gaps longer than
// 100ms during which no one held the key (within [from, to]).
func Unavailability(recs []Record, keys []string, from, to int64) time.Duration {
	const gap = int64(100 * time.Millisecond)
	var total int64
	for _, k := range keys {
		var iv [][2]int64
		for _, r := range recs {
			if r.Key == k {
				iv = append(iv, [2]int64{r.Acq, r.End()})
			}
		}
		sort.Slice(iv, func(i, j int) bool { return iv[i][0] < iv[j][0] })
		cur := from
		for _, x := range iv {
			if x[0]-cur > gap {
				total += x[0] - cur
			}
			cur = max(cur, x[1])
		}
		if to-cur > gap {
			total += to - cur
		}
	}
	if len(keys) == 0 {
		return 0
	}
	return time.Duration(total / int64(len(keys)))
}

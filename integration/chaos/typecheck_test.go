package chaos

import "testing"

// iv is a hand-made record held over [acq, end): released at end, with
// validity to spare.
func iv(client int, kind, key string, acq, end int64) Record {
	return Record{Client: client, Key: key, Kind: kind, Call: acq - 1, Acq: acq, RelCall: end, RelRet: end + 1, Valid: end + 100}
}

// entry is a hand-made reentrant entry of hold.
func entry(client int, hold string, acq, end int64) Record {
	r := iv(client, kindReentrant, "re", acq, end)
	r.Hold = hold
	return r
}

func TestRWConflicts(t *testing.T) {
	expired := iv(1, kindWrite, "k", 10, 100)
	expired.Valid = 20 // validity over before the reader came
	for _, tc := range []struct {
		name string
		recs []Record
		want int
	}{
		{"readers together", []Record{iv(1, kindRead, "k", 0, 10), iv(2, kindRead, "k", 5, 15), iv(3, kindRead, "k", 8, 9)}, 0},
		{"writer after readers", []Record{iv(1, kindRead, "k", 0, 10), iv(2, kindRead, "k", 5, 15), iv(3, kindWrite, "k", 15, 20)}, 0},
		{"writer on another key", []Record{iv(1, kindRead, "k", 0, 10), iv(2, kindWrite, "j", 5, 15)}, 0},
		{"writer's validity over", []Record{expired, iv(2, kindRead, "k", 25, 30)}, 0},
		{"other kinds ignored", []Record{iv(1, kindSemaphore, "k", 0, 10), iv(2, kindWrite, "k", 5, 15), iv(3, kindReentrant, "k", 5, 15)}, 0},
		{"writer beside a reader", []Record{iv(1, kindRead, "k", 0, 10), iv(2, kindWrite, "k", 9, 15)}, 1},
		{"reader beside a writer", []Record{iv(1, kindWrite, "k", 0, 10), iv(2, kindRead, "k", 5, 6)}, 1},
		{"two writers", []Record{iv(1, kindWrite, "k", 0, 10), iv(2, kindWrite, "k", 5, 15)}, 1},
		{"writer inside two readers", []Record{iv(1, kindRead, "k", 0, 10), iv(2, kindRead, "k", 1, 10), iv(3, kindWrite, "k", 2, 3)}, 2},
	} {
		if n, ex := RWConflicts(tc.recs); n != tc.want {
			t.Errorf("%s: %d conflicts %v, want %d", tc.name, n, ex, tc.want)
		}
	}
}

func TestExcess(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs []Record
		want int
	}{
		{"two of two", []Record{iv(1, kindSemaphore, "s", 0, 10), iv(2, kindSemaphore, "s", 5, 15)}, 0},
		{"third after one left", []Record{iv(1, kindSemaphore, "s", 0, 10), iv(2, kindSemaphore, "s", 5, 15), iv(3, kindSemaphore, "s", 10, 20)}, 0},
		{"third on another semaphore", []Record{iv(1, kindSemaphore, "s", 0, 10), iv(2, kindSemaphore, "s", 5, 15), iv(3, kindSemaphore, "t", 6, 20)}, 0},
		{"third of another kind", []Record{iv(1, kindSemaphore, "s", 0, 10), iv(2, kindSemaphore, "s", 5, 15), iv(3, kindWrite, "s", 6, 20)}, 0},
		{"three of two", []Record{iv(1, kindSemaphore, "s", 0, 10), iv(2, kindSemaphore, "s", 5, 15), iv(3, kindSemaphore, "s", 9, 20)}, 1},
		{"four of two", []Record{iv(1, kindSemaphore, "s", 0, 10), iv(2, kindSemaphore, "s", 1, 15), iv(3, kindSemaphore, "s", 2, 20), iv(4, kindSemaphore, "s", 3, 4)}, 2},
	} {
		if n, ex := Excess(tc.recs, 2); n != tc.want {
			t.Errorf("%s: %d excess %v, want %d", tc.name, n, ex, tc.want)
		}
	}
}

func TestReentrantConflicts(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs []Record
		want int
	}{
		{"entries of one hold", []Record{entry(1, "h1", 0, 10), entry(1, "h1", 2, 20), entry(1, "h1", 3, 5)}, 0},
		{"next hold after the last entry", []Record{entry(1, "h1", 0, 10), entry(1, "h1", 2, 20), entry(2, "h2", 20, 30)}, 0},
		{"same client, holds in turn", []Record{entry(1, "h1", 0, 10), entry(1, "h2", 10, 30)}, 0},
		{"second hold beside an inner entry", []Record{entry(1, "h1", 0, 10), entry(1, "h1", 2, 20), entry(2, "h2", 15, 30)}, 1},
		{"second hold of the same client", []Record{entry(1, "h1", 0, 10), entry(1, "h2", 5, 30)}, 1},
	} {
		if n, ex := ReentrantConflicts(tc.recs); n != tc.want {
			t.Errorf("%s: %d conflicts %v, want %d", tc.name, n, ex, tc.want)
		}
	}
}

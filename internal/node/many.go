package node

import (
	"context"
	_ "embed"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/redlock-go/redlock/transport"
)

var (
	//go:embed extend_many.lua
	extendManyBody  string
	extendManySrc   = typedLib + extendManyBody
	extendManyGrant = grantOf(extendManySrc)
)

// ManyPerScript is how many locks one ExtendMany script call covers; a
// batch of more goes as several script calls in one pipeline (one round
// trip). It bounds how long one call blocks the node (Redis runs a script
// to its end): about a millisecond for 256 single-key locks.
const ManyPerScript = 256

// Renewal is one lock of an ExtendMany batch.
type Renewal struct {
	Keys  []string
	Owner string
	TTL   time.Duration
}

// ExtendMany runs Extend for every lock of rs in one round trip: one
// pipeline of script calls of up to ManyPerScript locks each (on a cluster
// client, each call covers locks of one hash slot). It sets ok[j] when the
// node extended rs[j] and errs[j] when rs[j]'s call failed (the outcome is
// unknown there: an extension may have run); ok and errs must have
// len(rs). It returns the first error. Like Do, it returns by ctx's
// deadline.
func (n *Node) ExtendMany(ctx context.Context, rs []Renewal, ok []bool, errs []error) error {
	if !n.deadlineGuard {
		return n.extendMany(ctx, rs, ok, errs)
	}
	ch := make(chan error, 1)
	res, rerrs := make([]bool, len(rs)), make([]error, len(rs)) // the call may outlive ctx: not the caller's slices
	if n.track != nil {
		n.track.Add(1)
	}
	go func() {
		if n.track != nil {
			defer n.track.Done()
		}
		ch <- n.extendMany(ctx, rs, res, rerrs)
	}()
	select {
	case err := <-ch:
		copy(ok, res)
		copy(errs, rerrs)
		return err
	case <-ctx.Done():
		for j := range errs {
			errs[j] = ctx.Err()
		}
		return ctx.Err()
	}
}

// chunk is one script call of a batch: the locks rs[j] for j in idx.
type chunk struct {
	idx  []int
	args []interface{}
	r    transport.Reply
}

func (n *Node) extendMany(ctx context.Context, rs []Renewal, ok []bool, errs []error) error {
	want, _ := n.bound()
	sha, src := extendManyGrant.script.Hash(), extendManySrc
	if want != "" {
		sha, src = extendManyGrant.guarded.script.Hash(), extendManyGrant.guarded.src
	}
	chunks := n.chunks(ctx, rs, want, sha)
	first, derr := n.pipeline(ctx, chunks)
	var again []int // the node lost its scripts (restart, SCRIPT FLUSH): send those as EVAL
	for i, ch := range chunks {
		if err := ch.r.Err; err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			chunks[i].args = n.manyCmd(rs, ch.idx, want, "eval", src)
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		retry := make([]chunk, len(again))
		for k, i := range again {
			retry[k] = chunks[i]
		}
		first, derr = n.pipeline(ctx, retry)
		for k, i := range again {
			chunks[i] = retry[k]
		}
	}
	first = n.process(want, first)
	for _, ch := range chunks {
		err := ch.r.Err
		var res []int64
		if err == nil {
			res, err = toInts(ch.r.Val)
		}
		if err != nil {
			err = n.process(want, err)
		}
		if err == nil && len(res) != len(ch.idx) {
			err = errShortReply
		}
		for x, j := range ch.idx {
			switch {
			case err != nil:
				errs[j] = err
			case res[x] == 1 && derr != nil:
				errs[j] = derr // extended, not confirmed on disk: outcome unknown
			default:
				ok[j] = res[x] == 1
			}
		}
	}
	if first == nil {
		first = derr
	}
	return first
}

var errShortReply = errors.New("redlock: node: script reply shorter than its batch")

// chunks splits rs into script calls of up to ManyPerScript locks; on a
// cluster client, each call covers locks of one hash slot (a script's keys
// must share one).
func (n *Node) chunks(ctx context.Context, rs []Renewal, want, sha string) []chunk {
	order := make([]int, len(rs))
	for j := range order {
		order[j] = j
	}
	slot := func(j int) int { return 0 }
	if n.cluster {
		slots := make([]int, len(rs))
		for j, r := range rs {
			slots[j] = Slot(r.Keys[0])
		}
		slot = func(j int) int { return slots[j] }
		sort.SliceStable(order, func(a, b int) bool { return slots[order[a]] < slots[order[b]] })
	}
	var out []chunk
	for from := 0; from < len(order); {
		to := from + 1
		for to < len(order) && to-from < ManyPerScript && slot(order[to]) == slot(order[from]) {
			to++
		}
		idx := order[from:to]
		out = append(out, chunk{idx: idx, args: n.manyCmd(rs, idx, want, "evalsha", sha)})
		from = to
	}
	return out
}

// manyCmd builds the script call for the locks rs[j], j in idx; want, if
// not "", is the run_id of the guarded form's first argument.
func (n *Node) manyCmd(rs []Renewal, idx []int, want, verb, script string) []interface{} {
	nk, ttl := 0, time.Duration(0)
	for _, j := range idx {
		nk += len(rs[j].Keys)
		ttl = max(ttl, rs[j].TTL)
	}
	var g []interface{}
	if p := n.expect.Load(); want != "" && p != nil {
		g = p.guardArgs(ttl, n.aof) // one register entry, the longest TTL's, covers the batch
	}
	args := make([]interface{}, 0, 6+nk+len(g)+3*len(idx))
	if g != nil {
		args = append(args, verb, script, nk+2)
	} else {
		args = append(args, verb, script, nk)
	}
	for _, j := range idx {
		for _, k := range rs[j].Keys {
			args = append(args, k)
		}
	}
	if g != nil {
		args = append(args, TTLRegisterKey, AOFStampKey)
		args = append(args, g...)
	}
	for _, j := range idx {
		args = append(args, len(rs[j].Keys), rs[j].Owner, rs[j].TTL.Milliseconds())
	}
	return args
}

// pipeline sends the chunks' commands in one pipeline (one round trip),
// sets their replies and returns the first error and, on a Durable node,
// WAITAOF's verdict (the pipeline ends with one; it confirms the chunks
// before it).
func (n *Node) pipeline(ctx context.Context, chunks []chunk) (first, durable error) {
	cmds := make([][]interface{}, len(chunks))
	for i, ch := range chunks {
		cmds[i] = ch.args
	}
	rs := make([]transport.Reply, len(chunks))
	if n.aof {
		durable = n.confirmedPipeline(ctx, cmds, rs)
	} else {
		n.conn.Pipeline(ctx, cmds, rs)
	}
	for i := range chunks {
		chunks[i].r = rs[i]
	}
	return firstErr(chunks), durable
}

// firstErr returns the first chunk's error, if any.
func firstErr(chunks []chunk) error {
	for _, ch := range chunks {
		if err := ch.r.Err; err != nil {
			return err
		}
	}
	return nil
}

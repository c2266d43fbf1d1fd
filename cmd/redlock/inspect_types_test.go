package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// inspect shows held typed locks readably: a reentrant hold with its
// entries, a read-write lock's readers and a waiting writer's intent, a
// semaphore's permits grouped under its name; a plain lock as before.
func TestInspectTypedLocks(t *testing.T) {
	urls := nodes(t, 3)
	ctx := context.Background()
	a := typedClient(t, urls, "alpha")
	b := typedClient(t, urls, "beta")
	outer := mustLock(t, a, ctx, "lock:re", redlock.Reentrant())
	mustLock(t, a, redlock.WithLock(ctx, outer), "lock:re", redlock.Reentrant())
	mustLock(t, a, ctx, "lock:rw", redlock.ReadLock())
	mustLock(t, b, ctx, "lock:rw", redlock.ReadLock())
	// A refused writer keeps new readers out for 4 x its backoff max:
	// a minute here, so inspect sees the intent however slow the machine.
	slow := redlock.WithRetryBackoff(time.Millisecond, 15*time.Second)
	if _, err := b.TryLock(ctx, "lock:rw", time.Minute, redlock.WriteLock(), slow); err == nil {
		t.Fatal("a writer got in beside two readers")
	}
	p1 := mustLock(t, a, ctx, "lock:sem", redlock.Permits(3))
	p2 := mustLock(t, b, ctx, "lock:sem", redlock.Permits(3))
	mustLock(t, b, ctx, "lock:plain")
	a.Close() // waits for every node call: what the nodes hold is final
	b.Close()

	code, out, errOut := runCmd(t, "inspect", "lock:*", "--nodes", strings.Join(urls, ","))
	if code != exitOK {
		t.Fatalf("inspect: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		// Lock returns at a quorum: a node whose write timed out on a
		// loaded machine may lack an entry, so "held on 3/3" is not asked.
		"lock:re: reentrant lock, hold of " + a.ID(), "2 entries; held on ", " nodes (quorum yes)", "ENTRY", "TIME LEFT",
		"lock:rw: read-write lock, read mode, 2 readers, a writer waits: new readers kept out for ", "READER",
		"SEMAPHORE", b.ID(), "KEY", "lock:plain",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`\nlock:sem +2/\d`).MatchString(out) {
		t.Errorf("inspect output lacks lock:sem with 2 permits held:\n%s", out)
	}
	if strings.Contains(out, "{lock:sem}:permit:") || strings.Contains(out, "PARTIAL") {
		t.Errorf("permits not grouped, or a held lock flagged:\n%s", out)
	}

	code, out, _ = runCmd(t, "inspect", "--json", "lock:*", "--nodes", strings.Join(urls, ","))
	var reports []KeyReport
	if err := json.Unmarshal([]byte(out), &reports); code != exitOK || err != nil {
		t.Fatalf("inspect --json: exit %d, %v\n%s", code, err, out)
	}
	byKey := map[string]KeyReport{}
	for _, r := range reports {
		byKey[r.Key] = r
	}
	if r := byKey["lock:re"]; r.Kind != "reentrant" || r.Owner != outer.Owner() || len(r.Entries) != 2 || !r.QuorumHeld || r.Entries[0].LeftMs <= 0 {
		t.Errorf("reentrant: %+v", r)
	}
	if r := byKey["lock:rw"]; r.Kind != "rw" || r.Mode != "read" || len(r.Entries) != 2 || r.IntentMs <= 0 || !r.QuorumHeld {
		t.Errorf("rw: %+v", r)
	}
	for _, p := range []*redlock.Lock{p1, p2} {
		if r := byKey[p.Key()]; r.Kind != "semaphore" || r.Semaphore != "lock:sem" || r.Owner != p.Owner() || !r.QuorumHeld {
			t.Errorf("permit %s: %+v", p.Key(), r)
		}
	}
}

// A hash that is not a typed lock is data, shown as before: not a lock.
func TestInspectHashNotALock(t *testing.T) {
	urls := nodes(t, 3)
	for _, u := range urls {
		opt, _ := redis.ParseURL(u)
		rc := redis.NewClient(opt)
		rc.HSet(context.Background(), "lock:data", "field", "1")
		rc.Close()
	}
	_, out, _ := runCmd(t, "inspect", "lock:*", "--nodes", strings.Join(urls, ","))
	if !strings.Contains(out, "lock:data") || !strings.Contains(out, "xxx") || strings.Contains(out, "ENTRY") {
		t.Fatalf("a plain hash is not shown as data:\n%s", out)
	}
}

func typedClient(t *testing.T, urls []string, name string) *redlock.Client {
	t.Helper()
	c, err := redlock.NewFromURLs(urls, redlock.WithName(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mustLock(t *testing.T, c *redlock.Client, ctx context.Context, key string, opts ...redlock.LockOption) *redlock.Lock {
	t.Helper()
	l, err := c.Lock(ctx, key, time.Minute, opts...)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return l
}

// A typed lock's entry on fewer nodes than a quorum is a leftover; a key
// with no live entry (a writer's intent outliving its readers) is free.
func TestSummarizeTyped(t *testing.T) {
	absent := NodeHold{TTLms: -2}
	one := NodeHold{Kind: "rw", Mode: "read", TTLms: 900, Entries: map[string]int64{"c/1:a": 900}}
	r := summarizeTyped("k", "rw", []NodeHold{one, absent, absent}, 2)
	if !r.Partial || r.QuorumHeld || r.Held != 1 || len(r.Entries) != 1 || r.Entries[0].Client != "c/1" {
		t.Errorf("an entry on 1 of 3 nodes: %+v", r)
	}
	idle := NodeHold{Kind: "rw", Mode: "read", TTLms: 500, IntentMs: 500, Entries: map[string]int64{}}
	r = summarizeTyped("k", "rw", []NodeHold{idle, idle, idle}, 2)
	if r.Partial || r.QuorumHeld || r.IntentMs != 500 || !strings.Contains(typedState(r), "free, a writer waits") {
		t.Errorf("no live entry: %+v (%s)", r, typedState(r))
	}
	for k, want := range map[string]string{"{sem}:permit:2": "sem/2", "{a}b}:permit:1": "a}b/1", "x:permit:1": "", "{sem}:permit:01": "", "{sem}:permits": ""} {
		sem, i, ok := permitOf(k)
		if got := map[bool]string{true: sem + "/" + strconv.Itoa(i)}[ok]; got != want {
			t.Errorf("permitOf(%q) = %q, want %q", k, got, want)
		}
	}
}

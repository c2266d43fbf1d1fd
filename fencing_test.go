package redlock

import (
	"testing"

	"github.com/redlock-go/redlock/internal/node"
)

func TestFenceKeySharesTheSlot(t *testing.T) {
	for _, k := range []string{"orders:42", "{user1}:lock", "a{b}c", "a{b", "plain"} {
		f := fenceKey(k)
		if node.Slot(f) != node.Slot(k) {
			t.Errorf("fenceKey(%q) = %q: slot %d, key's slot %d", k, f, node.Slot(f), node.Slot(k))
		}
		if f == k {
			t.Errorf("fenceKey(%q) is the key itself", k)
		}
	}
	// A "}" with no hash tag before it cannot be wrapped: New's key check
	// refuses such keys on a cluster with fencing on.
	for _, k := range []string{"x{}y", "a}b"} {
		if node.Slot(fenceKey(k)) == node.Slot(k) {
			t.Errorf("fenceKey(%q) unexpectedly shares the slot: update the cluster key check", k)
		}
	}
	if got := fenceKey("{user1}:lock"); got != "{user1}:lock:fence" {
		t.Errorf("tagged key: %q", got)
	}
	if got := fenceKey("orders:42"); got != "{orders:42}:fence" {
		t.Errorf("untagged key: %q", got)
	}
}

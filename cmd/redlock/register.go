package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/admin"
)

// checkRestartWindow is doctor's check of the restart quarantine's TTL
// registers: how long a restart of each node would keep it out now.
const checkRestartWindow = "restart-window"

// RegisterReport is one node's restart-quarantine TTL register
// (admin.TTLRegisterKey): the TTLs of the locks that may still be held there.
type RegisterReport struct {
	Entries  []RegisterEntry `json:"entries"`
	LegacyMs int64           `json:"legacy_max_ttl_ms,omitempty"` // the raise-only redlock:max-ttl of earlier versions (never expires)
	Error    string          `json:"error,omitempty"`
}

// RegisterEntry is one live entry: a TTL and how long the entry has left.
type RegisterEntry struct {
	TTLms  int64 `json:"ttl_ms"`
	LeftMs int64 `json:"left_ms"`
}

// readRegisterReport reads node c's TTL register within doctor's call timeout.
func readRegisterReport(ctx context.Context, c redis.Cmdable) *RegisterReport {
	cctx, cancel := context.WithTimeout(ctx, doctorCallTimeout)
	defer cancel()
	reg, err := admin.ReadRegister(cctx, c)
	if err != nil {
		return &RegisterReport{Error: explain(err)}
	}
	r := &RegisterReport{Entries: []RegisterEntry{}, LegacyMs: reg.Legacy.Milliseconds()}
	for _, e := range reg.Entries {
		r.Entries = append(r.Entries, RegisterEntry{TTLms: e.TTL.Milliseconds(), LeftMs: e.Left.Milliseconds()})
	}
	return r
}

// String lists the entries: "400ms (1.2s left), 5s (9s left)".
func (r *RegisterReport) String() string {
	if r == nil || r.Error != "" {
		return "unreadable"
	}
	var parts []string
	for _, e := range r.Entries {
		parts = append(parts, fmt.Sprintf("%v (%v left)", time.Duration(e.TTLms)*time.Millisecond, time.Duration(e.LeftMs)*time.Millisecond))
	}
	if r.LegacyMs > 0 {
		parts = append(parts, fmt.Sprintf("legacy %s %v (never expires)", admin.LegacyMaxTTLKey, time.Duration(r.LegacyMs)*time.Millisecond))
	}
	if len(parts) == 0 {
		return "empty"
	}
	return strings.Join(parts, ", ")
}

// restartWindowCheck says how long node i would stay out if it restarted
// empty now, by the library's rule: with N - N/2 other nodes' registers
// readable, the longest TTL among their live entries, each capped by its
// entry's time left (bound: register); otherwise the Clients' deployment
// setting (bound: setting). A legacy register is a warning: it never
// expires.
func restartWindowCheck(nodes []NodeReport, i int) Check {
	read, window := 0, time.Duration(0)
	legacy := false
	for j, m := range nodes {
		if j == i || m.Register == nil || m.Register.Error != "" {
			continue
		}
		read++
		for _, e := range m.Register.Entries {
			window = max(window, time.Duration(min(e.TTLms, e.LeftMs))*time.Millisecond)
		}
		if m.Register.LegacyMs > 0 {
			legacy = true
			window = max(window, time.Duration(m.Register.LegacyMs)*time.Millisecond)
		}
	}
	own := "TTL register here: " + nodes[i].Register.String()
	if need := len(nodes) - len(nodes)/2; read < need {
		return Check{checkRestartWindow, verdictWarn, fmt.Sprintf("%s; only %d other registers readable (need %d): a restart would keep this node out for the deployment setting (bound: setting)", own, read, need)}
	}
	msg := fmt.Sprintf("%s; a restart now would keep this node out for at most %v (bound: register)", own, window)
	if legacy {
		return Check{checkRestartWindow, verdictWarn, msg + "; the legacy " + admin.LegacyMaxTTLKey + " never expires: delete it once every client is upgraded"}
	}
	return Check{checkRestartWindow, verdictOK, msg}
}

// printRegisters prints each node's TTL register under inspect's report.
func printRegisters(ctx context.Context, out io.Writer, clients []*redis.Client, urls []string) {
	fmt.Fprintln(out, "\nrestart quarantine TTL registers ("+admin.TTLRegisterKey+"):")
	for i, c := range clients {
		if c == nil { // not reached (see inspect's warning)
			fmt.Fprintf(out, "  %s: ?\n", urls[i])
			continue
		}
		fmt.Fprintf(out, "  %s: %s\n", urls[i], readRegisterReport(ctx, c))
	}
}

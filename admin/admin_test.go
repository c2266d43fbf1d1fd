package admin_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/admin"
)

func TestParseURL(t *testing.T) {
	o, err := admin.ParseURL("redis://ops:s3cret@10.0.0.7:7001/2")
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "10.0.0.7:7001" || o.Username != "ops" || o.Password != "s3cret" || o.DB != 2 {
		t.Fatalf("options %+v", o)
	}
	if o.Network != "tcp" {
		t.Fatalf("network %q", o.Network)
	}
	u, err := admin.ParseURL("unix:///run/redis.sock")
	if err != nil || u.Network != "unix" || u.Addr != "/run/redis.sock" {
		t.Fatalf("unix: %+v %v", u, err)
	}
}

// Every refusal is a *URLError matching ErrInvalidArgument, names what is
// wrong and never shows the password.
func TestParseURLRefuses(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redis://:pw-1@/", "no host"},
		{"redis://u:pw-2@host:0", "port 0 is not in 1-65535"},
		{"redis://u:pw-3@host:70000", "port 70000"},
		{"http://u:pw-4@host:6379", `scheme "http"`},
		{"unix://u:pw-5@", "no socket path"},
		{"redis://u:pw-6@host:6379/?password=pw-6&db=x", "db"},
		{"redis://u:pw-7@host:6379/%zz", "invalid URL escape"},
		{"not a url", "scheme"},
	} {
		o, err := admin.ParseURL(tc.url)
		if err == nil {
			t.Errorf("%s: accepted (%+v)", tc.url, o)
			continue
		}
		var ue *admin.URLError
		if !errors.As(err, &ue) || !errors.Is(err, redlock.ErrInvalidArgument) {
			t.Errorf("%s: %T %v, want a *URLError matching ErrInvalidArgument", tc.url, err, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "redlock: bad node URL ") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q, want it to name %q", tc.url, msg, tc.want)
		}
		if strings.Contains(msg, "pw-") || (ue != nil && strings.Contains(ue.URL, "pw-")) {
			t.Errorf("%s: password shown: %q (URL %q)", tc.url, msg, ue.URL)
		}
	}
}

func TestMaskURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:pw@h:1":              "redis://u:xxxxx@h:1",
		"redis://h:1/?password=pw&db=1": "redis://h:1/?db=1&password=xxxxx",
		"redis://h:1":                   "redis://h:1",
		"redis://u:pw@h:1/%zz":          "redis://u:xxxxx@h:1/%zz",
		":pw@host:6379":                 "(unparsable URL)",
	} {
		if got := admin.MaskURL(in); got != want {
			t.Errorf("MaskURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIsRegisterKey(t *testing.T) {
	for k, want := range map[string]bool{
		admin.TTLRegisterKey:  true,
		admin.LegacyMaxTTLKey: true,
		"{redlock:ttl}:aof":   true,
		"redlock:ttl:x":       false,
		"lock:a":              false,
	} {
		if got := admin.IsRegisterKey(k); got != want {
			t.Errorf("IsRegisterKey(%q) = %v", k, got)
		}
	}
	if admin.TTLRegisterKey != "redlock:ttl" || admin.LegacyMaxTTLKey != "redlock:max-ttl" {
		t.Fatalf("register keys renamed: %q %q (nodes written by earlier releases keep the old names)", admin.TTLRegisterKey, admin.LegacyMaxTTLKey)
	}
}

func TestReadRegisterNilClient(t *testing.T) {
	if _, err := admin.ReadRegister(context.Background(), nil); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("nil client: %v, want ErrInvalidArgument", err)
	}
}

func TestInfoFields(t *testing.T) {
	m := admin.InfoFields("# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\n\r\n# Persistence\r\naof_enabled:1\r\nnot a field\r\nrun_id:def\r\n")
	want := map[string]string{"redis_version": "7.0.15", "run_id": "def", "aof_enabled": "1"}
	if len(m) != len(want) {
		t.Fatalf("fields %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
}

// samples returns n samples 100ms apart on the client's clock, of a node
// whose clock runs at rate against it, each with round trip rtt, the
// node reading its clock at the middle of it.
func samples(n int, rate float64, rtt time.Duration) []admin.ClockSample {
	base := time.Unix(1_700_000_000, 0)
	var ss []admin.ClockSample
	for i := 0; i < n; i++ {
		sent := time.Duration(i) * 100 * time.Millisecond
		mid := sent + rtt/2
		ss = append(ss, admin.ClockSample{Client: sent, Node: base.Add(time.Duration(rate * float64(mid))), RTT: rtt})
	}
	return ss
}

func TestEstimateDriftRate(t *testing.T) {
	for _, rate := range []float64{1, 1.002, 0.995} {
		est, err := admin.EstimateDrift(samples(21, rate, 200*time.Microsecond))
		if err != nil {
			t.Fatal(err)
		}
		wantErr := 1 - 1/rate
		if !est.Known || math.Abs(est.Rate-rate) > 1e-5 || math.Abs(est.Error-wantErr) > 1e-5 {
			t.Errorf("rate %v: %+v, want Rate %v Error %v", rate, est, rate, wantErr)
		}
		// The bound comes from the RTTs: 200µs over a ~1s baseline is a
		// few hundred ppm, and it holds the truth.
		if est.Bound <= 0 || est.Bound > 1e-3 || math.Abs(est.Error-wantErr) > est.Bound {
			t.Errorf("rate %v: bound %v", rate, est.Bound)
		}
		if est.Samples != 21 || est.Jumps != 0 {
			t.Errorf("rate %v: %d samples, %d jumps", rate, est.Samples, est.Jumps)
		}
	}
}

// A forward step of the node's clock is a jump: the estimate restarts at
// the sample that showed it.
func TestEstimateDriftJump(t *testing.T) {
	ss := samples(20, 1, 100*time.Microsecond)
	for i := 12; i < len(ss); i++ {
		ss[i].Node = ss[i].Node.Add(250 * time.Millisecond)
	}
	est, err := admin.EstimateDrift(ss)
	if err != nil {
		t.Fatal(err)
	}
	if est.Jumps != 1 || est.LastJump < 249*time.Millisecond || est.LastJump > 251*time.Millisecond || est.Samples != 8 {
		t.Fatalf("%+v, want one jump of 250ms and the 8 samples since", est)
	}
	if !est.Known || math.Abs(est.Error) > est.Bound {
		t.Fatalf("%+v, want the rate (1) known again from the samples after the jump", est)
	}
}

func TestEstimateDriftUnknown(t *testing.T) {
	for _, ss := range [][]admin.ClockSample{nil, samples(1, 1, 0), {{Client: 0, RTT: time.Second}, {Client: time.Millisecond, RTT: time.Second}}} {
		est, err := admin.EstimateDrift(ss)
		if err != nil {
			t.Fatal(err)
		}
		if est.Known || !math.IsInf(est.Bound, 1) || est.Rate != 1 || est.Error != 0 {
			t.Errorf("%d samples: %+v, want an unknown estimate", len(ss), est)
		}
	}
}

func TestEstimateDriftRefuses(t *testing.T) {
	back := samples(5, 1, time.Millisecond)
	back[3].Client = back[2].Client
	neg := samples(5, 1, time.Millisecond)
	neg[4].RTT = -time.Microsecond
	for name, ss := range map[string][]admin.ClockSample{"out of order": back, "negative RTT": neg} {
		if _, err := admin.EstimateDrift(ss); !errors.Is(err, redlock.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

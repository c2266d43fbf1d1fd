package chaos

import (
	"context"
	"testing"
)

// runHelper accepts a helper that won no lock only if its calls reached
// the nodes; a helper that printed no summary or reached nothing fails.
func TestRunHelperRequiresParticipation(t *testing.T) {
	for _, tc := range []struct {
		out string
		ok  bool
	}{
		{``, false},
		{`{"done":true,"answered":0}`, false},
		{`{"done":true,"answered":3}`, true},
		{`{"c":1,"k":"a","call":1,"acq":2,"relcall":3,"relret":4,"valid":5}
{"done":true,"answered":1}`, true},
	} {
		recs, err := runHelper(context.Background(), []string{"sh", "-c", "printf '%s\\n' '" + tc.out + "'"}, Spec{})
		if (err == nil) != tc.ok {
			t.Errorf("helper printing %q: records %d, err %v; want ok=%v", tc.out, len(recs), err, tc.ok)
		}
	}
}

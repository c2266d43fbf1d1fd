package redlock

import (
	"encoding/base64"
	"testing"
)

// An owner value this library writes is told from go-redsync's (base64 of
// 16 random bytes) and from other strings; a value of another library
// counts as foreign even if it has a colon.
func TestOwnFormat(t *testing.T) {
	for _, name := range []string{"", "billing"} {
		id, err := instanceID(name)
		if err != nil {
			t.Fatal(err)
		}
		c := &Client{prefix: id + ":"}
		v, err := c.newOwner()
		if err != nil {
			t.Fatal(err)
		}
		if !ownFormat(v) {
			t.Errorf("ownFormat(%q) = false for this library's value", v)
		}
	}
	for _, v := range []string{
		base64.StdEncoding.EncodeToString(make([]byte, 16)), // go-redsync
		"", "1", "host:1234", "a:AAAAAAAAAAAAAAAAAAAAAA",
		"0123456789abcdef0123456789abcdef0123:AAAAAAAAAAAAAAAAAAAAAA",  // no dashes
		"01234567-89ab-cdef-0123-456789ABCDEF:AAAAAAAAAAAAAAAAAAAAAA",  // upper case
		"01234567-89ab-cdef-0123-456789abcdef:AAAAAAAAAAAAAAAAAAAAAAA", // 23 bytes
	} {
		if ownFormat(v) {
			t.Errorf("ownFormat(%q) = true, want foreign", v)
		}
	}
}

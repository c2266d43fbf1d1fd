package admin_test

import (
	"errors"
	"fmt"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/admin"
)

// A tool parses each node URL before it dials anything, and prints only
// the masked form.
func ExampleParseURL() {
	for _, u := range []string{"redis://ops:s3cret@10.0.0.7:7001/0", "redis://ops:s3cret@:7001"} {
		o, err := admin.ParseURL(u)
		if errors.Is(err, redlock.ErrInvalidArgument) {
			fmt.Println(err)
			continue
		}
		fmt.Println(admin.MaskURL(u), "->", o.Addr)
	}
	// Output:
	// redis://ops:xxxxx@10.0.0.7:7001/0 -> 10.0.0.7:7001
	// redlock: bad node URL redis://ops:xxxxx@:7001: no host
}

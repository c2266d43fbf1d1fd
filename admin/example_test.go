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

// An owner value found on a node (redlock inspect) names the Client that
// wrote it, and so the process whose logs carry that id.
func ExampleSplitOwner() {
	client, attempt := admin.SplitOwner("pod-7/6f1c2e6a-0d4b-4a57-9e0b-3b1f6c1d2e3f:3q2-7wE9TcS0Xb1mM5yKJA")
	fmt.Println(client)
	fmt.Println(attempt)
	// Output:
	// pod-7/6f1c2e6a-0d4b-4a57-9e0b-3b1f6c1d2e3f
	// 3q2-7wE9TcS0Xb1mM5yKJA
}

func ExampleFenceKey() {
	fmt.Println(admin.FenceKey("stock:sku-42"))
	fmt.Println(admin.FenceKey("{user:7}:cart"))
	// Output:
	// {stock:sku-42}:fence
	// {user:7}:cart:fence
}

func ExamplePermitKey() {
	fmt.Println(admin.PermitKey("settlement", 0))
	fmt.Println(admin.PermitKey("settlement", 2))
	// Output:
	// {settlement}:permit:0
	// {settlement}:permit:2
}

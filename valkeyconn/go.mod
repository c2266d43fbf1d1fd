module github.com/redlock-go/redlock/valkeyconn

go 1.26.0

require (
	github.com/redlock-go/redlock v0.1.0
	github.com/valkey-io/valkey-go v1.0.80
)

require golang.org/x/sys v0.50.0 // indirect

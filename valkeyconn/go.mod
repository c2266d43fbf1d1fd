module github.com/redlock-go/redlock/valkeyconn

go 1.26.0

require (
	github.com/valkey-io/valkey-go v1.0.80
	github.com/redlock-go/redlock v0.1.0
)

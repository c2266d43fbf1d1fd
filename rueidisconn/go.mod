module github.com/redlock-go/redlock/rueidisconn

go 1.26.0

require (
	github.com/redis/rueidis v1.0.80
	github.com/redlock-go/redlock v0.1.0
)

require golang.org/x/sys v0.50.0 // indirect

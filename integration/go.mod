module github.com/redlock-go/redlock/integration

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/redis/go-redis/v9 v9.14.0
	github.com/redlock-go/redlock v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	golang.org/x/sync v0.10.0 // indirect
)

replace github.com/redlock-go/redlock => ../

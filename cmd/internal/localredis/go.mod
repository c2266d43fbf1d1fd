module github.com/redlock-go/redlock/cmd/internal/localredis

go 1.22

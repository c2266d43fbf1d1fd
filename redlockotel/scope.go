package redlockotel

import (
	"net"
	"runtime/debug"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
)

// Server attribute keys of the OpenTelemetry semantic conventions: a
// node's host (or socket path) and port.
const (
	KeyServerAddress = attribute.Key("server.address")
	KeyServerPort    = attribute.Key("server.port")
)

// appendServer appends server.address and server.port of a node address
// ("host:port"; an address that does not split, such as a unix socket
// path, is server.address alone).
func appendServer(kv []attribute.KeyValue, addr string) []attribute.KeyValue {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return append(kv, KeyServerAddress.String(addr))
	}
	kv = append(kv, KeyServerAddress.String(host))
	if p, err := strconv.Atoi(port); err == nil {
		kv = append(kv, KeyServerPort.Int(p))
	}
	return kv
}

// releaseVersion is the release this source belongs to: the scope's
// version when the binary's build information does not name the module's
// (a workspace build, or a binary without build information). Raise it
// with each release.
const releaseVersion = "v0.1.0"

// scopeVersion is the version of this module in the running binary, the
// instrumentation scope's version of the meter and the tracer: what the
// build information says (a release, a pseudo-version, "(devel)" for the
// module's own tests), else releaseVersion.
func scopeVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == ScopeName && bi.Main.Version != "" {
			return bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path != ScopeName {
				continue
			}
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			if d.Version != "" {
				return d.Version
			}
		}
	}
	return releaseVersion
}

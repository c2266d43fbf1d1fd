package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"
)

// libraryPath is the module whose version the version line reports beside
// the command's own: the lock behaviour comes from it.
const libraryPath = "github.com/redlock-go/redlock"

// versionCmd prints the version line of this binary; it has no flags.
func versionCmd(*flag.FlagSet) runner {
	return func(_ []string, stdout, _ io.Writer) error {
		info, ok := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, versionLine(info, ok))
		return nil
	}
}

// versionLine reads a build's module versions: the command's (from go
// install ...@v0.1.0: v0.1.0; from a checkout: "(devel)" or a VCS-stamped
// pseudo-version), the library's when it came from the module cache rather
// than this checkout, and the Go toolchain's. Without build info (a binary
// built outside module mode) the versions read "unknown".
func versionLine(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "redlock unknown (no build info)"
	}
	line := "redlock " + orDevel(info.Main.Version)
	for _, d := range info.Deps {
		if d.Path != libraryPath {
			continue
		}
		if d.Replace != nil {
			d = d.Replace
		}
		line += ", library " + orDevel(d.Version)
	}
	return line + ", " + info.GoVersion
}

// orDevel names the version of a module built from a directory, which the
// go command leaves empty or "(devel)".
func orDevel(v string) string {
	if v == "" {
		return "(devel)"
	}
	return v
}

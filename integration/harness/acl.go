package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// READMEACLLines returns the "ACL SETUSER <user> ..." lines of the
// repository's README.md (readme, its path), in order: the users the
// README tells operators to create, tested exactly as written.
func READMEACLLines(readme, user string) ([]string, error) {
	b, err := os.ReadFile(readme)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "ACL SETUSER "+user+" ") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s has no ACL SETUSER %s line", readme, user)
	}
	return lines, nil
}

// ACLFile writes, in dir, an ACL file (redis-server --aclfile) with the
// default user unrestricted and each ACL SETUSER line of lines as a user:
// users that survive a restart, as an operator's do.
func ACLFile(dir string, lines ...string) (string, error) {
	var b strings.Builder
	b.WriteString("user default on nopass ~* &* +@all\n")
	for _, l := range lines {
		rest, ok := strings.CutPrefix(l, "ACL SETUSER ")
		if !ok {
			return "", fmt.Errorf("not an ACL SETUSER line: %q", l)
		}
		b.WriteString("user " + rest + "\n")
	}
	path := filepath.Join(dir, "users.acl")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

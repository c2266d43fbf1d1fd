package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DocACLLines returns the "ACL SETUSER <user> ..." lines of a
// documentation page (page, its path; the lock's users are in
// docs/deployment.md), in order: the users the documentation tells
// operators to create, tested exactly as written.
func DocACLLines(page, user string) ([]string, error) {
	b, err := os.ReadFile(page)
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
		return nil, fmt.Errorf("%s has no ACL SETUSER %s line", page, user)
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

package redlock

import (
	"unicode"

	"github.com/google/uuid"
	"github.com/redlock-go/redlock/internal/spec"
)

// maxNameLen bounds WithName: the name is stored in every owner value.
const maxNameLen = 64

// instanceID makes a Client's id: name/UUID, or the UUID alone.
func instanceID(name string) (string, error) {
	u, err := uuid.NewRandom()
	if err != nil {
		return "", err
	}
	if name == "" {
		return u.String(), nil
	}
	return name + "/" + u.String(), nil
}

func checkName(name string) error {
	if len(name) > maxNameLen {
		return invalid("name %q is longer than %d bytes", name, maxNameLen)
	}
	for _, r := range name {
		if r == ':' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return invalid("name %q: only printable characters, no spaces or colons", name)
		}
	}
	return nil
}

// splitOwner splits an owner value found on a node into the instance id
// of the Client that wrote it and the attempt's random part
// (admin.SplitOwner).
func splitOwner(v string) (client, attempt string) { return spec.SplitOwner(v) }

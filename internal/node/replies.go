package node

import (
	"errors"
	"fmt"
	"strconv"
)

// The readers of transport replies (see package transport for their Go
// types).

var errNilReply = errors.New("redlock: node: nil reply")

// toInt reads an integer reply (a string of digits too).
func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	case nil:
		return 0, errNilReply
	}
	return 0, fmt.Errorf("redlock: node: unexpected reply %T, want an integer", v)
}

// toInts reads an array of integers.
func toInts(v any) ([]int64, error) {
	a, ok := v.([]any)
	if !ok {
		if v == nil {
			return nil, errNilReply
		}
		return nil, fmt.Errorf("redlock: node: unexpected reply %T, want an array", v)
	}
	out := make([]int64, len(a))
	for i, e := range a {
		n, err := toInt(e)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// toStr reads a string reply.
func toStr(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case nil:
		return "", errNilReply
	}
	return "", fmt.Errorf("redlock: node: unexpected reply %T, want a string", v)
}

// toStrMap reads a map reply: field/value pairs, as a flat array (RESP2)
// or a map (RESP3).
func toStrMap(v any) (map[string]string, error) {
	m := map[string]string{}
	switch x := v.(type) {
	case []any:
		for i := 0; i+1 < len(x); i += 2 {
			k, _ := x[i].(string)
			m[k], _ = x[i+1].(string)
		}
	case map[string]any:
		for k, e := range x {
			m[k], _ = e.(string)
		}
	default:
		return nil, fmt.Errorf("redlock: node: unexpected reply %T, want a map", v)
	}
	return m, nil
}

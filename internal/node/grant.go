package node

import (
	"time"
)

// grantScript is a script that may grant or lengthen a lock: declaring one
// declares its guarded form too (see guard.go), so that no grant can go
// out unguarded to a bound node.
type grantScript struct {
	script  *script
	src     string
	guarded *guardedScript
}

func grantOf(src string) grantScript {
	return grantScript{script: newScript(src), src: src, guarded: guardScript(src)}
}

// cmd is a call of the script on keys that may grant ttl; want is as in
// scriptCmd.
func (g grantScript) cmd(keys []string, want int64, ttl time.Duration, argv ...interface{}) *Cmd {
	c := scriptCmd(g.script, g.src, keys, want, argv...)
	c.g, c.ttl = g.guarded, ttl
	return c
}

package node

import (
	_ "embed"
	"time"
)

var (
	//go:embed fair_ticket.lua
	fairTicketSrc string
	//go:embed fair_lock.lua
	fairLockSrc string
	//go:embed fair_leave.lua
	fairLeaveSrc string

	fairTicketScript = newScript(fairTicketSrc)
	fairLeaveScript  = newScript(fairLeaveSrc)
	fairLockGrant    = grantOf(fairLockSrc)
)

// FairKeys are the keys of one fair lock on a node: the lock itself (a
// plain lock), its queue, its places' expiries and its ticket register.
type FairKeys struct{ Lock, Queue, Places, Ticket string }

// Waiter is a fair lock's waiter: its id and ticket.
type Waiter struct {
	ID     string
	Ticket int64
}

// FairTicket takes the next ticket from the register (fair_ticket.lua),
// which stays at least keep; the node's yes carries it.
func FairTicket(k FairKeys, keep time.Duration) *Cmd {
	c := scriptCmd(fairTicketScript, fairTicketSrc, []string{k.Ticket}, 1, keep.Milliseconds())
	c.valued = true
	return c
}

// FairLock acquires the fair lock for value with ttl if ws[0] is the head
// of the node's queue (fair_lock.lua); every waiter of ws is queued (if
// missing) and keeps its place for place. With no waiters it is granted
// only if nobody waits.
func FairLock(k FairKeys, value string, ttl, place time.Duration, ws []Waiter) *Cmd {
	argv := make([]interface{}, 0, 3+2*len(ws))
	argv = append(argv, value, ttl.Milliseconds(), place.Milliseconds())
	for _, w := range ws {
		argv = append(argv, w.ID, w.Ticket)
	}
	return fairLockGrant.cmd([]string{k.Lock, k.Queue, k.Places, k.Ticket}, 1, ttl, argv...)
}

// FairLeave takes waiter id out of the node's queue.
func FairLeave(k FairKeys, id string) *Cmd {
	c := scriptCmd(fairLeaveScript, fairLeaveSrc, []string{k.Queue, k.Places}, 1, id)
	c.grants = false
	return c
}

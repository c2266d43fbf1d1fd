// Package admin is what an operator's tool needs to look at the nodes of
// a redlock deployment without holding a Client: parsing and masking node
// URLs as NewFromURLs does, reading a node's restart-quarantine TTL
// register, parsing INFO, and estimating a node's clock drift from timed
// TIME samples as the drift monitor (WithDrift) does; and what a Client
// assumes and leaves on the nodes: its default node timeout and drift
// factor, the drift budget, the fence and fair-queue margins, the keys of
// fence registers and semaphore permits, and owner values (SplitOwner).
// The redlock command is built on it; it is public so that the command
// needs nothing under internal/, and it is kept small on purpose.
//
// Every function here is safe for concurrent use: they keep no state
// between calls. Bad input is refused with an error that matches
// redlock.ErrInvalidArgument (errors.Is), before any network traffic.
// Errors and output never show a URL's password.
package admin

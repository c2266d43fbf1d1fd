package harness

// Up starts a node again after Kill, on the same port and data directory
// (a delayed restart). Without Persist it has forgotten every key.
func (n *Node) Up() error { return n.start() }

// Persistent reports whether the node runs with appendfsync always.
func (n *Node) Persistent() bool { return n.cfg.Persist }

package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// Cluster is a Redis Cluster of masters only (no replicas), each serving
// an equal share of the hash slots. It counts as one independent node of
// a Redlock.
type Cluster struct {
	Masters []*Server
	// First[i] and Last[i] are the slot range of Masters[i].
	First, Last []int
}

// StartCluster starts n cluster-enabled redis-server processes, gives each
// a contiguous slot range (CLUSTER ADDSLOTSRANGE), joins them (CLUSTER
// MEET) and waits until every one reports cluster_state:ok and knows all
// the others. The processes are stopped when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	cl := &Cluster{}
	for i := 0; i < n; i++ {
		s := startServerT(t, serverSpec{ports: 2, args: func(dir string, p []int) ([]string, error) {
			return append(baseArgs(dir), "--port", strconv.Itoa(p[0]),
				"--cluster-enabled", "yes",
				"--cluster-port", strconv.Itoa(p[1]),
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				// Failure detection only; long, so a loaded machine
				// does not mark a node failed.
				"--cluster-node-timeout", "60000",
			), nil
		}})
		cl.Masters = append(cl.Masters, s)
		cl.First = append(cl.First, i*clusterSlots/n)
		cl.Last = append(cl.Last, (i+1)*clusterSlots/n-1)
	}
	ctx := context.Background()
	admin := make([]*redis.Client, n)
	for i, s := range cl.Masters {
		admin[i] = s.Client()
		defer admin[i].Close()
		if err := admin[i].ClusterAddSlotsRange(ctx, cl.First[i], cl.Last[i]).Err(); err != nil {
			t.Fatalf("harness: CLUSTER ADDSLOTSRANGE on %s: %v", s.Addr, err)
		}
	}
	for _, s := range cl.Masters[1:] {
		// CLUSTER MEET ip port cluster-bus-port
		err := admin[0].Do(ctx, "cluster", "meet", "127.0.0.1", s.Port, s.Ports[1]).Err()
		if err != nil {
			t.Fatalf("harness: CLUSTER MEET %s: %v", s.Addr, err)
		}
	}
	for i, s := range cl.Masters {
		err := waitFor("cluster node "+s.Addr, func(ctx context.Context) error {
			info, err := admin[i].ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			want := []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_known_nodes:" + strconv.Itoa(n)}
			for _, w := range want {
				if !strings.Contains(info, w+"\r\n") {
					return fmt.Errorf("CLUSTER INFO has no %q:\n%s", w, info)
				}
			}
			slots, err := admin[i].ClusterSlots(ctx).Result()
			if err != nil {
				return err
			}
			if len(slots) != n {
				return fmt.Errorf("CLUSTER SLOTS lists %d ranges, want %d", len(slots), n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

// Addrs returns the masters' addresses.
func (cl *Cluster) Addrs() []string {
	a := make([]string, len(cl.Masters))
	for i, s := range cl.Masters {
		a[i] = s.Addr
	}
	return a
}

// Client returns a go-redis cluster client with ctx deadlines enabled. The
// caller closes it.
func (cl *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
}

// MasterOf returns the master that serves slot.
func (cl *Cluster) MasterOf(slot int) *Server {
	for i, s := range cl.Masters {
		if cl.First[i] <= slot && slot <= cl.Last[i] {
			return s
		}
	}
	return nil
}

// Package leadership fences the operator's writes to the time its leader
// lease is known to be held. It knows nothing of what is written: the
// manager's client asks it before each write.
//
// Leader election alone does not stop a replica that was frozen (SIGSTOP, a
// long GC pause, a throttled CPU, a suspended VM) while it led: when it
// thaws, its workers run on before its elector notices that another replica
// took the lease, and each of their writes races the new leader's. The
// fence closes that window: a replica writes only while its last renewal of
// the lease, timed from when the renewal was sent, is younger than the renew
// deadline. Another candidate may take the lease only a full lease duration
// after it saw that renewal, so a write that passes the fence is sent while
// no one else can be leading.
package leadership

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// ErrNotHeld is returned, wrapped, by a fenced write while the lease is not
// known to be held.
var ErrNotHeld = errors.New("the leader lease is not known to be held")

// Lease wraps the resource lock of leader election and remembers when this
// replica last acquired or renewed it.
type Lease struct {
	resourcelock.Interface

	// hold is how long after a renewal was sent writes stay allowed: the
	// renew deadline, shorter than the lease duration other candidates wait.
	hold  time.Duration
	clock clock.PassiveClock

	mu        sync.Mutex
	renewedAt time.Time
}

// NewLease wraps lock; writes are allowed for hold after each renewal.
func NewLease(lock resourcelock.Interface, hold time.Duration) *Lease {
	return &Lease{Interface: lock, hold: hold, clock: clock.RealClock{}}
}

// Create acquires the lease when no one has yet.
func (l *Lease) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.record(ler, func() error { return l.Interface.Create(ctx, ler) })
}

// Update acquires, renews or releases the lease.
func (l *Lease) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.record(ler, func() error { return l.Interface.Update(ctx, ler) })
}

// record runs write and, when it succeeds, notes whether this replica now
// holds the lease. The time is taken before the request is sent: the server
// stamps the renewal no earlier, so the hold never outlasts what other
// candidates grant.
func (l *Lease) record(ler resourcelock.LeaderElectionRecord, write func() error) error {
	sent := l.clock.Now()
	if err := write(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ler.HolderIdentity == l.Identity() {
		l.renewedAt = sent
	} else {
		l.renewedAt = time.Time{}
	}
	return nil
}

// Held returns nil while this replica holds the lease, and otherwise an
// error wrapping ErrNotHeld that says since when it is unsure.
func (l *Lease) Held() error {
	l.mu.Lock()
	renewed := l.renewedAt
	l.mu.Unlock()
	if renewed.IsZero() {
		return fmt.Errorf("%w: this replica has not acquired it", ErrNotHeld)
	}
	if age := l.clock.Since(renewed); age >= l.hold {
		return fmt.Errorf("%w: last renewed %s ago, longer than the renew deadline %s", ErrNotHeld, age.Round(time.Millisecond), l.hold)
	}
	return nil
}

// inClusterNamespace is where a pod finds its own namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// NewLock builds the Lease-based lock the manager elects its leader with,
// wrapped so that Held can fence writes. An empty namespace means the pod's
// own. The lock's clients time out at half the renew deadline, so that one
// hung request cannot cost the lease.
func NewLock(cfg *rest.Config, namespace, name string, renewDeadline time.Duration) (*Lease, error) {
	if namespace == "" {
		ns, err := os.ReadFile(inClusterNamespace)
		if err != nil {
			return nil, fmt.Errorf("finding the leader election namespace (set --leader-election-namespace outside a cluster): %w", err)
		}
		namespace = strings.TrimSpace(string(ns))
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("naming this replica: %w", err)
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	cfg.Timeout = max(renewDeadline/2, time.Second)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the leader election client: %w", err)
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the leader election client: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, core, coordination,
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return nil, fmt.Errorf("building the leader election lock: %w", err)
	}
	return NewLease(lock, renewDeadline), nil
}

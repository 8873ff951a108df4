package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// AdmissionCluster is what the admission check reads of the cluster: the
// engine's snapshot, which the feeds keep warm on every replica, leader or
// not, and a workload with what it runs now.
type AdmissionCluster struct{ r *PlacementMigrationReconciler }

// AdmissionCluster gives the admission check the reconciler's view of the
// cluster; SetupWithManager must have run.
func (r *PlacementMigrationReconciler) AdmissionCluster() AdmissionCluster {
	return AdmissionCluster{r: r}
}

// With runs f with the snapshot held still.
func (c AdmissionCluster) With(f func(*placement.Snapshot) error) error {
	return c.r.State.With(f)
}

// Live is obj's workload with the pods and revision the object of its uid
// runs now: none for a create.
func (c AdmissionCluster) Live(ctx context.Context, obj client.Object) (*placement.Workload, error) {
	t, err := c.r.live(ctx, obj)
	if err != nil {
		return nil, err
	}
	return t.Workload, nil
}

// Synced reports whether the feeds have taken in their first list: until
// then the snapshot does not know the cluster, and a replica must not
// judge (readiness waits for it).
func (c AdmissionCluster) Synced() bool { return c.r.Feeds.HasSynced() }

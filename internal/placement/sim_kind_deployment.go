package placement

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A Deployment rolls out through a new ReplicaSet: new pods are created
// beside the old ones (maxSurge) while old ones go (maxUnavailable), or
// all old ones go first under Recreate. Its new revision's pods carry
// pod-template-hash.

func init() { kinds[pgv1.KindDeployment] = deploymentRollouts{} }

type deploymentRollouts struct{}

func (deploymentRollouts) simulate(s *Snapshot, w *Workload, old, leaving []podID) (Rollout, error) {
	return s.simulateDeployment(w, old, leaving)
}

func (deploymentRollouts) rolledPod(_ *Snapshot, w *Workload, name string) (*corev1.Pod, error) {
	return newRevisionPod(w, name), nil
}

func (deploymentRollouts) newRevision() (string, string) {
	return appsv1.DefaultDeploymentUniqueLabelKey, newRevisionHash
}

func (d deploymentRollouts) searchTemplate(s *Snapshot, w *Workload) *corev1.Pod {
	pod, _ := d.rolledPod(s, w, w.Name+"-new")
	return pod
}

func (deploymentRollouts) searched(*Workload) bool { return true }

func (deploymentRollouts) startSearch(x *explorer) error {
	x.recreate = x.w.Strategy.Type == appsv1.RecreateDeploymentStrategyType
	x.maxUnavailable = x.replicas
	if x.recreate {
		return nil
	}
	var err error
	x.maxSurge, x.maxUnavailable, err = SurgeAndUnavailable(x.w.Strategy, x.w.Replicas)
	return err
}

func (deploymentRollouts) search(x *explorer) { x.visitDeployment() }

func (deploymentRollouts) scopesSpreadToRevision() bool { return true }

func (deploymentRollouts) surgeLimits(w *Workload) (int, int, bool, error) {
	if w.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return 0, 0, false, nil
	}
	surge, unavailable, err := SurgeAndUnavailable(w.Strategy, w.Replicas)
	return surge, unavailable, true, err
}

func (deploymentRollouts) replaced() string { return "the old revision's pods" }

func (deploymentRollouts) spreadFix(c Constraint) string {
	if len(c.Spread.MatchLabelKeys) == 0 {
		return "count only the new revision: remove revisionScope: AllRevisions, so that matchLabelKeys: [pod-template-hash] is written"
	}
	return "add pod-template-hash to matchLabelKeys, so that only the new revision is counted"
}

func (deploymentRollouts) overlapFix() string {
	return "set matchLabelKeys: [pod-template-hash] so that only the pods of one revision are counted, or narrow the labelSelector"
}

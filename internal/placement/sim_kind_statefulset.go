package placement

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A StatefulSet replaces each pod in place, from the highest ordinal down
// to its partition, the successor keeping the name and the claims; under
// OnDelete its controller replaces nothing. Its pods below a partition
// keep the old revision.

func init() { kinds[pgv1.KindStatefulSet] = statefulSetRollouts{} }

type statefulSetRollouts struct{}

func (statefulSetRollouts) simulate(s *Snapshot, w *Workload, old, leaving []podID) (Rollout, error) {
	return s.simulateStatefulSet(w, old, leaving)
}

func (statefulSetRollouts) rolledPod(s *Snapshot, w *Workload, name string) (*corev1.Pod, error) {
	ord, err := strconv.Atoi(strings.TrimPrefix(name, w.Name+"-"))
	if err != nil || !strings.HasPrefix(name, w.Name+"-") {
		return nil, fmt.Errorf("%s: %q is no pod name of the StatefulSet", w.Ref(), name)
	}
	return statefulSetPod(s, w, ord), nil
}

func (statefulSetRollouts) newRevision() (string, string) { return "", "" }

func (statefulSetRollouts) searchTemplate(s *Snapshot, w *Workload) *corev1.Pod {
	return statefulSetPod(s, w, max(int(w.Replicas)-1, 0))
}

func (statefulSetRollouts) searched(w *Workload) bool {
	return w.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType
}

func (statefulSetRollouts) startSearch(x *explorer) error {
	x.highestOrdinal = x.replicas - 1
	if ru := x.w.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		x.partition = int(*ru.Partition)
	}
	return nil
}

func (statefulSetRollouts) search(x *explorer) { x.visitStatefulSet(x.highestOrdinal) }

func (statefulSetRollouts) scopesSpreadToRevision() bool { return false }

func (statefulSetRollouts) surgeLimits(*Workload) (int, int, bool, error) { return 0, 0, false, nil }

func (statefulSetRollouts) replaced() string { return "the pods it replaces" }

func (statefulSetRollouts) spreadFix(Constraint) string { return softSpreadFix }

func (statefulSetRollouts) overlapFix() string { return releaseLabelFix }

package admission

import (
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// Relevant reports whether a change must be judged: it adds or changes a
// required pod anti-affinity term or a DoNotSchedule spread, or changes
// the replicas or the rollout strategy of a workload that carries one.
// Anything else (an image, an annotation, resources) is allowed at once,
// without asking the engine. old is nil for a create.
func Relevant(old, new *placement.Workload) bool {
	hard := planning.HardConstraints(&new.Template.Spec)
	if len(hard) == 0 {
		return false
	}
	if old == nil {
		return true
	}
	if !sameConstraints(planning.HardConstraints(&old.Template.Spec), hard) {
		return true
	}
	return old.Replicas != new.Replicas ||
		!equality.Semantic.DeepEqual(old.Strategy, new.Strategy) ||
		!equality.Semantic.DeepEqual(old.UpdateStrategy, new.UpdateStrategy)
}

func sameConstraints(a, b []placement.Constraint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equality.Semantic.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

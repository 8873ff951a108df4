package planning

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/placement-guard/placement-guard/internal/placement"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A workload's own hard constraints, judged as written (JudgeChange): lint
// asks this of every Deployment and StatefulSet of rendered manifests, and
// the admission check of every change that comes straight to the API
// server.

// HardConstraints are the spec's required anti-affinity terms and
// DoNotSchedule spreads, each as a constraint judged as written: a spread
// counts the revisions its matchLabelKeys say, no more.
func HardConstraints(spec *corev1.PodSpec) []placement.Constraint {
	var out []placement.Constraint
	if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
		for _, t := range spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			entry := &corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{t}}}}
			out = append(out, placement.ConstraintOf(entry))
		}
	}
	for _, t := range spec.TopologySpreadConstraints {
		if t.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		c := placement.ConstraintOf(&corev1.PodSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{t}})
		c.Spread.AllRevisions = true
		out = append(out, c)
	}
	return out
}

// Judge asks the engine q at each stage: the whole analysis when the nodes
// can tell, else the findings that need none.
func Judge(snap *placement.Snapshot, withNodes bool, q placement.Question, stages []pgv1.Stage) ([]placement.Hazard, error) {
	if !withNodes {
		var hs []placement.Hazard
		for _, st := range stages {
			q.Stage = st
			hs = append(hs, snap.Findings(q)...)
		}
		return hs, nil
	}
	answers, err := Ask(snap, q, stages)
	if err != nil {
		return nil, err
	}
	return UniqueHazards(answers), nil
}

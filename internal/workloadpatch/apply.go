// Package workloadpatch writes placement-guard's constraint into workloads
// with server-side apply, owning only the fields it adds: one anti-affinity
// term or one spread constraint. Everything else in the workload, including
// other terms, node affinity and other managers' fields, is left alone, and
// applying an earlier stage (or none) gives back exactly what was there.
//
// It builds apply configurations and reads API answers; it makes no call
// itself, so the reconciler decides when to dry-run and when to apply.
package workloadpatch

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// FieldManager is the server-side apply field manager of every write.
const FieldManager = "placement-guard"

// Target names a workload to patch.
type Target struct {
	Kind      placement.WorkloadKind
	Namespace string
	Name      string
	// Selector is the workload's pod selector, the constraint's default.
	Selector *metav1.LabelSelector
}

// templateFor returns the pod template apply configuration holding only the
// constraint at stage: nothing at all for StageNone, which releases every
// field we owned.
func templateFor(c placement.Constraint, own *metav1.LabelSelector, stage placement.Stage) (*corev1ac.PodTemplateSpecApplyConfiguration, error) {
	if stage == placement.StageNone {
		return nil, nil
	}
	var spec corev1.PodSpec
	ours, err := c.Apply(&spec, own, stage)
	if err != nil {
		return nil, err
	}
	specAC, err := toApplyConfiguration(ours)
	if err != nil {
		return nil, err
	}
	return corev1ac.PodTemplateSpec().WithSpec(specAC), nil
}

// toApplyConfiguration converts the constraint fields of a pod spec; apply
// configurations are the API's JSON shape, so a JSON round trip is exact.
func toApplyConfiguration(spec *corev1.PodSpec) (*corev1ac.PodSpecApplyConfiguration, error) {
	fields := map[string]any{}
	if spec.Affinity != nil {
		fields["affinity"] = spec.Affinity
	}
	if len(spec.TopologySpreadConstraints) > 0 {
		fields["topologySpreadConstraints"] = spec.TopologySpreadConstraints
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("encode constraint: %w", err)
	}
	ac := &corev1ac.PodSpecApplyConfiguration{}
	if err := json.Unmarshal(raw, ac); err != nil {
		return nil, fmt.Errorf("decode constraint as apply configuration: %w", err)
	}
	return ac, nil
}

// Deployment is the apply configuration that puts the constraint at stage
// on a Deployment.
func Deployment(t Target, c placement.Constraint, stage placement.Stage) (*appsv1ac.DeploymentApplyConfiguration, error) {
	tmpl, err := templateFor(c, t.Selector, stage)
	if err != nil {
		return nil, fmt.Errorf("build %s stage for Deployment %s/%s: %w", stage, t.Namespace, t.Name, err)
	}
	ac := appsv1ac.Deployment(t.Name, t.Namespace)
	if tmpl != nil {
		ac.WithSpec(appsv1ac.DeploymentSpec().WithTemplate(tmpl))
	}
	return ac, nil
}

// StatefulSet is the apply configuration that puts the constraint at stage
// on a StatefulSet.
func StatefulSet(t Target, c placement.Constraint, stage placement.Stage) (*appsv1ac.StatefulSetApplyConfiguration, error) {
	tmpl, err := templateFor(c, t.Selector, stage)
	if err != nil {
		return nil, fmt.Errorf("build %s stage for StatefulSet %s/%s: %w", stage, t.Namespace, t.Name, err)
	}
	ac := appsv1ac.StatefulSet(t.Name, t.Namespace)
	if tmpl != nil {
		ac.WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(tmpl))
	}
	return ac, nil
}

// Package targets turns live workloads into the placement engine's
// Workloads: the controller, the pod template it rolls out and the pods it
// owns now, found through owner references as the controllers set them.
package targets

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// FromDeployment builds the Workload of a Deployment. Its pods are those
// whose controller is one of the Deployment's ReplicaSets, of any revision.
func FromDeployment(d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet, pods []*corev1.Pod) *placement.Workload {
	owned := map[types.UID]bool{}
	revision := ""
	for _, rs := range replicaSets {
		if controlledBy(rs.OwnerReferences, d.UID) {
			owned[rs.UID] = true
			if sameTemplate(rs, &d.Spec.Template) {
				revision = rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
			}
		}
	}
	w := &placement.Workload{
		Kind:      placement.Deployment,
		Namespace: d.Namespace,
		Name:      d.Name,
		Replicas:  replicas(d.Spec.Replicas),
		Selector:  d.Spec.Selector,
		Template:  d.Spec.Template,
		Strategy:  d.Spec.Strategy,

		RevisionLabel: appsv1.DefaultDeploymentUniqueLabelKey,
		Revision:      revision,
	}
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref != nil && owned[ref.UID] {
			w.Pods = append(w.Pods, p.UID)
		}
	}
	return w
}

// FromStatefulSet builds the Workload of a StatefulSet.
func FromStatefulSet(s *appsv1.StatefulSet, pods []*corev1.Pod) *placement.Workload {
	w := &placement.Workload{
		Kind:                 placement.StatefulSet,
		Namespace:            s.Namespace,
		Name:                 s.Name,
		Replicas:             replicas(s.Spec.Replicas),
		Selector:             s.Spec.Selector,
		Template:             s.Spec.Template,
		UpdateStrategy:       s.Spec.UpdateStrategy,
		PodManagementPolicy:  s.Spec.PodManagementPolicy,
		VolumeClaimTemplates: s.Spec.VolumeClaimTemplates,
		RevisionLabel:        appsv1.ControllerRevisionHashLabelKey,
		Revision:             s.Status.UpdateRevision,
	}
	for _, p := range pods {
		if controlledBy(p.OwnerReferences, s.UID) {
			w.Pods = append(w.Pods, p.UID)
		}
	}
	return w
}

// replicas applies the API's default of one replica.
func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func controlledBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, ref := range refs {
		if ref.Controller != nil && *ref.Controller && ref.UID == uid {
			return true
		}
	}
	return false
}

// WorkloadOf is the engine's view of a workload object of any kind the
// project migrates, with no pods: a manifest's Deployment or StatefulSet
// as lint reads it. nil for any other object. Each kind's fields are read
// in FromDeployment and FromStatefulSet only, so lint and the operator
// judge the same workload.
func WorkloadOf(obj any) *placement.Workload {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return FromDeployment(o, nil, nil)
	case *appsv1.StatefulSet:
		return FromStatefulSet(o, nil)
	}
	return nil
}

// NewObject is an empty object of a workload kind the project migrates.
func NewObject(kind string) (client.Object, error) {
	switch kind {
	case string(placement.Deployment):
		return &appsv1.Deployment{}, nil
	case string(placement.StatefulSet):
		return &appsv1.StatefulSet{}, nil
	}
	return nil, fmt.Errorf("kind %q is not a workload placement-guard migrates", kind)
}

// NewObjectFor is an empty object of the kind a serialized object names.
func NewObjectFor(raw []byte) (client.Object, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("read the object's kind: %w", err)
	}
	return NewObject(tm.Kind)
}

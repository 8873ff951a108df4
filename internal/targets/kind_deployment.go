package targets

import (
	"time"

	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// deploymentKind is a Deployment: pods through its ReplicaSets, the
// revision in pod-template-hash, a rollout judged as `kubectl rollout
// status` judges it, paused by spec.paused.
var deploymentKind = Kind{
	Name:                  pgv1.KindDeployment,
	Resource:              "deployments",
	ShortName:             "deploy",
	New:                   func() client.Object { return &appsv1.Deployment{} },
	NewList:               func() client.ObjectList { return &appsv1.DeploymentList{} },
	Items:                 func(l client.ObjectList) []client.Object { return items(l.(*appsv1.DeploymentList).Items) },
	NewApplyConfiguration: func() runtime.ApplyConfiguration { return &appsv1ac.DeploymentApplyConfiguration{} },
	is:                    func(obj any) bool { _, ok := obj.(*appsv1.Deployment); return ok },
	workload: func(obj client.Object, replicaSets []*appsv1.ReplicaSet, pods []*corev1.Pod) *placement.Workload {
		return FromDeployment(obj.(*appsv1.Deployment), replicaSets, pods)
	},
	progress: func(t *Target, generation int64) Progress {
		d := t.obj.(*appsv1.Deployment)
		return deploymentProgress(t.String(), d, max(generation, d.Generation))
	},
	template: func(obj client.Object) *corev1.PodTemplateSpec { return &obj.(*appsv1.Deployment).Spec.Template },
	replicas: func(obj client.Object) **int32 { return &obj.(*appsv1.Deployment).Spec.Replicas },
	counts: func(obj client.Object) replicaCounts {
		d := obj.(*appsv1.Deployment)
		return countsFrom(d, d.Spec.Replicas, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ObservedGeneration)
	},
	shortfall:       deploymentShortfall,
	paused:          func(obj client.Object) bool { return obj.(*appsv1.Deployment).Spec.Paused },
	partitioned:     func(client.Object) bool { return false },
	interchangeable: true,
}

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
		Kind:      pgv1.KindDeployment,
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

func deploymentProgress(ref string, d *appsv1.Deployment, generation int64) Progress {
	want := replicas(d.Spec.Replicas)
	st := d.Status
	if st.ObservedGeneration < generation {
		return Progress{Message: fmt.Sprintf("%s: waiting for the Deployment controller to observe generation %d", ref, generation)}
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return Progress{Failed: true, Message: fmt.Sprintf("%s exceeded its progress deadline", ref)}
		}
	}
	switch {
	case st.UpdatedReplicas < want:
		return Progress{Message: fmt.Sprintf("%s: %d of %d new replicas updated", ref, st.UpdatedReplicas, want)}
	case st.Replicas > st.UpdatedReplicas:
		return Progress{Message: fmt.Sprintf("%s: %d old replica(s) pending termination", ref, st.Replicas-st.UpdatedReplicas)}
	case st.AvailableReplicas < st.UpdatedReplicas:
		return Progress{Message: fmt.Sprintf("%s: %d of %d updated replicas available", ref, st.AvailableReplicas, st.UpdatedReplicas)}
	}
	return Progress{Done: true, Message: fmt.Sprintf("%s: %d of %d replicas updated and available", ref, st.UpdatedReplicas, want)}
}

// deploymentShortfall is the Deployment's ReplicaFailure condition, which
// its controller copies from the ReplicaSet that failed to create a pod
// (a quota exceeded, a PodSecurity or admission refusal).
func deploymentShortfall(t *Target) (string, time.Time) {
	for _, c := range t.obj.(*appsv1.Deployment).Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return fmt.Sprintf("its ReplicaSet cannot create pods (%s: %s)", c.Reason, c.Message), c.LastTransitionTime.Time
		}
	}
	return "", time.Time{}
}

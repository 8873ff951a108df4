package targets

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// Target is one workload a migration changes, whatever its kind: the
// controller object, the engine's view of it and its live pods. Code that
// needs to know the kind asks the Target instead of switching on it.
type Target struct {
	deployment  *appsv1.Deployment
	statefulSet *appsv1.StatefulSet
	// Workload is the engine's view: template, strategy, pods.
	Workload *placement.Workload
	// Pods are the live (not terminating) pods, by name.
	Pods []*corev1.Pod
}

// NewDeployment builds the Target of a Deployment from its ReplicaSets and
// the namespace's live pods.
func NewDeployment(d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet, pods []*corev1.Pod) *Target {
	w := FromDeployment(d, replicaSets, pods)
	return &Target{deployment: d, Workload: w, Pods: podsOf(w, pods)}
}

// NewStatefulSet builds the Target of a StatefulSet from the namespace's
// live pods.
func NewStatefulSet(s *appsv1.StatefulSet, pods []*corev1.Pod) *Target {
	w := FromStatefulSet(s, pods)
	return &Target{statefulSet: s, Workload: w, Pods: podsOf(w, pods)}
}

// Object is the workload object.
func (t *Target) Object() client.Object {
	if t.deployment != nil {
		return t.deployment
	}
	return t.statefulSet
}

// Kind is the workload's kind.
func (t *Target) Kind() placement.WorkloadKind { return t.Workload.Kind }

// Name is the workload's name.
func (t *Target) Name() string { return t.Workload.Name }

// String is "Kind/name", as messages name workloads.
func (t *Target) String() string { return string(t.Workload.Kind) + "/" + t.Workload.Name }

// UID is the workload object's uid.
func (t *Target) UID() types.UID { return t.Object().GetUID() }

// Generation is the workload object's generation.
func (t *Target) Generation() int64 { return t.Object().GetGeneration() }

// Paused reports a workload whose controller is told not to roll out a
// changed template: a Deployment with spec.paused.
func (t *Target) Paused() bool {
	return t.deployment != nil && t.deployment.Spec.Paused
}

// Template is the live pod template.
func (t *Target) Template() *corev1.PodTemplateSpec { return &t.Workload.Template }

// Selector is the workload's pod selector.
func (t *Target) Selector() *metav1.LabelSelector { return t.Workload.Selector }

// CurrentPods are the live pods of the live template's revision.
func (t *Target) CurrentPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range t.Pods {
		if t.Workload.Revision != "" && p.Labels[t.Workload.RevisionLabel] == t.Workload.Revision {
			out = append(out, p)
		}
	}
	return out
}

// Progress is how far a workload's controller has rolled out a
// generation, judged as `kubectl rollout status` judges it.
type Progress struct {
	// Done is true when every pod the template change replaces runs the
	// new template, Ready.
	Done bool
	// Failed is true when the controller gave up (a Deployment's
	// ProgressDeadlineExceeded).
	Failed bool
	// Message says what the rollout waits for.
	Message string
	// StuckPod names a pod the controller will not replace by itself: an
	// OrderedReady StatefulSet's pod that never became Ready at a revision
	// other than the update revision (kubernetes#67250).
	StuckPod string
}

// Progress judges the rollout of generation (at least the object's own).
func (t *Target) Progress(generation int64) Progress {
	if t.deployment != nil {
		return deploymentProgress(t.String(), t.deployment, max(generation, t.deployment.Generation))
	}
	return t.statefulSetProgress(max(generation, t.statefulSet.Generation))
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

// statefulSetProgress follows kubectl's StatefulSet status viewer and adds
// what it cannot say: a partitioned rollout is complete once the ordinals
// at or above the partition are updated, and an OnDelete StatefulSet once
// every pod was deleted and came back at the update revision.
func (t *Target) statefulSetProgress(generation int64) Progress {
	s, ref := t.statefulSet, t.String()
	want := replicas(s.Spec.Replicas)
	st := s.Status
	if st.ObservedGeneration == 0 || st.ObservedGeneration < generation {
		return Progress{Message: fmt.Sprintf("%s: waiting for the StatefulSet controller to observe generation %d", ref, generation)}
	}
	stuck := t.stuckPod()
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		if st.UpdatedReplicas < want || st.ReadyReplicas < want {
			old := t.podsNotAt(st.UpdateRevision)
			return Progress{StuckPod: stuck, Message: fmt.Sprintf("%s uses the OnDelete update strategy: %d of %d pods run the new revision; each takes it only when deleted (%s)",
				ref, st.UpdatedReplicas, want, firstFew(old, 3))}
		}
		return Progress{Done: true, Message: fmt.Sprintf("%s: every pod runs the new revision", ref)}
	}
	if st.ReadyReplicas < want {
		return Progress{StuckPod: stuck, Message: fmt.Sprintf("%s: %d of %d pods Ready", ref, st.ReadyReplicas, want)}
	}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil && *ru.Partition > 0 {
		if st.UpdatedReplicas < want-*ru.Partition {
			return Progress{StuckPod: stuck, Message: fmt.Sprintf("%s: %d of %d pods at or above partition %d updated", ref, st.UpdatedReplicas, want-*ru.Partition, *ru.Partition)}
		}
		return Progress{Done: true, Message: fmt.Sprintf("%s: partitioned rollout complete: the %d pod(s) at or above ordinal %d are updated; ordinals below it keep their template", ref, st.UpdatedReplicas, *ru.Partition)}
	}
	if st.UpdateRevision != st.CurrentRevision {
		return Progress{StuckPod: stuck, Message: fmt.Sprintf("%s: %d of %d pods at revision %s", ref, st.UpdatedReplicas, want, st.UpdateRevision)}
	}
	return Progress{Done: true, Message: fmt.Sprintf("%s: %d of %d pods at revision %s, Ready", ref, st.UpdatedReplicas, want, st.UpdateRevision)}
}

// stuckPod is an OrderedReady StatefulSet's pod that is not Ready and not
// at the update revision: the controller waits for it to become Ready
// before it touches any pod, so it is never replaced by the new template.
func (t *Target) stuckPod() string {
	s := t.statefulSet
	if s.Spec.PodManagementPolicy == appsv1.ParallelPodManagement {
		return ""
	}
	for _, p := range t.Pods {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] != s.Status.UpdateRevision && !podReady(p) {
			return p.Name
		}
	}
	return ""
}

func (t *Target) podsNotAt(revision string) []string {
	var out []string
	for _, p := range t.Pods {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] != revision {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// podsOf returns the live pods of a workload, by name.
func podsOf(w *placement.Workload, pods []*corev1.Pod) []*corev1.Pod {
	mine := make(map[types.UID]bool, len(w.Pods))
	for _, uid := range w.Pods {
		mine[uid] = true
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if mine[p.UID] {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func firstFew(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(" and %d more", len(items)-n)
}

// Build is the Target of a workload object of any kind the project
// migrates, from the ReplicaSets it controls (none but a Deployment's) and
// the pods that may be its; nil for any other object.
func Build(obj client.Object, replicaSets []*appsv1.ReplicaSet, pods []*corev1.Pod) *Target {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return NewDeployment(o, replicaSets, pods)
	case *appsv1.StatefulSet:
		return NewStatefulSet(o, pods)
	}
	return nil
}

package targets

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Target is one workload a migration changes, whatever its kind: the
// controller object, the engine's view of it and its live pods. Code that
// needs to know the kind asks the Target instead of switching on it.
type Target struct {
	obj  client.Object
	kind *Kind
	// Workload is the engine's view: template, strategy, pods.
	Workload *placement.Workload
	// Pods are the live (not terminating) pods, by name.
	Pods []*corev1.Pod
}

// Object is the workload object.
func (t *Target) Object() client.Object { return t.obj }

// Kind is the workload's kind.
func (t *Target) Kind() pgv1.WorkloadKind { return t.Workload.Kind }

// Name is the workload's name.
func (t *Target) Name() string { return t.Workload.Name }

// String is "Kind/name", as messages name workloads.
func (t *Target) String() string { return t.Workload.Ref().String() }

// UID is the workload object's uid.
func (t *Target) UID() types.UID { return t.Object().GetUID() }

// Generation is the workload object's generation.
func (t *Target) Generation() int64 { return t.Object().GetGeneration() }

// Paused reports a workload whose controller is told not to roll out a
// changed template (a Deployment with spec.paused).
func (t *Target) Paused() bool { return t.kind.paused(t.obj) }

// Partitioned reports a workload whose rolling update stops at a
// partition (a StatefulSet's): the pods below it keep their template.
func (t *Target) Partitioned() bool { return t.kind.partitioned(t.obj) }

// Interchangeable reports a workload whose pods are interchangeable: its
// controller removes them by pod-deletion-cost when it scales down, and
// replaces an evicted one with a pod placed anywhere.
func (t *Target) Interchangeable() bool { return t.kind.interchangeable }

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
	return t.kind.progress(t, generation)
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

// PodReady reports whether the pod is Ready, and since when.
func PodReady(p *corev1.Pod) (bool, time.Time) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

package placement

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Workload is a controller and its pods, as the rollout simulation needs it.
type Workload struct {
	// Kind is the controller whose rollout is simulated: its kind file
	// (kind_<name>.go) says how it rolls out.
	Kind      pgv1.WorkloadKind
	Namespace string
	Name      string
	Replicas  int32
	// Selector is the workload's pod selector: the constraint's default
	// selector, "the workload's own pods".
	Selector *metav1.LabelSelector
	// Template is the pod template the rollout rolls out: the workload's
	// template with the candidate constraint applied.
	Template corev1.PodTemplateSpec
	// Strategy is the Deployment's strategy.
	Strategy appsv1.DeploymentStrategy
	// UpdateStrategy is the StatefulSet's update strategy.
	UpdateStrategy appsv1.StatefulSetUpdateStrategy
	// PodManagementPolicy is the StatefulSet's: Parallel creates every
	// missing pod at once, OrderedReady one at a time in ordinal order.
	PodManagementPolicy appsv1.PodManagementPolicyType
	// VolumeClaimTemplates are the StatefulSet's claim templates; pod i
	// mounts the claim "<template>-<name>-<i>".
	VolumeClaimTemplates []corev1.PersistentVolumeClaim
	// Pods are the UIDs of the workload's current pods in the snapshot.
	Pods []types.UID
	// RevisionLabel and Revision tell the pods of the live template apart
	// from older ones: pod-template-hash and the hash of the Deployment's
	// current ReplicaSet, or controller-revision-hash and the StatefulSet's
	// update revision. Empty while the controller has not created it.
	RevisionLabel string
	Revision      string
}

// currentRevision reports whether pod belongs to the live template's
// revision; true for every pod when the revision is unknown.
func (w *Workload) currentRevision(pod *corev1.Pod) bool {
	return w.Revision == "" || pod.Labels[w.RevisionLabel] == w.Revision
}

// Ref is the workload as the engine's answers are keyed by it.
func (w *Workload) Ref() pgv1.TargetRef { return pgv1.TargetRef{Kind: w.Kind, Name: w.Name} }

// WithSpec is a copy of w whose template has spec: the workload as a
// change to its pods' spec (a stage, a constraint taken out) leaves it.
func (w *Workload) WithSpec(spec *corev1.PodSpec) *Workload {
	changed := *w
	changed.Template = corev1.PodTemplateSpec{ObjectMeta: *w.Template.ObjectMeta.DeepCopy(), Spec: *spec}
	return &changed
}

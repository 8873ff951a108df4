package targets

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Kind is everything the project knows of one workload kind: how to read
// an object of it (the engine's workload, its pods, its revision), how far
// its controller rolled a template out, what pausing it means, and the
// empty apply configuration a write starts from. Each kind is one file
// (kind_deployment.go, kind_statefulset.go); the controller, planning,
// the plugin, the admission check and workloadpatch ask the Kind instead
// of switching on it, and `make verify` refuses a switch on the kind
// anywhere else.
type Kind struct {
	// Name is the kind as the API and the engine spell it.
	Name pgv1.WorkloadKind
	// Resource and ShortName are the kind's names on kubectl's command
	// line (apps group).
	Resource, ShortName string
	// New is an empty object of the kind.
	New func() client.Object
	// NewList is an empty list of the kind.
	NewList func() client.ObjectList
	// Items are a list's objects.
	Items func(client.ObjectList) []client.Object
	// NewApplyConfiguration is an empty apply configuration of the kind,
	// which workloadpatch fills in the API's JSON shape.
	NewApplyConfiguration func() runtime.ApplyConfiguration

	// is reports an object of the kind.
	is func(obj any) bool
	// workload is the engine's view of an object of the kind: the
	// ReplicaSets it controls (a Deployment's) tell its pods and revision.
	workload func(obj client.Object, replicaSets []*appsv1.ReplicaSet, pods []*corev1.Pod) *placement.Workload
	// progress judges the rollout of generation.
	progress func(t *Target, generation int64) Progress
	// paused reports an object whose controller is told not to roll out.
	paused func(obj client.Object) bool
	// partitioned reports an object whose rolling update stops at a
	// partition, leaving the pods below it on their template.
	partitioned func(obj client.Object) bool
	// template is the object's pod template, in place: what a write that
	// moves a term between forms changes.
	template func(obj client.Object) *corev1.PodTemplateSpec
	// replicas is the object's replica count, in place: what its scale
	// subresource writes.
	replicas func(obj client.Object) **int32
	// counts are what the object's status reports of its pods.
	counts func(obj client.Object) replicaCounts
	// shortfall says why the kind's controller made fewer pods than it is
	// asked for, as its own status or pods tell, and since when; "" when
	// they do not tell.
	shortfall func(t *Target) (why string, since time.Time)
	// podLabels are the labels the kind's controller adds to its i-th pod
	// besides the template's and the revision's.
	podLabels func(w *placement.Workload, name string, labels map[string]string)
	// interchangeable reports a kind whose pods are interchangeable, as a
	// ReplicaSet's are: a scale-down chooses them by rank, pod-deletion-cost
	// first, and an evicted one is replaced by a new pod the scheduler
	// places anywhere. A StatefulSet's keep their ordinal, name and claims.
	interchangeable bool
}

// kinds are the kinds the project migrates, in the order they are listed.
var kinds = []*Kind{&deploymentKind, &statefulSetKind}

// Kinds are the workload kinds the project migrates.
func Kinds() []*Kind { return kinds }

// KindNamed is the kind of that name, nil for a kind the project does not
// migrate.
func KindNamed(name string) *Kind {
	for _, k := range kinds {
		if string(k.Name) == name {
			return k
		}
	}
	return nil
}

// KindOf is the kind of an object, nil for an object of any other kind.
func KindOf(obj any) *Kind {
	for _, k := range kinds {
		if k.is(obj) {
			return k
		}
	}
	return nil
}

// KindOfResource is the kind of an apps resource ("deployments"), nil
// for another.
func KindOfResource(resource string) *Kind {
	for _, k := range kinds {
		if k.Resource == resource {
			return k
		}
	}
	return nil
}

// Scaled is a copy of a workload object of the kind with n replicas, as a
// write to its scale subresource leaves it.
func (k *Kind) Scaled(obj client.Object, n int32) client.Object {
	out := obj.DeepCopyObject().(client.Object)
	*k.replicas(out) = &n
	return out
}

// KindSpelled is the kind a command line names, in any of kubectl's
// spellings (deploy, deployment, deployments, deployments.apps), nil for
// another.
func KindSpelled(s string) *Kind {
	s = strings.TrimSuffix(strings.ToLower(s), ".apps")
	for _, k := range kinds {
		if s == k.ShortName || s == k.Resource || s == strings.ToLower(string(k.Name)) {
			return k
		}
	}
	return nil
}

// NewObject is an empty object of a workload kind the project migrates.
func NewObject(kind string) (client.Object, error) {
	if k := KindNamed(kind); k != nil {
		return k.New(), nil
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

// WorkloadOf is the engine's view of a workload object of any kind the
// project migrates, with no pods: a manifest's object as lint reads it or
// a request's as the admission check reads it. nil for any other object.
// The operator reads the same fields through the same Kind, so lint, the
// admission check and the operator judge the same workload.
func WorkloadOf(obj any) *placement.Workload {
	k := KindOf(obj)
	if k == nil {
		return nil
	}
	return k.workload(obj.(client.Object), nil, nil)
}

// TemplateOf is the pod template of a workload object of any kind the
// project migrates, in place, to read or write; nil for any other object.
func TemplateOf(obj client.Object) *corev1.PodTemplateSpec {
	k := KindOf(obj)
	if k == nil {
		return nil
	}
	return k.template(obj)
}

// Build is the Target of a workload object of any kind the project
// migrates, from the ReplicaSets it controls (none but a Deployment's) and
// the pods that may be its; nil for any other object.
func Build(obj client.Object, replicaSets []*appsv1.ReplicaSet, pods []*corev1.Pod) *Target {
	k := KindOf(obj)
	if k == nil {
		return nil
	}
	w := k.workload(obj, replicaSets, pods)
	return &Target{obj: obj, kind: k, Workload: w, Pods: podsOf(w, pods)}
}

// PodLabels are the labels w's controller gives its pod of that name:
// the template's, the revision's and those of the kind.
func PodLabels(w *placement.Workload, name, revision string) map[string]string {
	labels := map[string]string{w.RevisionLabel: revision}
	for k, v := range w.Template.Labels {
		labels[k] = v
	}
	if k := KindNamed(string(w.Kind)); k != nil && k.podLabels != nil {
		k.podLabels(w, name, labels)
	}
	return labels
}

// items turns a typed list's items into objects.
func items[T any, PT interface {
	*T
	client.Object
}](list []T) []client.Object {
	out := make([]client.Object, len(list))
	for i := range list {
		out[i] = PT(&list[i])
	}
	return out
}

// Named are the workloads of every kind that bear a name: a
// request for a watched workload names no kind.
func Named(ctx context.Context, c client.Reader, key types.NamespacedName) ([]client.Object, error) {
	var out []client.Object
	for _, kind := range Kinds() {
		obj := kind.New()
		if err := c.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("get %s %s: %w", kind.Name, key, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

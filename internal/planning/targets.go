package planning

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// Inventory holds the workloads of one namespace, of every kind the
// project migrates, and what their rollout needs: the Deployments'
// ReplicaSets and every pod.
type Inventory struct {
	Workloads   []client.Object
	ReplicaSets []*appsv1.ReplicaSet
	Pods        []*corev1.Pod
}

// TargetRefs lists the workloads the spec names, or those of the given
// workloads its targetSelector selects, in a stable order.
func TargetRefs(spec pgv1.PlacementMigrationSpec, workloads []client.Object) ([]pgv1.TargetRef, error) {
	if spec.TargetSelector == nil {
		return spec.Targets, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(spec.TargetSelector.Selector.AsMeta())
	if err != nil {
		return nil, fmt.Errorf("targetSelector: %w", err)
	}
	var refs []pgv1.TargetRef
	for _, obj := range workloads {
		k := targets.KindOf(obj)
		if k == nil || !selectsKind(spec.TargetSelector.Kinds, k) || capacityRequest(obj) || !sel.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		refs = append(refs, pgv1.TargetRef{Kind: k.Name, Name: obj.GetName()})
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	return refs, nil
}

// selectsKind reports whether a targetSelector's kinds (every kind when
// empty) hold k.
func selectsKind(kinds []pgv1.WorkloadKind, k *targets.Kind) bool {
	return len(kinds) == 0 || slices.Contains(kinds, k.Name)
}

// Target is a resolved target: the workload and the constraint rendered
// for it.
type Target struct {
	*targets.Target
	Ref      pgv1.TargetRef
	Rendered placement.Constraint
}

// Resolve finds each ref's workload in the inventory and renders the
// constraint for it; refs it does not hold are returned as "Kind/name".
func Resolve(refs []pgv1.TargetRef, inv Inventory, c placement.Constraint) (found []*Target, missing []string) {
	live := make([]*corev1.Pod, 0, len(inv.Pods))
	for _, p := range inv.Pods {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	for _, ref := range refs {
		var t *targets.Target
		if obj := find(inv.Workloads, ref); obj != nil {
			t = targets.Build(obj, inv.ReplicaSets, live)
		}
		if t == nil {
			missing = append(missing, ref.String())
			continue
		}
		found = append(found, &Target{Target: t, Ref: ref})
	}
	Render(found, c)
	return found, missing
}

// Render renders the constraint for each target, knowing the others: a
// constraint that selects the targets' own pods selects all of them.
func Render(ts []*Target, c placement.Constraint) {
	all := make([]*placement.Workload, len(ts))
	for i, t := range ts {
		all[i] = t.Workload
	}
	for _, t := range ts {
		t.Rendered = c.RenderFor(t.Workload, all)
	}
}

// KeepRecorded renders the constraint for a target as it was written into
// it, when its recorded entry (applied) is one of the constraint's
// renderings: counted with the other targets, or scoped to one revision.
// Which rendering a target gets is decided when it is first written and
// kept: a target that joins or leaves the set must not make a verified
// target's entry look foreign, or it would be written, and its pods
// rolled, again.
func KeepRecorded(t *Target, c placement.Constraint, applied *corev1.PodSpec) {
	if applied == nil {
		return
	}
	stage := placement.StageOfEntry(applied)
	for _, r := range []placement.Constraint{t.Rendered, c, c.ForWorkload(t.Kind())} {
		entry, err := r.Entry(t.Selector(), stage)
		if err == nil && placement.Carries(entry, applied) && placement.Carries(applied, entry) {
			t.Rendered = r
			return
		}
	}
}

// find is the workload a ref names, nil when there is none.
func find(workloads []client.Object, ref pgv1.TargetRef) client.Object {
	for _, obj := range workloads {
		if k := targets.KindOf(obj); k != nil && string(k.Name) == string(ref.Kind) && obj.GetName() == ref.Name {
			return obj
		}
	}
	return nil
}

// capacityRequest reports a workload of placeholder pods that a migration
// created to ask an autoscaler for capacity: never a target, whatever a
// selector matches.
func capacityRequest(obj client.Object) bool {
	owner := metav1.GetControllerOf(obj)
	return owner != nil && owner.Kind == "PlacementMigration" && strings.HasPrefix(owner.APIVersion, pgv1.GroupVersion.Group+"/")
}

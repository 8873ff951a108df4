// Package provision turns the engine's capacity request into the objects an
// autoscaler provisions nodes for: a PodTemplate and a CapacityBuffer, or a
// Deployment of placeholder pods at a negative priority. It builds them and
// reads the autoscaler's word back from them; the controller writes them.
// It makes no API call and knows nothing of reconciling.
package provision

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

const (
	// KindCapacityBuffer and KindDeployment are the kinds of request the
	// status records.
	KindCapacityBuffer = "CapacityBuffer"
	KindDeployment     = "Deployment"

	// PriorityClassName is the PriorityClass of placeholder pods, shipped
	// with the operator: negative, so that every real pod preempts them.
	PriorityClassName = "placement-guard-placeholder"

	// doNotDisrupt keeps Karpenter from consolidating a node a placeholder
	// holds; evicting a placeholder is fine, removing its node is not.
	doNotDisrupt = "karpenter.sh/do-not-disrupt"

	nameSuffix = "-capacity"

	// PlaceholderRole is the opt-in ClusterRole that lets the operator
	// create and delete the Deployments of placeholder pods, bound only in
	// the namespaces whose migrations use mode PlaceholderPods: the right
	// to create Deployments is the right to run pods.
	PlaceholderRole = "placement-guard-placeholders"
)

// CapacityBufferGVK is the CapacityBuffer API that cluster-autoscaler and
// Karpenter serve.
var CapacityBufferGVK = schema.GroupVersionKind{Group: "autoscaling.x-k8s.io", Version: "v1beta1", Kind: KindCapacityBuffer}

// Request is one migration's request for capacity.
type Request struct {
	Mode     pgv1.ProvisionMode
	Name     string
	Owner    *pgv1.PlacementMigration
	Template corev1.PodTemplateSpec
	Replicas int32
}

// KindFor is the kind of object a mode creates; "" for None.
func KindFor(mode pgv1.ProvisionMode) string {
	switch mode {
	case pgv1.ProvisionCapacityBuffer:
		return KindCapacityBuffer
	case pgv1.ProvisionPlaceholderPods:
		return KindDeployment
	}
	return ""
}

// Name is the request's name for a migration: its name and "-capacity".
// A name too long for that is shortened and given a digest of the whole
// name, so that two long migration names sharing a prefix never name the
// same request.
func Name(migration string) string {
	if len(migration)+len(nameSuffix) <= validation.DNS1123SubdomainMaxLength {
		return migration + nameSuffix
	}
	sum := sha256.Sum256([]byte(migration))
	digest := hex.EncodeToString(sum[:])[:10]
	keep := validation.DNS1123SubdomainMaxLength - len(nameSuffix) - len(digest) - 1
	return strings.TrimRight(migration[:keep], "-.") + "-" + digest + nameSuffix
}

// OwnedBy reports whether obj is a request object of the migration with
// uid owner: it names that migration as its controller. An object of the
// request's name without it was made by someone else, and the operator
// neither resizes nor deletes it.
func OwnedBy(obj metav1.Object, owner types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == owner && ref.Kind == "PlacementMigration" && strings.HasPrefix(ref.APIVersion, pgv1.GroupVersion.Group+"/")
}

// Owner describes who an object of the request's name belongs to, for a
// person: its controller, else the field managers that wrote it.
func Owner(obj metav1.Object) string {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return fmt.Sprintf("controlled by %s %s", ref.Kind, ref.Name)
	}
	var managers []string
	for _, mf := range obj.GetManagedFields() {
		if !slices.Contains(managers, mf.Manager) {
			managers = append(managers, mf.Manager)
		}
	}
	if len(managers) == 0 {
		return "not made by this migration"
	}
	return "written by " + strings.Join(managers, ", ")
}

// Objects are the objects of a request, in the order they are written: for
// CapacityBuffer the PodTemplate it refers to first.
func Objects(r Request) ([]*unstructured.Unstructured, error) {
	var objs []runtime.Object
	switch r.Mode {
	case pgv1.ProvisionCapacityBuffer:
		objs = []runtime.Object{podTemplate(r), capacityBuffer(r)}
	case pgv1.ProvisionPlaceholderPods:
		objs = []runtime.Object{placeholders(r)}
	default:
		return nil, fmt.Errorf("provision mode %q asks for nothing", r.Mode)
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, u)
			continue
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, fmt.Errorf("convert %T: %w", o, err)
		}
		// Status is not ours to apply, and an empty creationTimestamp
		// would claim a field we never set.
		delete(m, "status")
		unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(m, "spec", "template", "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(m, "template", "metadata", "creationTimestamp")
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// Primary is the object whose status carries the autoscaler's word: the
// CapacityBuffer, or the placeholders' Deployment.
func Primary(kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	switch kind {
	case KindCapacityBuffer:
		u.SetGroupVersionKind(CapacityBufferGVK)
	default:
		u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind(KindDeployment))
	}
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// Owned are the objects a recorded request consists of, to delete: the
// primary object and, for a CapacityBuffer, its PodTemplate.
func Owned(kind, namespace, name string) []*unstructured.Unstructured {
	out := []*unstructured.Unstructured{Primary(kind, namespace, name)}
	if kind == KindCapacityBuffer {
		pt := &unstructured.Unstructured{}
		pt.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodTemplate"))
		pt.SetNamespace(namespace)
		pt.SetName(name)
		out = append(out, pt)
	}
	return out
}

// IsAPIMissing reports an error that says the cluster does not serve the
// kind: the CapacityBuffer CRD is not installed.
func IsAPIMissing(err error) bool {
	return err != nil && meta.IsNoMatchError(err)
}

func meta0(r Request) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: r.Name, Namespace: r.Owner.Namespace,
		Labels: map[string]string{
			"app.kubernetes.io/managed-by": "placement-guard",
			"app.kubernetes.io/component":  "capacity-request",
		},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: pgv1.GroupVersion.String(), Kind: "PlacementMigration",
			Name: r.Owner.Name, UID: r.Owner.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

func podTemplate(r Request) *corev1.PodTemplate {
	tmpl := *r.Template.DeepCopy()
	restrict(&tmpl.Spec)
	return &corev1.PodTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PodTemplate"},
		ObjectMeta: meta0(r),
		Template:   tmpl,
	}
}

// placeholderUser is the pause image's own unprivileged user.
const placeholderUser = 65535

// restrict makes a placeholder pass the restricted Pod Security Standard,
// so that a namespace enforcing it admits the placeholders instead of
// leaving the request standing with no pod behind it: non-root, no
// privilege escalation, every capability dropped, the runtime's seccomp
// profile. None of it changes where the pod can be scheduled.
func restrict(spec *corev1.PodSpec) {
	spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](placeholderUser),
		RunAsGroup:     ptr.To[int64](placeholderUser),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for i := range spec.Containers {
		spec.Containers[i].SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
}

func capacityBuffer(r Request) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"podTemplateRef": map[string]any{"name": r.Name},
			"replicas":       int64(r.Replicas),
		},
	}}
	u.SetGroupVersionKind(CapacityBufferGVK)
	m := meta0(r)
	u.SetName(m.Name)
	u.SetNamespace(m.Namespace)
	u.SetLabels(m.Labels)
	u.SetOwnerReferences(m.OwnerReferences)
	return u
}

// Exempt are the labels that keep a capacity request's placeholder
// Deployment away from placement-guard's own admission check: the
// webhook configurations' object selector never sends it, and the check
// lets it pass if it is sent. Its required anti-affinity is what keeps its
// pods Pending for the autoscaler, so judging it would refuse the request
// in Deny ("add the nodes first") and soften it in Adopt, where soft
// placeholders pack onto the nodes there are and ask for nothing.
func Exempt() map[string]string {
	return map[string]string{pgv1.AdmissionLabel: "Off"}
}

// IsExempt reports whether a request object carries Exempt's labels.
func IsExempt(obj metav1.Object) bool {
	for k, v := range Exempt() {
		if obj.GetLabels()[k] != v {
			return false
		}
	}
	return true
}

func placeholders(r Request) *appsv1.Deployment {
	tmpl := *r.Template.DeepCopy()
	tmpl.Spec.PriorityClassName = PriorityClassName
	// Placeholders never run anything; a token would only be a liability.
	tmpl.Spec.AutomountServiceAccountToken = ptr.To(false)
	restrict(&tmpl.Spec)
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	tmpl.Annotations[doNotDisrupt] = "true"
	om := meta0(r)
	maps.Copy(om.Labels, Exempt())
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: KindDeployment},
		ObjectMeta: om,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(r.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: r.Template.Labels},
			// A changed request replaces its placeholders; surging them
			// would ask for nodes nobody needs.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: tmpl,
		},
	}
}

// Word is the autoscaler's latest word on a request, from its primary
// object as the API server has it, and whether it says the request cannot
// be served as it stands (the placeholder pods cannot be created).
func Word(live *unstructured.Unstructured) (string, bool) {
	if live.GetKind() == KindCapacityBuffer {
		return bufferWord(live), false
	}
	return placeholderWord(live)
}

// bufferWord reads the CapacityBuffer's Provisioning condition, else its
// ReadyForProvisioning condition.
func bufferWord(live *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	byType := map[string]map[string]any{}
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			t, _ := m["type"].(string)
			byType[t] = m
		}
	}
	for _, t := range []string{"Provisioning", "ReadyForProvisioning"} {
		if c, ok := byType[t]; ok {
			reason, _ := c["reason"].(string)
			msg, _ := c["message"].(string)
			status, _ := c["status"].(string)
			word := fmt.Sprintf("%s=%s %s", t, status, reason)
			if msg != "" {
				word += ": " + msg
			}
			return word
		}
	}
	return "the autoscaler has not taken it up yet"
}

// placeholderWord reads the placeholders' Deployment: how many run, and why
// pods cannot be created when that is the case (a quota, a Pod Security
// admission refusal), which leaves the request asking for nothing.
func placeholderWord(live *unstructured.Unstructured) (string, bool) {
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, d); err != nil {
		return "placeholders unreadable: " + err.Error(), false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return "placeholder pods cannot be created: " + c.Message, true
		}
	}
	want := int32(0)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return fmt.Sprintf("%d of %d placeholder pod(s) running, %d waiting for a node", d.Status.ReadyReplicas, want, max(0, want-d.Status.ReadyReplicas)), false
}

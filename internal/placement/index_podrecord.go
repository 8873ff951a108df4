package placement

import (
	"reflect"
	"strconv"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podInfo is the engine's record of a pod: what TrimPod keeps of it, with
// what the pods of one template have in common held once, in a shape
// they share, and only the pod's own identity, node and status here. A
// record is far smaller than a corev1.Pod (whose struct alone is 1.2 KB),
// and it is the only copy of the pod the operator keeps.
type podInfo struct {
	shape *podShape

	name       string
	uid        types.UID
	version    string
	generation int64
	nodeName   string
	created    metav1.Time
	deleted    *metav1.Time

	phase corev1.PodPhase
	// readyStatus and readySince hold the Ready condition when it is the
	// only condition kept (nearly every pod); conditions holds the kept
	// conditions otherwise.
	readyStatus corev1.ConditionStatus
	readySince  metav1.Time
	conditions  []corev1.PodCondition
	statuses    []corev1.ContainerStatus
	initStatus  []corev1.ContainerStatus

	node     nodeID
	requests resources
	// nonZeroCPU and nonZeroMemory are what the scheduler's scoring
	// charges a node for the pod (nonZeroRequests).
	nonZeroCPU, nonZeroMemory int64
}

// podShape is what pods of one template share: namespace, labels, the
// kept annotation, owners and the spec without its node; its pod's own
// fields (name, uid, node, status) are empty and never read. Nothing
// changes a shape once made.
type podShape struct {
	pod       *corev1.Pod
	antiTerms []affinityTerm
	// scoring are its terms InterPodAffinity's score weighs an incoming
	// pod by (nil when it has none).
	scoring *scoringTerms
}

// common is the part of the pod its shape holds.
func (pi *podInfo) common() *corev1.Pod { return pi.shape.pod }

func (pi *podInfo) namespace() string            { return pi.shape.pod.Namespace }
func (pi *podInfo) labels() map[string]string    { return pi.shape.pod.Labels }
func (pi *podInfo) antiTerms() []affinityTerm    { return pi.shape.antiTerms }
func (pi *podInfo) scoring() *scoringTerms       { return pi.shape.scoring }
func (pi *podInfo) terminating() bool            { return pi.deleted != nil }
func (pi *podInfo) annotation(key string) string { return pi.shape.pod.Annotations[key] }

// ready reports the pod's Ready condition: its status and since when.
func (pi *podInfo) ready() (corev1.ConditionStatus, metav1.Time, bool) {
	if pi.conditions == nil {
		return pi.readyStatus, pi.readySince, pi.readyStatus != ""
	}
	for _, c := range pi.conditions {
		if c.Type == corev1.PodReady {
			return c.Status, c.LastTransitionTime, true
		}
	}
	return "", metav1.Time{}, false
}

// restarts is the sum of the restarts of the pod's containers.
func (pi *podInfo) restarts() int32 {
	var n int32
	for i := range pi.statuses {
		n += pi.statuses[i].RestartCount
	}
	return n
}

// materialize rebuilds the pod TrimPod would have kept, for the callers
// outside the engine that read pods (the controller's guards and
// records). It allocates: the engine itself reads the record.
func (pi *podInfo) materialize() *corev1.Pod {
	sh := pi.shape.pod
	p := &corev1.Pod{
		TypeMeta: sh.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pi.name,
			Namespace:         sh.Namespace,
			UID:               pi.uid,
			ResourceVersion:   pi.version,
			Generation:        pi.generation,
			CreationTimestamp: pi.created,
			DeletionTimestamp: pi.deleted,
			Labels:            sh.Labels,
			Annotations:       sh.Annotations,
			OwnerReferences:   sh.OwnerReferences,
		},
		Spec: sh.Spec,
		Status: corev1.PodStatus{
			Phase:                 pi.phase,
			Conditions:            pi.conditions,
			ContainerStatuses:     pi.statuses,
			InitContainerStatuses: pi.initStatus,
		},
	}
	p.Spec.NodeName = pi.nodeName
	if pi.conditions == nil && pi.readyStatus != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: pi.readyStatus, LastTransitionTime: pi.readySince}}
	}
	return p
}

// record trims p, shares what it has in common with the pods trimmed
// before it, and returns the engine's record of it (not yet bound).
func (t *PodTrimmer) record(p *corev1.Pod) (*podInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := &t.scratch
	trimInto(out, p)
	t.sharePartsOf(out)
	shape, err := t.shapeOf(out)
	if err != nil {
		return nil, err
	}
	pi := &podInfo{
		shape:      shape,
		name:       out.Name,
		uid:        out.UID,
		version:    out.ResourceVersion,
		generation: out.Generation,
		nodeName:   out.Spec.NodeName,
		created:    out.CreationTimestamp,
		deleted:    out.DeletionTimestamp,
		phase:      internPhase(out.Status.Phase),
		statuses:   out.Status.ContainerStatuses,
		initStatus: out.Status.InitContainerStatuses,
		node:       noNode,
		requests:   podRequests(out),
	}
	pi.nonZeroCPU, pi.nonZeroMemory = nonZeroRequests(out)
	switch cs := out.Status.Conditions; {
	case len(cs) == 1 && cs[0].Type == corev1.PodReady && cs[0].Status != "":
		pi.readyStatus, pi.readySince = internStatus(cs[0].Status), cs[0].LastTransitionTime
	case len(cs) > 0:
		pi.conditions = cs
	}
	return pi, nil
}

// shapeOf returns the shape of a trimmed pod whose parts are shared: the
// shape already kept for the same parts, or a new one. Shared parts are
// one copy per content, so their addresses tell them apart; the other
// fields are rare (claims, overhead, pod-level resources, gates,
// priority) and are keyed by content. The caller holds the lock.
func (t *PodTrimmer) shapeOf(out *corev1.Pod) (*podShape, error) {
	named := namesItsClaims(out)
	t.begin('S')
	t.field(out.APIVersion)
	t.field(out.Kind)
	t.field(out.Namespace)
	t.address(mapData(out.Labels))
	t.address(mapData(out.Annotations))
	t.address(unsafe.Pointer(unsafe.SliceData(out.OwnerReferences)))
	t.address(mapData(out.Spec.NodeSelector))
	t.address(unsafe.Pointer(unsafe.SliceData(out.Spec.Tolerations)))
	t.address(unsafe.Pointer(out.Spec.Affinity))
	t.address(unsafe.Pointer(unsafe.SliceData(out.Spec.TopologySpreadConstraints)))
	t.address(unsafe.Pointer(unsafe.SliceData(out.Spec.Containers)))
	t.address(unsafe.Pointer(unsafe.SliceData(out.Spec.InitContainers)))
	rare := corev1.PodSpec{
		Overhead:        out.Spec.Overhead,
		Resources:       out.Spec.Resources,
		SchedulingGates: out.Spec.SchedulingGates,
		Priority:        out.Spec.Priority,
		Volumes:         out.Spec.Volumes,
	}
	if rare.Overhead != nil || rare.Resources != nil || rare.SchedulingGates != nil || rare.Priority != nil || rare.Volumes != nil {
		raw, err := rare.Marshal()
		if err != nil {
			// Unkeyable: a shape of its own, not kept.
			return newShape(out, named)
		}
		t.field(string(raw))
	}
	if named {
		t.field(out.Name)
	}
	if kept, ok := t.shared[string(t.key)]; ok {
		return kept.(*podShape), nil
	}
	shape, err := newShape(out, named)
	if err != nil {
		return nil, err
	}
	t.keep(shape)
	return shape, nil
}

// newShape makes the shape of a trimmed pod, computing once what every
// pod of the shape would: its required anti-affinity terms. A named shape
// keeps the pod's name, which its generic ephemeral volumes' claims are
// named after.
func newShape(out *corev1.Pod, named bool) (*podShape, error) {
	pod := &corev1.Pod{
		TypeMeta: out.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       out.Namespace,
			Labels:          out.Labels,
			Annotations:     out.Annotations,
			OwnerReferences: out.OwnerReferences,
		},
		Spec: out.Spec,
	}
	pod.Spec.NodeName = ""
	if named {
		pod.Name = out.Name
	}
	anti, err := requiredAntiAffinityTerms(pod)
	if err != nil {
		return nil, err
	}
	scoring, err := podScoringTerms(pod)
	if err != nil {
		return nil, err
	}
	return &podShape{pod: pod, antiTerms: anti, scoring: scoring}, nil
}

// namesItsClaims reports whether the pod has generic ephemeral volumes,
// whose claims are named after it: the filters that read claims need its
// name, so its shape is its own.
func namesItsClaims(p *corev1.Pod) bool {
	for i := range p.Spec.Volumes {
		if p.Spec.Volumes[i].Ephemeral != nil {
			return true
		}
	}
	return false
}

// address adds a part's address to the key being built.
func (t *PodTrimmer) address(p unsafe.Pointer) {
	t.key = strconv.AppendUint(append(t.key, 0), uint64(uintptr(p)), 16)
}

func mapData(m map[string]string) unsafe.Pointer {
	if m == nil {
		return nil
	}
	return reflect.ValueOf(m).UnsafePointer()
}

// internPhase and internStatus return the constants for the values every
// pod repeats, so that a record does not keep its own copy of the string
// the decoder made.
func internPhase(p corev1.PodPhase) corev1.PodPhase {
	for _, c := range [...]corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown} {
		if p == c {
			return c
		}
	}
	return p
}

func internStatus(s corev1.ConditionStatus) corev1.ConditionStatus {
	for _, c := range [...]corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown} {
		if s == c {
			return c
		}
	}
	return s
}

// replaceInPlace swaps a pod's record for pi when nothing an index holds
// changed: its shape (namespace, labels, owners, terms), its node and its
// requests. That is the common update (a pod going Running or Ready, its
// deletion starting), and it then costs no index work. It reports whether
// it could.
func (s *Snapshot) replaceInPlace(id podID, pi *podInfo) bool {
	old := s.pods[id]
	if old.shape != pi.shape || old.nodeName != pi.nodeName || !old.requests.equal(pi.requests) || old.nonZeroCPU != pi.nonZeroCPU || old.nonZeroMemory != pi.nonZeroMemory {
		return false
	}
	// The node's shared copy of its name, and the binding, carry over.
	pi.nodeName, pi.node = old.nodeName, old.node
	s.pods[id] = pi
	return true
}

func readySince(p *podInfo) time.Time {
	if status, since, _ := p.ready(); status == corev1.ConditionTrue {
		return since.Time
	}
	return time.Time{}
}

// restarts is the most restarts of a pod's containers and, apart, of its
// sidecars: the controller compares the first and then the second.
type restarts struct{ regular, sidecar int32 }

func maxRestarts(p *podInfo) restarts {
	var r restarts
	for _, st := range p.statuses {
		r.regular = max(r.regular, st.RestartCount)
	}
	if len(p.initStatus) == 0 {
		return r
	}
	sidecars := map[string]bool{}
	for _, c := range p.common().Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	for _, st := range p.initStatus {
		if sidecars[st.Name] {
			r.sidecar = max(r.sidecar, st.RestartCount)
		}
	}
	return r
}

func restartsBefore(a, b restarts) bool {
	if a.regular != b.regular {
		return a.regular > b.regular
	}
	return a.sidecar > b.sidecar
}

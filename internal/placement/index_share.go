package placement

import (
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultSharedParts bounds how many distinct parts a PodTrimmer keeps to
// share: far more than the templates of any cluster, few enough that pods
// made different on purpose cannot grow it without end.
const DefaultSharedParts = 100_000

// PodTrimmer trims pods as TrimPod does, and gives the pods it trims one
// copy of each part that pods of one template have in common: labels,
// owner references, node selector, tolerations, affinity, spread
// constraints, containers (with their requests) and, while they are all
// ready without restarts, container statuses. A cached pod of a
// ReplicaSet then keeps little more than its own identity and conditions.
//
// The parts are shared, so nothing may change a pod the trimmer returned:
// the informer cache's objects are never changed (they are replaced), and
// controller-runtime copies them before handing them out.
type PodTrimmer struct {
	mu     sync.Mutex
	max    int
	shared map[string]any
	// key is the key being built, its buffer reused from pod to pod: a
	// lookup of a part already kept allocates nothing.
	key []byte
	// names and resources hold a map's keys while they are sorted.
	names         []string
	resourceNames []corev1.ResourceName
	// scratch is the trimmed pod a record is read from; nothing keeps it.
	scratch corev1.Pod
}

// NewPodTrimmer returns a trimmer that keeps at most max parts to share;
// when it holds max, it forgets them all and starts again (pods trimmed
// before keep theirs).
func NewPodTrimmer(max int) *PodTrimmer {
	return &PodTrimmer{max: max, shared: map[string]any{}}
}

// Trim trims the pod and shares its common parts.
func (t *PodTrimmer) Trim(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{}
	trimInto(out, p)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sharePartsOf(out)
	return out
}

// sharePartsOf replaces the parts of a trimmed pod with the copies already
// kept; the caller holds the lock.
func (t *PodTrimmer) sharePartsOf(out *corev1.Pod) {
	out.Labels = t.stringMap('l', out.Labels)
	out.OwnerReferences = t.owners(out.OwnerReferences)
	out.Spec.NodeSelector = t.stringMap('n', out.Spec.NodeSelector)
	out.Spec.Tolerations = t.tolerations(out.Spec.Tolerations)
	out.Spec.Affinity = t.affinity(out.Spec.Affinity)
	out.Spec.TopologySpreadConstraints = t.spread(out.Spec.TopologySpreadConstraints)
	out.Spec.Containers = t.containers('c', out.Spec.Containers)
	out.Spec.InitContainers = t.containers('i', out.Spec.InitContainers)
	out.Status.ContainerStatuses = t.statuses('s', out.Status.ContainerStatuses)
	out.Status.InitContainerStatuses = t.statuses('t', out.Status.InitContainerStatuses)
}

// share returns the part already kept under the key being built, or keeps
// and returns this one.
func share[T any](t *PodTrimmer, part T) T {
	if kept, ok := t.shared[string(t.key)]; ok {
		return kept.(T)
	}
	t.keep(part)
	return part
}

// keep keeps a part under the key being built.
func (t *PodTrimmer) keep(part any) {
	if len(t.shared) >= t.max {
		clear(t.shared)
	}
	t.shared[string(t.key)] = part
}

// begin starts the key of a part of one kind.
func (t *PodTrimmer) begin(kind byte) {
	t.key = append(t.key[:0], kind)
}

// field adds a field to the key; fields are separated by a byte no label,
// name or quantity holds.
func (t *PodTrimmer) field(s string) {
	t.key = append(append(t.key, 0), s...)
}

// number adds an integer field to the key.
func (t *PodTrimmer) number(n int64) {
	t.key = strconv.AppendInt(append(t.key, 0), n, 10)
}

func (t *PodTrimmer) stringMap(kind byte, m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	t.begin(kind)
	t.names = t.names[:0]
	for k := range m {
		t.names = append(t.names, k)
	}
	slices.Sort(t.names)
	for _, k := range t.names {
		t.field(k)
		t.field(m[k])
	}
	return share(t, m)
}

func (t *PodTrimmer) owners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return refs
	}
	t.begin('o')
	for _, r := range refs {
		t.field(r.APIVersion)
		t.field(r.Kind)
		t.field(r.Name)
		t.field(string(r.UID))
		t.field(optionalBool(r.Controller))
		t.field(optionalBool(r.BlockOwnerDeletion))
	}
	return share(t, refs)
}

func (t *PodTrimmer) tolerations(ts []corev1.Toleration) []corev1.Toleration {
	if len(ts) == 0 {
		return ts
	}
	t.begin('t')
	for _, tol := range ts {
		t.field(tol.Key)
		t.field(string(tol.Operator))
		t.field(tol.Value)
		t.field(string(tol.Effect))
		if tol.TolerationSeconds != nil {
			t.number(*tol.TolerationSeconds)
		} else {
			t.field("-")
		}
	}
	return share(t, ts)
}

// affinity and spread are keyed by their wire form: their terms nest too
// deeply to spell out, and the pods that carry them are few.
func (t *PodTrimmer) affinity(a *corev1.Affinity) *corev1.Affinity {
	if a == nil {
		return nil
	}
	raw, err := a.Marshal()
	if err != nil {
		return a
	}
	t.begin('a')
	t.field(string(raw))
	return share(t, a)
}

func (t *PodTrimmer) spread(cs []corev1.TopologySpreadConstraint) []corev1.TopologySpreadConstraint {
	if len(cs) == 0 {
		return cs
	}
	t.begin('p')
	for i := range cs {
		raw, err := cs[i].Marshal()
		if err != nil {
			return cs
		}
		t.field(string(raw))
	}
	return share(t, cs)
}

// containers are keyed by what TrimPod keeps of them, so that trimmed and
// untrimmed containers have one key; a copy is trimmed only when none is
// kept yet.
func (t *PodTrimmer) containers(kind byte, cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return cs
	}
	t.begin(kind)
	for i := range cs {
		c := &cs[i]
		t.field(c.Name)
		if c.RestartPolicy != nil {
			t.field(string(*c.RestartPolicy))
		} else {
			t.field("-")
		}
		t.resources(c.Resources.Requests)
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			t.field(p.HostIP)
			t.number(int64(p.HostPort))
			t.field(string(p.Protocol))
		}
		t.field("|")
	}
	if kept, ok := t.shared[string(t.key)]; ok {
		return kept.([]corev1.Container)
	}
	trimmed := trimContainers(cs)
	t.keep(trimmed)
	return trimmed
}

// resources adds requests by value (1Gi and 1073741824 are one key).
func (t *PodTrimmer) resources(l corev1.ResourceList) {
	t.resourceNames = t.resourceNames[:0]
	for name := range l {
		t.resourceNames = append(t.resourceNames, name)
	}
	slices.Sort(t.resourceNames)
	for _, name := range t.resourceNames {
		q := l[name]
		t.field(string(name))
		var exp int32
		t.key, exp = q.AsCanonicalBytes(append(t.key, '='))
		t.key = strconv.AppendInt(append(t.key, 'e'), int64(exp), 10)
	}
}

// statuses are shared only while they carry nothing of a resize: the
// names, readiness and restarts every pod of a healthy ReplicaSet has in
// common.
func (t *PodTrimmer) statuses(kind byte, ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(ss) == 0 {
		return ss
	}
	t.begin(kind)
	for i := range ss {
		s := &ss[i]
		if s.AllocatedResources != nil || s.Resources != nil {
			return ss
		}
		t.field(s.Name)
		t.field(strconv.FormatBool(s.Ready))
		t.number(int64(s.RestartCount))
	}
	return share(t, ss)
}

func optionalBool(b *bool) string {
	if b == nil {
		return "-"
	}
	return strconv.FormatBool(*b)
}

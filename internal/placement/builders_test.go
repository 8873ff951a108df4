package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Test builders: small, explicit objects so that each case reads as the
// scenario it describes.

type nodeOpt func(*corev1.Node)

func mkNode(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("8Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func zone(z string) nodeOpt { return label(corev1.LabelTopologyZone, z) }

func label(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }

func noLabel(k string) nodeOpt { return func(n *corev1.Node) { delete(n.Labels, k) } }

func cordoned() nodeOpt { return func(n *corev1.Node) { n.Spec.Unschedulable = true } }

func taint(k, v string, effect corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Value: v, Effect: effect})
	}
}

func alloc(cpu, mem, pods string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse(mem),
			corev1.ResourcePods:   resource.MustParse(pods),
		}
	}
}

type podOpt func(*corev1.Pod)

var podSeq int

func mkPod(ns, name string, opts ...podOpt) *corev1.Pod {
	podSeq++
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("uid-%s-%s-%d", ns, name, podSeq)), Labels: map[string]string{}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func on(node string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

func withLabels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func requests(cpu, mem string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse(mem),
		}
	}
}

func terminating() podOpt {
	return func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
}

func nodeSelector(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func tolerate(k string, effect corev1.TaintEffect) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists, Effect: effect})
	}
}

func term(key string, sel map[string]string, mod ...func(*corev1.PodAffinityTerm)) corev1.PodAffinityTerm {
	t := corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}
	for _, m := range mod {
		m(&t)
	}
	return t
}

func inNamespaces(ns ...string) func(*corev1.PodAffinityTerm) {
	return func(t *corev1.PodAffinityTerm) { t.Namespaces = ns }
}

func nsSelector(kv ...string) func(*corev1.PodAffinityTerm) {
	return func(t *corev1.PodAffinityTerm) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: m}
	}
}

func antiAffinity(terms ...corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}
	}
}

func podAffinity(terms ...corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}
	}
}

type spreadOpt func(*corev1.TopologySpreadConstraint)

func spread(key string, maxSkew int32, sel map[string]string, opts ...spreadOpt) podOpt {
	return func(p *corev1.Pod) {
		c := corev1.TopologySpreadConstraint{
			TopologyKey: key, MaxSkew: maxSkew, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: sel},
		}
		for _, o := range opts {
			o(&c)
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
	}
}

func minDomains(n int32) spreadOpt {
	return func(c *corev1.TopologySpreadConstraint) { c.MinDomains = ptr.To(n) }
}

func affinityPolicy(p corev1.NodeInclusionPolicy) spreadOpt {
	return func(c *corev1.TopologySpreadConstraint) { c.NodeAffinityPolicy = ptr.To(p) }
}

func taintsPolicy(p corev1.NodeInclusionPolicy) spreadOpt {
	return func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = ptr.To(p) }
}

func scheduleAnyway() spreadOpt {
	return func(c *corev1.TopologySpreadConstraint) { c.WhenUnsatisfiable = corev1.ScheduleAnyway }
}

func matchLabelKeys(keys ...string) spreadOpt {
	return func(c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = keys }
}

func claim(name string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name},
		}})
	}
}

// mkClaim makes a claim of the class, bound to volume as the PV controller
// leaves it (bind-completed) when volume is set.
func mkClaim(ns, name, class, volume string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class), VolumeName: volume},
	}
	if volume != "" {
		c.Annotations = map[string]string{annBindCompleted: "yes"}
	}
	return c
}

func mkZonalVolume(name, zoneName string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zoneName},
			}}}},
		}}},
	}
}

func mkClass(name string, mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "csi.example.com", VolumeBindingMode: ptr.To(mode)}
}

func mkNamespace(name string, kv ...string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}}
	for i := 0; i+1 < len(kv); i += 2 {
		ns.Labels[kv[i]] = kv[i+1]
	}
	return ns
}

// pinnedToZoneC is a StatefulSet's two pods, db-0 and db-1, whose bound
// WaitForFirstConsumer volumes were provisioned in zone c, in a cluster that
// also has zone a: the end state of incident 002.
func pinnedToZoneC() Objects {
	return Objects{
		Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("c1", zone("c")), mkNode("c2", zone("c"))},
		Pods: []*corev1.Pod{
			mkPod("ns", "db-0", on("c1"), withLabels("app", "db"), claim("data-db-0")),
			mkPod("ns", "db-1", on("c2"), withLabels("app", "db"), claim("data-db-1")),
		},
		Claims:         []*corev1.PersistentVolumeClaim{mkClaim("ns", "data-db-0", "zonal", "pv-0"), mkClaim("ns", "data-db-1", "zonal", "pv-1")},
		Volumes:        []*corev1.PersistentVolume{mkZonalVolume("pv-0", "c"), mkZonalVolume("pv-1", "c")},
		StorageClasses: []*storagev1.StorageClass{mkClass("zonal", storagev1.VolumeBindingWaitForFirstConsumer)},
	}
}

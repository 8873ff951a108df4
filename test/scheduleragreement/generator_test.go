package scheduleragreement

import (
	"fmt"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/placement-guard/placement-guard/test/localcluster"
)

// scenario is one generated small cluster and the pod to schedule in it.
type scenario struct {
	namespaces []*corev1.Namespace
	nodes      []localcluster.Node
	existing   []*corev1.Pod
	pending    *corev1.Pod
	// leaving are the existing pods being deleted when the pending pod
	// is decided: a finalizer holds them, as a rollout's old pods stay
	// while their containers stop, and the scheduler still counts them.
	leaving []*corev1.Pod
}

// holdFinalizer keeps a leaving pod terminating until the scenario ends.
const holdFinalizer = "placementguard.io/agreement-hold"

var (
	zones = []string{"zone-a", "zone-b", "zone-c"}
	apps  = []string{"web", "db", "cache"}
	keys  = []string{corev1.LabelHostname, corev1.LabelTopologyZone}
)

// generate makes a scenario from a seed: 2 to 8 nodes over up to three
// zones, some cordoned, tainted, small or without a zone; up to 12 pods
// already bound to them, some with required anti-affinity or spreads; and
// one pending pod with any mix of node selector, tolerations, requests,
// anti-affinity, affinity and spreads; then what the scores read (scoring).
func generate(seed int64, prefix string) scenario {
	r := rand.New(rand.NewSource(seed))
	sc := scenario{namespaces: []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-a", Labels: map[string]string{"tier": "front"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-b", Labels: map[string]string{"tier": "back"}}},
	}}
	nNodes := 2 + r.Intn(7)
	for i := range nNodes {
		n := localcluster.Node{Name: fmt.Sprintf("%s-n%d", prefix, i), Labels: map[string]string{}}
		if r.Intn(6) > 0 {
			n.Labels[corev1.LabelTopologyZone] = zones[r.Intn(len(zones))]
		}
		if r.Intn(3) == 0 {
			n.Labels["role"] = "data"
		}
		if r.Intn(8) == 0 {
			n.Unschedulable = true
		}
		if r.Intn(7) == 0 {
			n.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute}[r.Intn(2)]}}
		}
		if r.Intn(4) == 0 {
			n.Allocatable = corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(fmt.Sprint(1 + r.Intn(2))),
				corev1.ResourceMemory: resource.MustParse("4Gi"),
				corev1.ResourcePods:   resource.MustParse(fmt.Sprint(2 + r.Intn(4))),
			}
		}
		sc.nodes = append(sc.nodes, n)
	}
	nPods := r.Intn(13)
	for i := range nPods {
		p := randomPod(r, sc.namespaces, fmt.Sprintf("existing-%d", i))
		p.Spec.NodeName = sc.nodes[r.Intn(len(sc.nodes))].Name
		// A bound pod must tolerate its node's NoExecute taint or the taint
		// manager evicts it, which the scheduler would see and we would not.
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists})
		sc.existing = append(sc.existing, p)
	}
	sc.pending = randomPod(r, sc.namespaces, "pending")
	scoring(seed, &sc)
	leaving(seed, &sc)
	return sc
}

// leaving, in one scenario in three, makes some existing pods terminating
// when the pending pod is decided, from a stream of its own: a rollout's
// first new pods are placed while the old ones they replace are still
// being deleted. The pending pod takes the app of one of them half the
// time, as a new revision's pod shares its old pods' labels.
func leaving(seed int64, sc *scenario) {
	r := rand.New(rand.NewSource(seed*104729 + 3))
	if len(sc.existing) == 0 || r.Intn(3) != 0 {
		return
	}
	for _, p := range sc.existing {
		if r.Intn(2) == 0 {
			p.Finalizers = append(p.Finalizers, holdFinalizer)
			sc.leaving = append(sc.leaving, p)
		}
	}
	if len(sc.leaving) > 0 && r.Intn(2) == 0 {
		old := sc.leaving[r.Intn(len(sc.leaving))]
		if old.Namespace == sc.pending.Namespace {
			sc.pending.Labels["app"] = old.Labels["app"]
		}
	}
}

// scoring varies what the score plugins read, from a stream of its own so
// that the filters' scenarios stay what each seed made them: node sizes,
// PreferNoSchedule taints, and the pending pod's preferences (preferred
// pod terms, a ScheduleAnyway spread, a toleration of the taint).
func scoring(seed int64, sc *scenario) {
	r := rand.New(rand.NewSource(seed*7919 + 1))
	for i := range sc.nodes {
		n := &sc.nodes[i]
		if n.Allocatable == nil && r.Intn(2) == 0 {
			n.Allocatable = corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse([]string{"4", "8", "16"}[r.Intn(3)]),
				corev1.ResourceMemory: resource.MustParse([]string{"8Gi", "16Gi", "64Gi"}[r.Intn(3)]),
				corev1.ResourcePods:   resource.MustParse("110"),
			}
		}
		if r.Intn(3) == 0 {
			n.Taints = append(n.Taints, corev1.Taint{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule})
		}
	}
	p := sc.pending
	if r.Intn(3) == 0 {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule})
	}
	if r.Intn(3) == 0 {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		term := corev1.WeightedPodAffinityTerm{Weight: int32(1 + r.Intn(100)), PodAffinityTerm: corev1.PodAffinityTerm{
			TopologyKey: keys[r.Intn(len(keys))], LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": apps[r.Intn(len(apps))]}}}}
		if r.Intn(2) == 0 {
			p.Spec.Affinity.PodAntiAffinity = orNew(p.Spec.Affinity.PodAntiAffinity)
			p.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{term}
		} else {
			p.Spec.Affinity.PodAffinity = orNew(p.Spec.Affinity.PodAffinity)
			p.Spec.Affinity.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{term}
		}
	}
	if r.Intn(4) == 0 {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: keys[r.Intn(len(keys))], WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}})
	}
}

func orNew[T any](v *T) *T {
	if v == nil {
		return new(T)
	}
	return v
}

func randomPod(r *rand.Rand, namespaces []*corev1.Namespace, name string) *corev1.Pod {
	ns := namespaces[r.Intn(len(namespaces))].Name
	app := apps[r.Intn(len(apps))]
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app, "rel": []string{"blue", "green"}[r.Intn(2)]}},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "main", Image: "registry.invalid/x:1"}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	if r.Intn(3) == 0 {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(fmt.Sprintf("%dm", 250*(1+r.Intn(4)))),
			corev1.ResourceMemory: resource.MustParse("256Mi"),
		}
	}
	if r.Intn(5) == 0 {
		p.Spec.NodeSelector = map[string]string{"role": "data"}
	}
	if r.Intn(5) == 0 {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "x"}}
	}
	term := func() corev1.PodAffinityTerm {
		t := corev1.PodAffinityTerm{TopologyKey: keys[r.Intn(len(keys))],
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": apps[r.Intn(len(apps))]}}}
		switch r.Intn(5) {
		case 0:
			t.Namespaces = []string{namespaces[0].Name, namespaces[1].Name}
		case 1:
			t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "back"}}
		}
		return t
	}
	if r.Intn(3) == 0 {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term()}}}
	}
	if r.Intn(7) == 0 {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term()}}
	}
	if r.Intn(2) == 0 {
		c := corev1.TopologySpreadConstraint{
			MaxSkew: int32(1 + r.Intn(2)), TopologyKey: keys[r.Intn(len(keys))], WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		}
		// minDomains above the number of domains is where the global
		// minimum becomes 0: make it common.
		if r.Intn(3) == 0 {
			c.MinDomains = ptr.To(int32(2 + r.Intn(4)))
		}
		if r.Intn(4) == 0 {
			c.NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore)
		}
		if r.Intn(4) == 0 {
			c.NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor)
		}
		if r.Intn(4) == 0 {
			c.MatchLabelKeys = []string{"rel"}
		}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{c}
	}
	return p
}

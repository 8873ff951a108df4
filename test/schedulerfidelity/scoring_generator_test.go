package schedulerfidelity

import (
	"fmt"
	"math/rand/v2"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// images are the images scoring scenarios' nodes hold and pods run, with
// sizes from below ImageLocality's 23 MiB floor to above its 1000 MiB cap.
var images = []struct {
	name string
	size int64
}{
	{"registry.invalid/web:1", 10 << 20},
	{"registry.invalid/web:2", 300 << 20},
	{"registry.invalid/db:1", 900 << 20},
	{"registry.invalid/cache", 1500 << 20},
	{"docker.io/library/busybox:1.36", 4 << 20},
}

// scoringGen draws one scoring scenario: where the filters pass several
// nodes and the scores decide among them.
type scoringGen struct {
	r  *rand.Rand
	sc *scenario
}

// generateScoring makes a scenario from a seed for the score plugins: 2 to
// 10 nodes of different sizes, some without a zone, holding some images,
// some with PreferNoSchedule taints or labels that preferred node terms
// name; up to 16 pods bound to them, with or without requests, some
// controlled by a ReplicaSet or StatefulSet or selected by a Service, some
// carrying preferred or required pod terms, some terminating; and one
// pending pod with any mix of preferred node and pod terms (both ways),
// ScheduleAnyway spreads, tolerations, images and owners.
func generateScoring(seed uint64) *scenario {
	g := &scoringGen{r: rand.New(rand.NewPCG(seed, 7331)), sc: &scenario{seed: seed}}
	r := g.r
	g.sc.namespaces = []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "ns-a", Labels: map[string]string{"tier": "front"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ns-b", Labels: map[string]string{"tier": "back"}}},
	}
	g.owners()
	for i := range 2 + r.IntN(9) {
		g.sc.nodes = append(g.sc.nodes, g.node(i))
	}
	for i := range r.IntN(17) {
		p := g.pod(fmt.Sprintf("existing-%d", i))
		p.Spec.NodeName = g.sc.nodes[r.IntN(len(g.sc.nodes))].Name
		p.Status.Phase = corev1.PodRunning
		if r.IntN(12) == 0 {
			p.DeletionTimestamp = ptr.To(metav1.Now())
		}
		g.sc.existing = append(g.sc.existing, p)
	}
	g.sc.pending = g.pod("pending")
	g.pendingTerms(g.sc.pending)
	g.claims(seed)
	g.podLevel(seed)
	for _, p := range append(g.sc.existing, g.sc.pending) {
		admit(p)
	}
	return g.sc
}

// owners are the Services, ReplicaSets and StatefulSets the system default
// spread reads, in both namespaces.
func (g *scoringGen) owners() {
	for _, ns := range []string{"ns-a", "ns-b"} {
		for _, app := range apps {
			if g.r.IntN(2) == 0 {
				g.sc.services = append(g.sc.services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
					Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app}}})
			}
			g.sc.replicaSets = append(g.sc.replicaSets, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app + "-rs", UID: types.UID(ns + "-" + app + "-rs")},
				Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app, "rel": "blue"}}}})
			g.sc.statefulSets = append(g.sc.statefulSets, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app + "-ss", UID: types.UID(ns + "-" + app + "-ss")},
				Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}})
		}
	}
}

func (g *scoringGen) node(i int) *corev1.Node {
	r := g.r
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), UID: types.UID(fmt.Sprintf("node-%d", i)),
		Labels: map[string]string{corev1.LabelHostname: fmt.Sprintf("n%d", i)}}}
	if r.IntN(5) > 0 {
		n.Labels[corev1.LabelTopologyZone] = zones[r.IntN(len(zones))]
	}
	if r.IntN(3) == 0 {
		n.Labels["disk"] = []string{"ssd", "hdd"}[r.IntN(2)]
	}
	if r.IntN(4) == 0 {
		n.Labels["gen"] = fmt.Sprint(1 + r.IntN(3))
	}
	if r.IntN(4) == 0 {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule})
	}
	if r.IntN(8) == 0 {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "old", Effect: corev1.TaintEffectPreferNoSchedule})
	}
	cpus := []string{"1", "2", "4", "8", "16", "3500m"}[r.IntN(6)]
	mem := []string{"2Gi", "4Gi", "8Gi", "16Gi", "64Gi", "6000Mi"}[r.IntN(6)]
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpus), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110"),
	}
	if r.IntN(6) == 0 {
		n.Status.Allocatable[corev1.ResourceEphemeralStorage] = resource.MustParse([]string{"10Gi", "100Gi"}[r.IntN(2)])
	}
	n.Status.Capacity = n.Status.Allocatable
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, img := range images {
		if r.IntN(3) == 0 {
			names := []string{img.name}
			if r.IntN(4) == 0 {
				names = append(names, img.name+"-alias")
			}
			n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: names, SizeBytes: img.size})
		}
	}
	return n
}

func (g *scoringGen) pod(name string) *corev1.Pod {
	r := g.r
	ns := []string{"ns-a", "ns-b"}[r.IntN(2)]
	app := apps[r.IntN(len(apps))]
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
			Labels: map[string]string{"app": app, "rel": []string{"blue", "green"}[r.IntN(2)]}},
	}
	for c := range 1 + r.IntN(2) {
		img := images[r.IntN(len(images))].name
		if r.IntN(4) == 0 {
			img = "registry.invalid/unknown:" + fmt.Sprint(c)
		}
		ctr := corev1.Container{Name: fmt.Sprintf("c%d", c), Image: img}
		switch r.IntN(4) {
		case 0:
		case 1:
			ctr.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 100*(1+r.IntN(15))))}
		default:
			ctr.Resources.Requests = corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(fmt.Sprintf("%dm", 50*(1+r.IntN(30)))),
				corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", 64*(1+r.IntN(40)))),
			}
			if r.IntN(8) == 0 {
				ctr.Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
			}
		}
		p.Spec.Containers = append(p.Spec.Containers, ctr)
	}
	if r.IntN(10) == 0 {
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: images[r.IntN(len(images))].name,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}
	}
	if r.IntN(10) == 0 {
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("120m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	}
	switch r.IntN(4) {
	case 0:
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-rs", UID: types.UID(ns + "-" + app + "-rs"), Controller: ptr.To(true)}}
	case 1:
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: app + "-ss", UID: types.UID(ns + "-" + app + "-ss"), Controller: ptr.To(true)}}
	}
	if r.IntN(3) == 0 {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists,
			Effect: []corev1.TaintEffect{corev1.TaintEffectPreferNoSchedule, ""}[r.IntN(2)]})
	}
	if r.IntN(4) == 0 {
		g.podTerms(p, true)
	}
	return p
}

// pendingTerms gives the pending pod its preferences.
func (g *scoringGen) pendingTerms(p *corev1.Pod) {
	r := g.r
	if r.IntN(3) == 0 {
		var prefs []corev1.PreferredSchedulingTerm
		for range 1 + r.IntN(2) {
			req := []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}}
			if r.IntN(2) == 0 {
				req = []corev1.NodeSelectorRequirement{{Key: "gen", Operator: corev1.NodeSelectorOpGt, Values: []string{"1"}}}
			}
			prefs = append(prefs, corev1.PreferredSchedulingTerm{Weight: int32(1 + r.IntN(100)), Preference: corev1.NodeSelectorTerm{MatchExpressions: req}})
		}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: prefs}}
	}
	if r.IntN(2) == 0 {
		g.podTerms(p, false)
	}
	if r.IntN(2) == 0 {
		for range 1 + r.IntN(2) {
			c := corev1.TopologySpreadConstraint{MaxSkew: int32(1 + r.IntN(3)), TopologyKey: keys[r.IntN(len(keys))],
				WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}}
			if r.IntN(4) == 0 {
				c.MatchLabelKeys = []string{"rel"}
			}
			if r.IntN(5) == 0 {
				c.NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor)
			}
			p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
		}
	}
	if r.IntN(6) == 0 {
		p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	}
}

// podTerms gives p preferred pod affinity or anti-affinity terms (and, for
// an existing pod, sometimes a required affinity term).
func (g *scoringGen) podTerms(p *corev1.Pod, existing bool) {
	r := g.r
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	term := func() corev1.PodAffinityTerm {
		t := corev1.PodAffinityTerm{TopologyKey: keys[r.IntN(len(keys))],
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": apps[r.IntN(len(apps))]}}}
		switch r.IntN(5) {
		case 0:
			t.NamespaceSelector = &metav1.LabelSelector{}
		case 1:
			t.Namespaces = []string{"ns-a", "ns-b"}
		case 2:
			t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "back"}}
		}
		return t
	}
	weighted := func() []corev1.WeightedPodAffinityTerm {
		var out []corev1.WeightedPodAffinityTerm
		for range 1 + r.IntN(2) {
			out = append(out, corev1.WeightedPodAffinityTerm{Weight: int32(1 + r.IntN(100)), PodAffinityTerm: term()})
		}
		return out
	}
	if r.IntN(2) == 0 {
		p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: weighted()}
	}
	if r.IntN(2) == 0 {
		p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: weighted()}
	}
	if existing && r.IntN(3) == 0 {
		if p.Spec.Affinity.PodAffinity == nil {
			p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{}
		}
		// Required of the existing pod: its own app, which it holds itself.
		t := term()
		t.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}
		t.Namespaces, t.NamespaceSelector = nil, nil
		p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = []corev1.PodAffinityTerm{t}
	}
}

// claims gives a third of the pending pods a WaitForFirstConsumer claim:
// of a class of static local volumes of several sizes on some nodes, or
// of a class a driver provisions in zones a and b, reporting per zone a
// capacity of 5 to 40 GiB; VolumeBinding then scores the nodes by how
// full the volume would be. It draws from a stream of its own, so that
// the rest of each scenario stays what the seed made it before.
func (g *scoringGen) claims(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 9999))
	if r.IntN(3) > 0 {
		return
	}
	f := &gen{r: r, sc: g.sc}
	f.storage()
	sizes := []string{"5Gi", "8Gi", "10Gi", "20Gi", "40Gi"}
	for _, n := range g.sc.nodes {
		if r.IntN(2) == 0 {
			v := f.localVolume(n)
			v.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse(sizes[r.IntN(len(sizes))])
			g.sc.volumes = append(g.sc.volumes, v)
		}
	}
	g.sc.csiDrivers = []*storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: csiDriver},
		Spec: storagev1.CSIDriverSpec{StorageCapacity: ptr.To(true)}}}
	for _, z := range []string{"zone-a", "zone-b"} {
		g.sc.capacities = append(g.sc.capacities, &storagev1.CSIStorageCapacity{
			ObjectMeta:       metav1.ObjectMeta{Namespace: "kube-system", Name: "capacity-" + z},
			StorageClassName: classZonal,
			Capacity:         ptr.To(resource.MustParse(sizes[r.IntN(len(sizes))])),
			NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelTopologyZone: z}},
		})
	}
	p := g.sc.pending
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name + "-data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse([]string{"2Gi", "5Gi"}[r.IntN(2)])}},
			StorageClassName: ptr.To([]string{classLocal, classZonal}[r.IntN(2)]),
		},
	}
	g.sc.claims = append(g.sc.claims, c)
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name}}})
}

// podLevel gives some pods pod-level requests, which NodeResourcesFit's
// score of the incoming pod does not read in 1.37 while the nodes' sums
// and BalancedAllocation do. A stream of its own, as claims.
func (g *scoringGen) podLevel(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 4321))
	for _, p := range append(g.sc.existing, g.sc.pending) {
		if r.IntN(8) == 0 {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 500*(1+r.IntN(4))))}}
		}
	}
}

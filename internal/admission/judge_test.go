package admission

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

func node(name string, labels map[string]string) *corev1.Node {
	l := map[string]string{corev1.LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Status: corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}}
}

func runningPod(name, nodeName string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(name), Labels: labels},
		Spec:   corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

func deployment(name string, replicas int32, mutate ...func(*appsv1.Deployment)) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x:1"}}}},
	}}
	for _, m := range mutate {
		m(d)
	}
	return d
}

func requiredApart(labels map[string]string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}}}}
	}
}

// withPods is the workload of d running the given pods.
func withPods(d *appsv1.Deployment, pods ...*corev1.Pod) *placement.Workload {
	w := targets.FromDeployment(d, nil, nil)
	for _, p := range pods {
		w.Pods = append(w.Pods, p.UID)
	}
	w.Revision = "old"
	return w
}

// changeOf is a create of d, running pods: a change judged alone, with
// no migration and no disruption policy in its namespace.
func changeOf(d *appsv1.Deployment, pods ...*corev1.Pod) planning.Change {
	t := targets.Build(d, nil, nil)
	t.Workload, t.Pods = withPods(d, pods...), pods
	return planning.Change{Target: t}
}

// hardWith is web with its required anti-affinity and mutate's change to
// its pod spec.
func hardWith(mutate func(*corev1.PodSpec)) *placement.Workload {
	return withPods(deployment("web", 2, requiredApart(map[string]string{"app": "web"}), func(d *appsv1.Deployment) { mutate(&d.Spec.Template.Spec) }))
}

func TestRelevantChanges(t *testing.T) {
	plain := withPods(deployment("web", 2))
	apart := withPods(deployment("web", 2, requiredApart(map[string]string{"app": "web"})))
	image := withPods(deployment("web", 2, requiredApart(map[string]string{"app": "web"}), func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "x:2" }))
	scaled := withPods(deployment("web", 3, requiredApart(map[string]string{"app": "web"})))
	plainScaled := withPods(deployment("web", 3))
	soft := withPods(deployment("web", 2, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}}
	}))
	strategy := withPods(deployment("web", 2, requiredApart(map[string]string{"app": "web"}), func(d *appsv1.Deployment) {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	}))
	for _, c := range []struct {
		name     string
		old, new *placement.Workload
		want     bool
	}{
		{"a create without a hard constraint", nil, plain, false},
		{"a create with one", nil, apart, true},
		{"a required anti-affinity added", plain, apart, true},
		{"an image changed beside it", apart, image, false},
		{"a scale of a workload that carries one", apart, scaled, true},
		{"a scale of one that carries none", plain, plainScaled, false},
		{"a strategy changed beside it", apart, strategy, true},
		{"a preferred term added", plain, soft, false},
		{"the hard constraint removed", apart, plain, false},
		{"moved to another pool beside it", apart, hardWith(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"pool": "b"} }), true},
		{"node affinity beside it", apart, hardWith(func(s *corev1.PodSpec) {
			s.Affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}
		}), true},
		{"a toleration dropped beside it", hardWith(func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}), apart, true},
		{"requests raised beside it", apart, hardWith(func(s *corev1.PodSpec) {
			s.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}
		}), true},
		{"an init container's limits beside it", apart, hardWith(func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
		}), true},
		{"a priority class beside it", apart, hardWith(func(s *corev1.PodSpec) { s.PriorityClassName = "high" }), true},
		{"a required pod affinity beside it", apart, hardWith(func(s *corev1.PodSpec) {
			s.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}}}}
		}), true},
		{"a host port beside it", apart, hardWith(func(s *corev1.PodSpec) {
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}), true},
		{"a container port that binds no host port beside it", apart, hardWith(func(s *corev1.PodSpec) { s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}} }), false},
		{"the host network beside it", apart, hardWith(func(s *corev1.PodSpec) { s.HostNetwork = true }), true},
		{"a claim beside it", apart, hardWith(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		}), true},
		{"a config map beside it", apart, hardWith(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}
		}), false},
		{"a runtime class beside it", apart, hardWith(func(s *corev1.PodSpec) { s.RuntimeClassName = ptr.To("gvisor") }), true},
		{"a scheduling gate beside it", apart, hardWith(func(s *corev1.PodSpec) { s.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}} }), true},
		{"a node name beside it", apart, hardWith(func(s *corev1.PodSpec) { s.NodeName = "n1" }), true},
		{"a template label beside it", apart, withPods(deployment("web", 2, requiredApart(map[string]string{"app": "web"}), func(d *appsv1.Deployment) {
			d.Spec.Template.Labels = map[string]string{"app": "web", "tier": "db"}
		})), true},
		{"requests raised without a hard constraint", plain, withPods(deployment("web", 2, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}
		})), false},
	} {
		if got := Relevant(c.old, c.new); got != c.want {
			t.Errorf("%s: Relevant = %v, want %v", c.name, got, c.want)
		}
	}
}

// Seed 000's change applied straight to the graph DB: a required
// anti-affinity against the search engine with one data node.
func TestJudgeSeed000NamesTheQualifyingNodes(t *testing.T) {
	search := runningPod("search-0", "data-1", map[string]string{"app": "search"})
	graph := runningPod("graphdb-0", "data-1", map[string]string{"app": "graphdb"})
	snap, err := placement.NewSnapshot(placement.Objects{
		Nodes: []*corev1.Node{node("data-1", map[string]string{"role": "data"}), node("app-1", map[string]string{"role": "app"})},
		Pods:  []*corev1.Pod{search, graph},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := deployment("graphdb", 1, requiredApart(map[string]string{"app": "search"}), func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeSelector = map[string]string{"role": "data"}
	})
	fs, err := Judge(snap, changeOf(d, graph))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) == 0 || !fs[0].Blocking {
		t.Fatalf("seed 000 must be a blocking finding: %+v", fs)
	}
	if !strings.Contains(fs[0].Message, "1 of 2 qualifying nodes") {
		t.Fatalf("the warning counts the qualifying nodes: %q", fs[0].Message)
	}
	if !strings.HasPrefix(fs[0].Message, "Deployment/graphdb: required anti-affinity on kubernetes.io/hostname") || !strings.Contains(fs[0].Message, "Fix:") {
		t.Fatalf("the warning names the workload, the constraint and the fix: %q", fs[0].Message)
	}
}

// Seed 001's shape: two replicas on two nodes, maxSurge 1, maxUnavailable
// 0, a required hostname anti-affinity against each other.
func TestJudgeSeed001NamesTheDeadlockAndItsFix(t *testing.T) {
	a, b := runningPod("web-a", "n1", map[string]string{"app": "web"}), runningPod("web-b", "n2", map[string]string{"app": "web"})
	snap, err := placement.NewSnapshot(placement.Objects{Nodes: []*corev1.Node{node("n1", nil), node("n2", nil)}, Pods: []*corev1.Pod{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	d := deployment("web", 2, requiredApart(map[string]string{"app": "web"}), func(d *appsv1.Deployment) {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
	})
	fs, err := Judge(snap, changeOf(d, a, b))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) == 0 || fs[0].Type != placement.HazardRolloutDeadlock || !fs[0].Blocking || !strings.Contains(fs[0].Message, "maxUnavailable: 1") {
		t.Fatalf("want a blocking RolloutDeadlock naming maxUnavailable: 1, got %+v", fs)
	}

	// Three nodes: room for the surge pod, nothing to say.
	snap.UpsertNode(node("n3", nil))
	fs, err = Judge(snap, changeOf(d, a, b))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 0 {
		t.Fatalf("a change that fits is admitted silently: %+v", fs)
	}
}

// Every warning fits the API server's 256 characters, and all of them its
// 4 KiB, however many there are.
func TestWarningsStayWithinTheAPIServersBounds(t *testing.T) {
	var fs []Finding
	for i := range 60 {
		fs = append(fs, Finding{Type: "X", Blocking: i%2 == 0, Message: word("Deployment/web", placement.Constraint{AntiAffinity: &placement.AntiAffinity{TopologyKey: corev1.LabelHostname}},
			placement.Hazard{Type: placement.HazardRolloutDeadlock, Message: strings.Repeat(fmt.Sprintf("finding %d is long ", i), 40)})})
	}
	ws := Warnings(fs)
	total := 0
	for _, w := range ws {
		if n := utf8.RuneCountInString(w); n > maxWarning {
			t.Fatalf("a warning of %d characters: %q", n, w)
		}
		total += len(w)
	}
	if total > maxWarnings {
		t.Fatalf("%d bytes of warnings", total)
	}
	if !strings.Contains(ws[len(ws)-1], "more finding(s) left out") {
		t.Fatalf("the cut is said: %q", ws[len(ws)-1])
	}
}

// What a change adds to what was wrong with a workload already.
func TestWorse(t *testing.T) {
	apart := "required anti-affinity on kubernetes.io/hostname"
	zones := "DoNotSchedule spread on topology.kubernetes.io/zone"
	// Two anti-affinity terms on the same key, of other selectors: other
	// constraints, though their short names are the same.
	rates, others := `{"AntiAffinity":{"TopologyKey":"kubernetes.io/hostname","Selector":{"matchLabels":{"app":"rates"}}}}`,
		`{"AntiAffinity":{"TopologyKey":"kubernetes.io/hostname","Selector":{"matchLabels":{"team":"payments"}}}}`
	f := func(c, key, typ string) Finding { return Finding{Constraint: c, Key: key, Type: typ, Blocking: true} }
	j := func(unplaced int, fs ...Finding) Judgement { return Judgement{Findings: fs, Unplaced: unplaced} }
	for _, c := range []struct {
		name          string
		before, after Judgement
		adds          bool
		worse         int
	}{
		{"the same hazard of the same constraint", j(0, f(apart, rates, placement.HazardRolloutDeadlock)), j(0, f(apart, rates, placement.HazardRolloutDeadlock)), false, 0},
		{"a hazard new to it", j(0), j(0, f(apart, rates, placement.HazardRolloutDeadlock)), false, 1},
		{"the same hazard of another constraint", j(0, f(zones, "zones", placement.HazardRolloutDeadlock)), j(0, f(apart, rates, placement.HazardRolloutDeadlock)), false, 1},
		{"the same hazard of a constraint on the same key with another selector", j(0, f(apart, rates, placement.HazardRolloutDeadlock)),
			j(0, f(apart, others, placement.HazardRolloutDeadlock)), false, 1},
		{"pods that could not be placed before account for any hazard of it after", j(47, f(apart, rates, placement.HazardInsufficientCapacity)),
			j(47, f(apart, rates, placement.HazardRolloutDeadlock)), false, 0},
		{"moved where fewer of its pods fit: worse, though its findings are the same", j(47, f(apart, rates, placement.HazardInsufficientCapacity)),
			j(48, f(apart, rates, placement.HazardInsufficientCapacity)), false, 1},
		{"moved where more of its pods fit", j(48, f(apart, rates, placement.HazardInsufficientCapacity)),
			j(47, f(apart, rates, placement.HazardInsufficientCapacity)), false, 0},
		{"more replicas of a workload with a blocking finding", j(0, f(apart, rates, placement.HazardInsufficientCapacity)),
			j(0, f(apart, rates, placement.HazardInsufficientCapacity)), true, 1},
		{"a finding that does not block", j(0), j(3, Finding{Constraint: apart, Key: rates, Type: placement.HazardSpreadEndsSkewed}), true, 0},
	} {
		if got := Worse(c.before, c.after, c.adds); len(got) != c.worse {
			t.Errorf("%s: %d worse, want %d", c.name, len(got), c.worse)
		}
	}
}

// A fix is worded for the workload's kind, by the engine: a spread whose
// selector counts another workload's pods is told to scope it with
// pod-template-hash on a Deployment, whose pods carry that label, and
// with a label of its own on a StatefulSet, whose pods never do.
func TestFixesAreWordedForTheKind(t *testing.T) {
	zone := func(name, z string) *corev1.Node { return node(name, map[string]string{corev1.LabelTopologyZone: z}) }
	data := map[string]string{"tier": "data"}
	legacy := runningPod("legacy-0", "a1", map[string]string{"tier": "data", "app": "legacy"})
	snap, err := placement.NewSnapshot(placement.Objects{Nodes: []*corev1.Node{zone("a1", "a"), zone("b1", "b"), zone("c1", "c")}, Pods: []*corev1.Pod{legacy}})
	if err != nil {
		t.Fatal(err)
	}
	spread := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: data}}}
	labels := map[string]string{"app": "db", "tier": "data"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "x"}}, TopologySpreadConstraints: spread}}}}
	dep := deployment("db", 3, func(d *appsv1.Deployment) {
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
		d.Spec.Template.Labels = labels
		d.Spec.Template.Spec.TopologySpreadConstraints = spread
	})
	for _, c := range []struct {
		obj       interface{ GetName() string }
		want, not string
	}{
		{sts, "add a label that tells the releases apart", "pod-template-hash"},
		{dep, "pod-template-hash", "tells the releases apart"},
	} {
		var ch planning.Change
		switch o := c.obj.(type) {
		case *appsv1.StatefulSet:
			ch = planning.Change{Target: targets.Build(o, nil, nil)}
		case *appsv1.Deployment:
			ch = changeOf(o)
		}
		fs, err := Judge(snap, ch)
		if err != nil {
			t.Fatal(err)
		}
		var overlap *Finding
		for i := range fs {
			if fs[i].Type == placement.HazardSelectorOverlap {
				overlap = &fs[i]
			}
		}
		if overlap == nil {
			t.Fatalf("%T: no SelectorOverlap in %+v", c.obj, fs)
		}
		fix := overlap.Message[strings.Index(overlap.Message, "Fix: "):]
		if !strings.Contains(fix, c.want) || strings.Contains(fix, c.not) {
			t.Errorf("%T: %q, want it to say %q and not %q", c.obj, fix, c.want, c.not)
		}
	}
}

// A change to pods that name a scheduler the check has no profile of is
// judged all the same, with the fallback profile, and told so: naming a
// scheduler neither walks around Deny nor is refused for itself.
func TestJudgeAChangeOfPodsNamingAnUnknownScheduler(t *testing.T) {
	a, b := runningPod("web-a", "n1", map[string]string{"app": "web"}), runningPod("web-b", "n2", map[string]string{"app": "web"})
	snap, err := placement.NewSnapshot(placement.Objects{Nodes: []*corev1.Node{node("n1", nil), node("n2", nil)}, Pods: []*corev1.Pod{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	named := func(d *appsv1.Deployment) { d.Spec.Template.Spec.SchedulerName = "nobody" }
	deadlock := deployment("web", 2, requiredApart(map[string]string{"app": "web"}), named, func(d *appsv1.Deployment) {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
	})
	fs, err := Judge(snap, changeOf(deadlock, a, b))
	if err != nil {
		t.Fatal(err)
	}
	blockingOf := map[string]bool{}
	for _, f := range fs {
		blockingOf[f.Type] = f.Blocking
		if f.Type == placement.HazardUnknownScheduler && !strings.Contains(f.Message, `"nobody"`) {
			t.Errorf("the note names the scheduler: %q", f.Message)
		}
	}
	if blocking, ok := blockingOf[placement.HazardUnknownScheduler]; !ok || blocking {
		t.Errorf("want a note, not a stop, of the unknown scheduler: %+v", fs)
	}
	if !blockingOf[placement.HazardRolloutDeadlock] {
		t.Errorf("the deadlock is judged with the fallback profile all the same: %+v", fs)
	}
}

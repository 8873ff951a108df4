package placement

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// oracle decides where a pod may go by brute force, straight from the
// scheduler's definitions: for every node it scans every pod. It shares
// only the parsing of terms and the node-local filters with the engine, so
// it checks the engine's indexes and incremental counts.
func oracle(objs Objects, pod *corev1.Pod) ([]string, map[string]int) {
	nsLabels := map[string]labels.Set{}
	for _, ns := range objs.Namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	nodeByName := map[string]*corev1.Node{}
	for _, n := range objs.Nodes {
		nodeByName[n.Name] = n
	}
	// Only pods bound to a node that exists, and not finished, are on a node.
	var bound []*corev1.Pod
	podsOn := map[string][]*corev1.Pod{}
	for _, p := range objs.Pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, ok := nodeByName[p.Spec.NodeName]; ok {
			bound = append(bound, p)
			podsOn[p.Spec.NodeName] = append(podsOn[p.Spec.NodeName], p)
		}
	}
	aff := nodeaffinity.GetRequiredNodeAffinity(pod)
	anti, _ := requiredAntiAffinityTerms(pod)
	affTerms, _ := requiredAffinityTerms(pod)
	spreads, _ := hardSpreadConstraints(pod)
	req := podRequests(pod)

	termSelects := func(t affinityTerm, p *corev1.Pod) bool {
		return (t.namespaces.Has(p.Namespace) || t.nsSelector.Matches(nsLabels[p.Namespace])) && t.selector.Matches(labels.Set(p.Labels))
	}
	sameDomain := func(key string, a, b *corev1.Node) bool {
		va, oka := a.Labels[key]
		vb, okb := b.Labels[key]
		return oka && okb && va == vb
	}
	// A pod counts towards required affinity only if it matches every term,
	// and only where its node carries the term's key.
	matchesAll := func(p *corev1.Pod) bool {
		for _, t := range affTerms {
			if !termSelects(t, p) {
				return false
			}
		}
		return len(affTerms) > 0
	}
	anyAffinityMatch := false
	for _, p := range bound {
		if matchesAll(p) {
			for _, t := range affTerms {
				if _, ok := nodeByName[p.Spec.NodeName].Labels[t.topologyKey]; ok {
					anyAffinityMatch = true
				}
			}
		}
	}
	selfAffinity := true
	for _, t := range affTerms {
		if !termSelects(t, pod) {
			selfAffinity = false
		}
	}

	var fits []string
	reasons := map[string]int{}
	for _, node := range objs.Nodes {
		reject := func(r ...string) {
			for _, x := range r {
				reasons[x]++
			}
		}
		if r := nodeFilter(DefaultProfile(), pod, aff, node); r != "" {
			reject(r)
			continue
		}
		var requested resources
		for _, p := range podsOn[node.Name] {
			requested.add(podRequests(p))
		}
		if r := insufficient(req, requested, resourcesFrom(node.Status.Allocatable), node.Status.Allocatable.Pods().Value(), int64(len(podsOn[node.Name]))); len(r) > 0 {
			reject(r...)
			continue
		}
		if r := oracleSpread(objs.Nodes, podsOn, pod, aff, spreads, node); r != "" {
			reject(r)
			continue
		}
		// Incoming affinity.
		affOK := true
		if len(affTerms) > 0 {
			exist := true
			for _, t := range affTerms {
				if _, ok := node.Labels[t.topologyKey]; !ok {
					affOK = false
					break
				}
				found := false
				for _, p := range bound {
					if matchesAll(p) && sameDomain(t.topologyKey, nodeByName[p.Spec.NodeName], node) {
						found = true
					}
				}
				if !found {
					exist = false
				}
			}
			if affOK && !exist && !(!anyAffinityMatch && selfAffinity) {
				affOK = false
			}
		}
		if !affOK {
			reject(ReasonAffinity)
			continue
		}
		antiOK := true
		for _, t := range anti {
			for _, p := range bound {
				if termSelects(t, p) && sameDomain(t.topologyKey, nodeByName[p.Spec.NodeName], node) {
					antiOK = false
				}
			}
		}
		if !antiOK {
			reject(ReasonAntiAffinity)
			continue
		}
		existingOK := true
		for _, p := range bound {
			terms, _ := requiredAntiAffinityTerms(p)
			for _, t := range terms {
				if termSelects(t, pod) && sameDomain(t.topologyKey, nodeByName[p.Spec.NodeName], node) {
					existingOK = false
				}
			}
		}
		if !existingOK {
			reject(ReasonExistingAntiAffinity)
			continue
		}
		fits = append(fits, node.Name)
	}
	sort.Strings(fits)
	return fits, reasons
}

func oracleSpread(nodes []*corev1.Node, podsOn map[string][]*corev1.Pod, pod *corev1.Pod, aff nodeaffinity.RequiredNodeAffinity, spreads []spreadConstraint, node *corev1.Node) string {
	for _, c := range spreads {
		value, ok := node.Labels[c.topologyKey]
		if !ok {
			return ReasonSpreadMissingLabel
		}
		counts := map[string]int{}
		for _, n := range nodes {
			hasAll := true
			for _, c2 := range spreads {
				if _, ok := n.Labels[c2.topologyKey]; !ok {
					hasAll = false
				}
			}
			if !hasAll {
				continue
			}
			if m, _ := aff.Match(n); c.nodeAffinityPolicy == corev1.NodeInclusionPolicyHonor && !m {
				continue
			}
			if c.nodeTaintsPolicy == corev1.NodeInclusionPolicyHonor && !toleratesAll(pod, n) {
				continue
			}
			v := n.Labels[c.topologyKey]
			counts[v] += 0
			if c.selector.Empty() {
				continue
			}
			for _, p := range podsOn[n.Name] {
				if p.Namespace == pod.Namespace && p.DeletionTimestamp == nil && c.selector.Matches(labels.Set(p.Labels)) {
					counts[v]++
				}
			}
		}
		minMatch := 0
		if len(counts) >= c.minDomains {
			first := true
			for _, n := range counts {
				if first || n < minMatch {
					minMatch, first = n, false
				}
			}
		}
		self := 0
		if c.selector.Matches(labels.Set(pod.Labels)) {
			self = 1
		}
		if counts[value]+self-minMatch > c.maxSkew {
			return ReasonSpread
		}
	}
	return ""
}

// randomCluster makes a small cluster from a seed: up to 12 nodes in up to
// three zones, some cordoned, tainted or small, and pods of three apps in two
// namespaces, some with anti-affinity, some terminating, some pending.
func randomCluster(r *rand.Rand) Objects {
	var o Objects
	o.Namespaces = []*corev1.Namespace{mkNamespace("ns1", "tier", "front"), mkNamespace("ns2", "tier", "back")}
	zones := []string{"a", "b", "c"}
	nNodes := 1 + r.Intn(12)
	for i := range nNodes {
		var opts []nodeOpt
		if r.Intn(8) > 0 {
			opts = append(opts, zone(zones[r.Intn(len(zones))]))
		}
		if r.Intn(10) == 0 {
			opts = append(opts, cordoned())
		}
		if r.Intn(8) == 0 {
			opts = append(opts, taint("dedicated", "x", corev1.TaintEffectNoSchedule))
		}
		if r.Intn(4) == 0 {
			opts = append(opts, label("role", "data"))
		}
		if r.Intn(6) == 0 {
			opts = append(opts, alloc("1", "1Gi", fmt.Sprint(2+r.Intn(3))))
		}
		if r.Intn(15) == 0 {
			opts = append(opts, noLabel(corev1.LabelHostname))
		}
		o.Nodes = append(o.Nodes, mkNode(fmt.Sprintf("n%02d", i), opts...))
	}
	nPods := r.Intn(30)
	for i := range nPods {
		o.Pods = append(o.Pods, randomPod(r, fmt.Sprintf("p%02d", i), o.Nodes, true))
	}
	return o
}

var apps = []string{"web", "db", "cache"}

func randomPod(r *rand.Rand, name string, nodes []*corev1.Node, mayBind bool) *corev1.Pod {
	ns := []string{"ns1", "ns2"}[r.Intn(2)]
	app := apps[r.Intn(len(apps))]
	opts := []podOpt{withLabels("app", app, "rel", []string{"blue", "green"}[r.Intn(2)])}
	if mayBind && r.Intn(6) > 0 {
		opts = append(opts, on(nodes[r.Intn(len(nodes))].Name))
	}
	if r.Intn(3) == 0 {
		opts = append(opts, requests(fmt.Sprintf("%dm", 100*(1+r.Intn(6))), "128Mi"))
	}
	if r.Intn(10) == 0 {
		opts = append(opts, terminating())
	}
	if r.Intn(6) == 0 {
		opts = append(opts, tolerate("dedicated", corev1.TaintEffectNoSchedule))
	}
	if r.Intn(6) == 0 {
		opts = append(opts, nodeSelector("role", "data"))
	}
	keys := []string{corev1.LabelHostname, corev1.LabelTopologyZone}
	randTerm := func() corev1.PodAffinityTerm {
		var mods []func(*corev1.PodAffinityTerm)
		switch r.Intn(5) {
		case 0:
			mods = append(mods, inNamespaces("ns1", "ns2"))
		case 1:
			mods = append(mods, nsSelector("tier", "back"))
		}
		return term(keys[r.Intn(2)], map[string]string{"app": apps[r.Intn(len(apps))]}, mods...)
	}
	if r.Intn(3) == 0 {
		opts = append(opts, antiAffinity(randTerm()))
	}
	if r.Intn(8) == 0 {
		opts = append(opts, podAffinity(randTerm()))
	}
	if r.Intn(3) == 0 {
		var sopts []spreadOpt
		if r.Intn(4) == 0 {
			sopts = append(sopts, minDomains(int32(1+r.Intn(4))))
		}
		if r.Intn(4) == 0 {
			sopts = append(sopts, affinityPolicy(corev1.NodeInclusionPolicyIgnore))
		}
		if r.Intn(4) == 0 {
			sopts = append(sopts, taintsPolicy(corev1.NodeInclusionPolicyHonor))
		}
		if r.Intn(4) == 0 {
			sopts = append(sopts, matchLabelKeys("rel"))
		}
		opts = append(opts, spread(keys[r.Intn(2)], int32(1+r.Intn(2)), map[string]string{"app": app}, sopts...))
	}
	return mkPod(ns, name, opts...)
}

// compareWithOracle checks the engine against the oracle for a pod.
func compareWithOracle(t *testing.T, seed int64, objs Objects, s *Snapshot, pod *corev1.Pod) {
	t.Helper()
	v, err := s.Schedule(pod)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	want, wantReasons := oracle(objs, pod)
	if !slices.Equal(v.Nodes, want) {
		t.Fatalf("seed %d: engine allows %v, oracle %v (engine reasons %v, oracle reasons %v)", seed, v.Nodes, want, v.Reasons, wantReasons)
	}
	for r, n := range wantReasons {
		if v.Reasons[r] != n {
			t.Fatalf("seed %d: reasons differ: engine %v, oracle %v", seed, v.Reasons, wantReasons)
		}
	}
}

// checkSeed builds the snapshot of a random cluster incrementally, in a
// shuffled order with deletions and re-additions, and compares its answers
// with the oracle's on the final objects.
func checkSeed(t *testing.T, seed int64) {
	r := rand.New(rand.NewSource(seed))
	objs := randomCluster(r)
	s, err := NewSnapshot(Objects{Namespaces: objs.Namespaces})
	if err != nil {
		t.Fatal(err)
	}
	// Pods may arrive before their nodes, nodes may go and come back.
	order := r.Perm(len(objs.Nodes) + len(objs.Pods))
	for _, k := range order {
		if k < len(objs.Nodes) {
			s.UpsertNode(objs.Nodes[k])
		} else {
			p := objs.Pods[k-len(objs.Nodes)]
			// A pod is often seen first as an earlier version of itself.
			if earlier := earlierVersion(r, p, objs.Nodes); earlier != nil {
				if err := s.UpsertPod(earlier); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.UpsertPod(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(objs.Nodes) > 1 && r.Intn(2) == 0 {
		n := objs.Nodes[r.Intn(len(objs.Nodes))]
		s.DeleteNode(n.Name)
		s.UpsertNode(n)
	}
	if len(objs.Nodes) > 0 && r.Intn(2) == 0 {
		// A node seen with other labels while answers were given: what
		// the snapshot cached of its labels must not outlive them.
		n := objs.Nodes[r.Intn(len(objs.Nodes))]
		relabelled := n.DeepCopy()
		relabelled.Labels = map[string]string{corev1.LabelHostname: n.Name + "-before"}
		s.UpsertNode(relabelled)
		if _, err := s.Schedule(randomPod(r, "warm-up", objs.Nodes, false)); err != nil {
			t.Fatal(err)
		}
		s.UpsertNode(n)
	}
	incoming := make([]*corev1.Pod, 3)
	for i := range incoming {
		incoming[i] = randomPod(r, fmt.Sprintf("incoming-%d", i), objs.Nodes, false)
	}
	if len(objs.Nodes) > 0 && r.Intn(2) == 0 {
		// A node seen cordoned or uncordoned, and tainted, while the same
		// pods were asked about: the node filters the snapshot keeps per
		// template must not outlive it.
		n := objs.Nodes[r.Intn(len(objs.Nodes))]
		changed := n.DeepCopy()
		changed.Spec.Unschedulable = !n.Spec.Unschedulable
		changed.Spec.Taints = append(changed.Spec.Taints, corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule})
		s.UpsertNode(changed)
		for _, p := range incoming {
			if _, err := s.Schedule(p); err != nil {
				t.Fatal(err)
			}
		}
		s.UpsertNode(n)
	}
	if len(objs.Pods) > 0 && r.Intn(2) == 0 {
		// A pod gone after the same pods were asked about: what the
		// snapshot keeps of existing pods per incoming labels must not
		// outlive it.
		for _, p := range incoming {
			if _, err := s.Schedule(p); err != nil {
				t.Fatal(err)
			}
		}
		k := r.Intn(len(objs.Pods))
		s.DeletePod(objs.Pods[k].UID)
		objs.Pods = slices.Delete(objs.Pods, k, k+1)
		// And pods come: bound, some with anti-affinity of their own.
		for i := range 3 {
			late := randomPod(r, fmt.Sprintf("late-%d", i), objs.Nodes, len(objs.Nodes) > 0)
			if err := s.UpsertPod(late); err != nil {
				t.Fatal(err)
			}
			objs.Pods = append(objs.Pods, late)
		}
	}
	for _, p := range incoming {
		compareWithOracle(t, seed, objs, s, p)
	}
}

// earlierVersion is, at random, nothing or a version of p an informer may
// have delivered before it: still Pending and not Ready (an update the
// engine takes in place), or on another node, with other labels, or
// charged other requests (updates that move it in the indexes or on its
// node).
func earlierVersion(r *rand.Rand, p *corev1.Pod, nodes []*corev1.Node) *corev1.Pod {
	e := p.DeepCopy()
	switch r.Intn(5) {
	case 0:
		e.Status = corev1.PodStatus{Phase: corev1.PodPending}
	case 1:
		if len(nodes) == 0 {
			return nil
		}
		e.Spec.NodeName = nodes[r.Intn(len(nodes))].Name
	case 2:
		e.Labels = map[string]string{"earlier": "true"}
	case 3:
		// Before an in-place resize: the kubelet still reports what it
		// had allocated, which the scheduler charges.
		if len(e.Spec.Containers) == 0 {
			return nil
		}
		e.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name:               e.Spec.Containers[0].Name,
			AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")},
		}}
	default:
		return nil
	}
	return e
}

func TestEngineAgreesWithOracle(t *testing.T) {
	for seed := int64(1); seed <= 2000; seed++ {
		checkSeed(t, seed)
	}
}

// TestSimulatedBindsAgreeWithOracle binds pods through the evaluator's
// incremental path and checks each answer against the oracle run on the
// objects with those pods bound for real.
func TestSimulatedBindsAgreeWithOracle(t *testing.T) {
	for seed := int64(1); seed <= 500; seed++ {
		r := rand.New(rand.NewSource(seed))
		objs := randomCluster(r)
		s, err := NewSnapshot(objs)
		if err != nil {
			t.Fatal(err)
		}
		incoming := randomPod(r, "incoming", objs.Nodes, false)
		e, err := s.newEvaluator(incoming)
		if err != nil {
			t.Fatal(err)
		}
		for step := range 4 {
			fits, _ := oracle(objs, incoming)
			var got []string
			for i, id := range e.order {
				if e.fits(i) {
					got = append(got, s.nodes[id].node.Name)
				}
			}
			if !slices.Equal(got, fits) {
				t.Fatalf("seed %d step %d: evaluator allows %v, oracle %v", seed, step, got, fits)
			}
			if len(fits) == 0 {
				break
			}
			// Bind a copy of the incoming pod where the scheduler could.
			node := fits[r.Intn(len(fits))]
			placed := incoming.DeepCopy()
			placed.Name = fmt.Sprintf("placed-%d", step)
			placed.UID = types.UID(fmt.Sprintf("placed-%d-%d", seed, step))
			placed.Spec.NodeName = node
			anti, _ := requiredAntiAffinityTerms(placed)
			e.simulateBind(placed, anti, podRequests(placed), int(e.posOf[s.nodeByName[node]]))
			objs.Pods = append(objs.Pods, placed)
			// And sometimes a bound pod goes away.
			if len(objs.Pods) > 1 && r.Intn(2) == 0 {
				k := r.Intn(len(objs.Pods) - 1)
				victim := objs.Pods[k]
				if id, ok := s.podByUID[victim.UID]; ok {
					e.simulateRemove(id)
					objs.Pods = slices.Delete(objs.Pods, k, k+1)
				}
			}
		}
	}
}

func FuzzEngineAgreesWithOracle(f *testing.F) {
	for _, seed := range []int64{1, 7, 42, 1234} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		checkSeed(t, seed)
	})
}

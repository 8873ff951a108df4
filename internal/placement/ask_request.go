package placement

import (
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// RequestSpec bounds and labels what a migration may ask an autoscaler for.
type RequestSpec struct {
	// MaxNodes is the most nodes the request may ask for.
	MaxNodes int
	// Labels mark the placeholder pods of one migration; placeholders keep
	// to one per topology domain through them.
	Labels map[string]string
}

// CapacityRequest is what an autoscaler is asked for so that the final
// stage fits: Replicas placeholder pods shaped like Template, one per
// domain. Resident of them fit on nodes that exist (placeholders keep one
// per domain, and an autoscaler cannot be told to avoid given hostnames);
// the others need the new nodes that the final stage lacks.
type CapacityRequest struct {
	Template corev1.PodTemplateSpec
	// Shortfall is how many nodes the final stage lacks.
	Shortfall int
	// Resident is how many placeholders fit on the nodes that exist.
	Resident int
	// Replicas is Resident plus the shortfall bounded by MaxNodes.
	Replicas int
	// Why says in a person's words what the nodes are for.
	Why string
	// Sizing says, when the nodes asked for must hold more than one pod
	// of the target, or no size tried is enough, why (sizeForStages).
	Sizing string
}

// Capped reports whether MaxNodes cut the request short of the shortfall.
func (r CapacityRequest) Capped() bool { return r.Replicas-r.Resident < r.Shortfall }

// Sized is the request once launched nodes qualify that it asked for
// earlier: they count against maxNodes, and their placeholders, now
// resident, stay. It returns the placeholders and the new nodes asked for.
func (r CapacityRequest) Sized(launched, maxNodes int) (placeholders, nodes int) {
	nodes = min(r.Shortfall, max(0, maxNodes-max(0, launched)))
	return r.Resident + nodes, nodes
}

// LaunchedFor names the nodes created since a request was made on which
// its placeholders could land by node selection alone (the first target's
// node selector and required node affinity, and the capacity's node
// selector, as the placeholders carry them), Ready or not, tainted or not:
// the nodes an autoscaler launched for it, by name. It asks the workload,
// not the request, so that the pass in which the capacity is found, whose
// request asks for nothing, names the same nodes as the passes before it,
// and no node another pool launched meanwhile. They count against maxNodes
// from the moment they register, before they qualify and before the
// migration's own pods can take them, so that the request shrinks while
// the autoscaler still counts the node as the request's. Times are
// compared as the API server records them, to the second: an autoscaler
// can launch a node within the request's own second, and a node of that
// second is named when existed says it was not there when the request was
// made; with no word of what was (existed nil: the request was made before
// the operator's restart), such a node is not named, and is counted once
// it qualifies.
func (s *Snapshot) LaunchedFor(w *Workload, spec CapacitySpec, since time.Time, existed func(node string) bool) ([]string, error) {
	affinity := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: w.Template.Spec})
	capacity := labels.Everything()
	if spec.NodeSelector != nil {
		var err error
		if capacity, err = metav1.LabelSelectorAsSelector(spec.NodeSelector); err != nil {
			return nil, fmt.Errorf("capacity.nodeSelector: %w", err)
		}
	}
	since = since.Truncate(time.Second)
	var out []string
	for _, info := range s.nodes {
		if info == nil || info.node == nil {
			continue
		}
		created := info.node.CreationTimestamp.Time
		if created.Before(since) || created.Equal(since) && (existed == nil || existed(info.node.Name)) {
			continue
		}
		if ok, _ := affinity.Match(info.node); ok && capacity.Matches(labels.Set(info.node.Labels)) {
			out = append(out, info.node.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// RequestCapacity computes what to ask an autoscaler for, from final, the
// engine's answer for the final stage: the nodes or domains the capacity
// check lacks or, when there are enough but the rollout deadlocks, the
// fewest extra nodes with which the simulated rollout completes (the surge
// room of seed 001). The placeholder is the first workload's pod as the
// final stage has it (requests, node selection, tolerations and the
// constraint), kept off the domains that already qualify and away from the
// other placeholders, so that the autoscaler can only satisfy it with new
// nodes. A zero request asks for nothing.
func (s *Snapshot) RequestCapacity(workloads []*Workload, c Constraint, spec CapacitySpec, final pgv1.Stage, answer Answer, rs RequestSpec) (CapacityRequest, error) {
	var req CapacityRequest
	if len(workloads) == 0 {
		return req, nil
	}
	key := c.TopologyKey()
	capacity := answer.Capacity
	newDomains := true
	switch {
	case !capacity.Enough():
		missingNodes := capacity.RequiredNodes - capacity.QualifyingNodes
		missingDomains := capacity.RequiredDomains - capacity.QualifyingDomains
		req.Shortfall = max(missingNodes, missingDomains)
		newDomains = missingDomains > 0
		req.Why = capacity.Shortfall(key)
	case deadlocks(answer):
		n, err := s.surgeRoom(workloads, c, spec, final, capacity, rs.MaxNodes)
		if err != nil || n == 0 {
			return req, err
		}
		req.Shortfall = n
		req.Why = fmt.Sprintf("the rollout's surge room: %d more %s domain(s) let the %s stage roll out", n, key, final)
	default:
		return req, nil
	}
	if !newDomains {
		key = corev1.LabelHostname
	}
	var excluded []string
	if key != corev1.LabelHostname {
		excluded = capacity.Domains
	}
	template, err := s.placeholderTemplate(workloads, c, spec, final, key, excluded, rs.Labels)
	if err != nil {
		return req, err
	}
	if !capacity.Enough() {
		if err := s.sizeForStages(&req, &template, workloads, c, spec, final, capacity); err != nil {
			return req, err
		}
	}
	req.Template = template
	if req.Resident, err = s.residentDomains(workloads[0].Namespace, template, key); err != nil {
		return req, err
	}
	req.Replicas, _ = req.Sized(0, rs.MaxNodes)
	return req, nil
}

// sizeForStages sizes the placeholder so that each node asked for holds
// what the stages still to come put on it (podsPerRequestedNode), and
// says so in the request's why; or says that no node of up to
// maxPodsPerRequestedNode pods lets the final stage roll out.
func (s *Snapshot) sizeForStages(req *CapacityRequest, template *corev1.PodTemplateSpec, workloads []*Workload, c Constraint, spec CapacitySpec, final pgv1.Stage, capacity Capacity) error {
	container := &template.Spec.Containers[0]
	k, fits, err := s.podsPerRequestedNode(workloads, c, spec, final, capacity, container.Resources.Requests, req.Shortfall)
	if err != nil {
		return fmt.Errorf("size the nodes to ask for: %w", err)
	}
	switch {
	case !fits:
		req.Sizing = fmt.Sprintf("a node that holds one pod of %s, or up to %d, still leaves its %s stage's rollout a pod it cannot place (its surge beside the pod it replaces): more nodes than the shortfall, or a strategy with maxUnavailable, will be needed",
			workloads[0].Ref(), maxPodsPerRequestedNode, final)
	case k > 1:
		container.Resources.Requests = scaledRequests(container.Resources.Requests, int64(k))
		req.Sizing = fmt.Sprintf("each node asked for holds %d pods of %s, as its %s stage's rollout surges a pod beside the one it replaces there", k, workloads[0].Ref(), final)
	default:
		return nil
	}
	req.Why += "; " + req.Sizing
	return nil
}

// residentDomains counts the domains of key in which a placeholder fits
// on a node that exists: the placeholders that take them ask for nothing.
func (s *Snapshot) residentDomains(namespace string, template corev1.PodTemplateSpec, key string) (int, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "placeholder", Labels: template.Labels, UID: types.UID(simulatedUIDPrefix + namespace + "/placeholder")},
		Spec:       template.Spec,
	}
	v, err := s.Schedule(pod)
	if err != nil {
		return 0, fmt.Errorf("place a placeholder: %w", err)
	}
	return len(s.qualifyingValues(v.Nodes, key)), nil
}

// deadlocks reports whether the answer stops at a rollout that more nodes
// could let through.
func deadlocks(a Answer) bool {
	h := a.FirstBlocking()
	return h != nil && (h.Type == HazardRolloutDeadlock || h.Type == HazardUnschedulable)
}

// surgeRoom is the fewest nodes, up to limit, that let the final stage's
// rollout complete, found by adding copies of a qualifying node in new
// domains to the snapshot and simulating again; 0 when none up to limit
// does. The snapshot is restored.
func (s *Snapshot) surgeRoom(workloads []*Workload, c Constraint, spec CapacitySpec, final pgv1.Stage, capacity Capacity, limit int) (int, error) {
	if len(capacity.Nodes) == 0 {
		return 0, nil
	}
	model := s.nodes[s.nodeByName[capacity.Nodes[0]]].node
	key := c.TopologyKey()
	j := &journal{s: s}
	defer j.undo()
	for n := 1; n <= limit; n++ {
		extra := surgeNode(model)
		extra.Name = fmt.Sprintf("%s/requested-%d", model.Name, n)
		extra.Labels[corev1.LabelHostname] = extra.Name
		extra.Labels[key] = extra.Name
		j.addNode(extra)
		a, err := s.Analyze(Question{Workloads: workloads, Constraint: c, Stage: final, Capacity: spec})
		if err != nil {
			return 0, err
		}
		if !deadlocks(a) {
			return n, nil
		}
	}
	return 0, nil
}

// qualifyingValues are the values of key on the named nodes, sorted.
func (s *Snapshot) qualifyingValues(nodes []string, key string) []string {
	seen := map[string]bool{}
	var out []string
	for _, name := range nodes {
		id, ok := s.nodeByName[name]
		if !ok {
			continue
		}
		if v, ok := s.nodes[id].node.Labels[key]; ok && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// placeholderTemplate is the first workload's pod at the final stage,
// reduced to what scheduling reads, with one container requesting what the
// pod requests, required to land on a qualifying kind of node outside the
// excluded domains of key, one placeholder per domain. Hostnames are never
// excluded by node affinity: autoscalers refuse to provision for it.
func (s *Snapshot) placeholderTemplate(workloads []*Workload, c Constraint, capacity CapacitySpec, final pgv1.Stage, key string, excluded []string, own map[string]string) (corev1.PodTemplateSpec, error) {
	w := workloads[0]
	shaped, err := c.RenderFor(w, workloads).Apply(&w.Template.Spec, w.Selector, final)
	if err != nil {
		return corev1.PodTemplateSpec{}, fmt.Errorf("apply the %s stage to %s: %w", final, w.Ref(), err)
	}
	requests := resourcehelper.PodRequests(&corev1.Pod{Spec: *shaped}, resourcehelper.PodResourcesOptions{})
	spec := corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "placeholder", Image: PlaceholderImage,
			Resources: corev1.ResourceRequirements{Requests: requests},
		}},
		NodeSelector:                  shaped.NodeSelector,
		Tolerations:                   shaped.Tolerations,
		TopologySpreadConstraints:     withoutLabelKeysSpread(shaped.TopologySpreadConstraints),
		TerminationGracePeriodSeconds: ptrTo(int64(0)),
	}
	aff := &corev1.Affinity{}
	if shaped.Affinity != nil {
		aff = shaped.Affinity.DeepCopy()
	}
	extra, err := nodeRequirements(capacity.NodeSelector)
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	if len(excluded) > 0 {
		extra = append(extra, corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpNotIn, Values: excluded})
	}
	requireOnNodes(aff, extra)
	if aff.PodAntiAffinity == nil {
		aff.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	anti := aff.PodAntiAffinity
	anti.RequiredDuringSchedulingIgnoredDuringExecution = append(withoutLabelKeysTerms(anti.RequiredDuringSchedulingIgnoredDuringExecution),
		corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: own}, TopologyKey: key})
	if aff.PodAffinity != nil {
		aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = withoutLabelKeysTerms(aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	spec.Affinity = aff
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: own}, Spec: spec}, nil
}

// nodeRequirements turns the capacity's node selector into node selector
// requirements, which a pod's node affinity can carry.
func nodeRequirements(sel *metav1.LabelSelector) ([]corev1.NodeSelectorRequirement, error) {
	if sel == nil {
		return nil, nil
	}
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []corev1.NodeSelectorRequirement
	for _, k := range keys {
		out = append(out, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{sel.MatchLabels[k]}})
	}
	for _, e := range sel.MatchExpressions {
		op, ok := map[metav1.LabelSelectorOperator]corev1.NodeSelectorOperator{
			metav1.LabelSelectorOpIn: corev1.NodeSelectorOpIn, metav1.LabelSelectorOpNotIn: corev1.NodeSelectorOpNotIn,
			metav1.LabelSelectorOpExists: corev1.NodeSelectorOpExists, metav1.LabelSelectorOpDoesNotExist: corev1.NodeSelectorOpDoesNotExist,
		}[e.Operator]
		if !ok {
			return nil, fmt.Errorf("capacity nodeSelector: operator %q", e.Operator)
		}
		out = append(out, corev1.NodeSelectorRequirement{Key: e.Key, Operator: op, Values: slices.Clone(e.Values)})
	}
	return out, nil
}

// requireOnNodes adds requirements to every term of the required node
// affinity (the terms are alternatives, so each must carry them), or makes
// them its one term.
func requireOnNodes(aff *corev1.Affinity, reqs []corev1.NodeSelectorRequirement) {
	if len(reqs) == 0 {
		return
	}
	if aff.NodeAffinity == nil {
		aff.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := aff.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, reqs...)
	}
}

// withoutLabelKeysTerms drops matchLabelKeys and mismatchLabelKeys: they
// would be read from the placeholder's own labels, which no target pod
// carries, and empty the term.
func withoutLabelKeysTerms(terms []corev1.PodAffinityTerm) []corev1.PodAffinityTerm {
	out := slices.Clone(terms)
	for i := range out {
		out[i].MatchLabelKeys, out[i].MismatchLabelKeys = nil, nil
	}
	return out
}

func withoutLabelKeysSpread(spreads []corev1.TopologySpreadConstraint) []corev1.TopologySpreadConstraint {
	out := slices.Clone(spreads)
	for i := range out {
		out[i].MatchLabelKeys = nil
	}
	return out
}

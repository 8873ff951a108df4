package placement

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// CapacitySpec says which nodes qualify and how many are needed; unset
// numbers are derived from the constraint and the rollout strategy.
type CapacitySpec struct {
	// NodeSelector limits the qualifying nodes; nil admits every node.
	NodeSelector *metav1.LabelSelector
	MinNodes     *int32
	MinDomains   *int32
}

// Capacity is what the snapshot offers against what the constraint needs.
type Capacity struct {
	QualifyingNodes   int
	RequiredNodes     int
	QualifyingDomains int
	RequiredDomains   int
	// Nodes are the first qualifying nodes by name, at most
	// maxNamedNodes: enough to name them in a status or a message. A list
	// of every qualifying node was most of what a judgement allocated on a
	// large cluster, and nothing read past the first few.
	Nodes []string
	// Domains are the qualifying domains of the constraint's topology key,
	// sorted, unless the key is the hostname (its domains are the nodes).
	Domains []string
	// Selector describes the qualifying nodes for messages, e.g. "role=data".
	Selector string
}

// Enough reports whether the qualifying capacity meets the requirement.
func (c Capacity) Enough() bool {
	return c.QualifyingNodes >= c.RequiredNodes && c.QualifyingDomains >= c.RequiredDomains
}

// Summary is "found/needed" of whichever of nodes and domains is scarcer.
func (c Capacity) Summary() string {
	if c.RequiredDomains > 0 && c.QualifyingDomains*c.RequiredNodes < c.QualifyingNodes*c.RequiredDomains {
		return fmt.Sprintf("%d/%d", c.QualifyingDomains, c.RequiredDomains)
	}
	return fmt.Sprintf("%d/%d", c.QualifyingNodes, c.RequiredNodes)
}

// Shortfall says, in a person's words, what is missing; "" when nothing is.
func (c Capacity) Shortfall(topologyKey string) string {
	where := ""
	if c.Selector != "" {
		where = " (" + c.Selector + ")"
	}
	if c.QualifyingNodes < c.RequiredNodes {
		return fmt.Sprintf("%d of %d qualifying nodes%s", c.QualifyingNodes, c.RequiredNodes, where)
	}
	if c.QualifyingDomains < c.RequiredDomains {
		return fmt.Sprintf("%d of %d qualifying %s domains%s", c.QualifyingDomains, c.RequiredDomains, topologyKey, where)
	}
	return ""
}

// Found says, in a person's words, what qualifies against what is
// needed: "4 qualifying nodes (2 needed) in 4 domains (2 needed)".
func (c Capacity) Found() string {
	return fmt.Sprintf("%d qualifying %s (%d needed) in %d %s (%d needed)",
		c.QualifyingNodes, plural(c.QualifyingNodes, "node", "nodes"), c.RequiredNodes,
		c.QualifyingDomains, plural(c.QualifyingDomains, "domain", "domains"), c.RequiredDomains)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// maxNamedNodes bounds Capacity.Nodes.
const maxNamedNodes = 10

// CapacityFor finds the nodes that qualify for the constraint: they match
// the capacity's node selector, carry the topology key, and admit a pod of
// every workload (node affinity, taints, cordon, room for one more pod and,
// under the node's CSI attach limits, for its volumes).
func (s *Snapshot) CapacityFor(workloads []*Workload, c Constraint, spec CapacitySpec) (Capacity, error) {
	sel := labels.Everything()
	var capacity Capacity
	if spec.NodeSelector != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(spec.NodeSelector); err != nil {
			return capacity, fmt.Errorf("capacity nodeSelector: %w", err)
		}
		capacity.Selector = metav1.FormatLabelSelector(spec.NodeSelector)
	}
	key := c.TopologyKey()
	pods := make([]*corev1.Pod, len(workloads))
	filters := make([]*nodeFilters, len(workloads))
	reqs := make([]resources, len(workloads))
	vols := make([]map[string]string, len(workloads))
	for i, w := range workloads {
		pods[i] = newPod(w, w.Name+"-capacity", nil)
		filters[i] = s.nodeFiltersOf(pods[i], s.profileOf(pods[i]), nil)
		reqs[i] = podRequests(pods[i])
		vols[i] = map[string]string{}
		s.attachableVolumes(pods[i], vols[i])
	}
	// The workloads' own pods leave the nodes they run on as their rollout
	// replaces them: a node they fill still qualifies. Whether the rollout
	// can make room for its surge beside them is the simulation's question.
	own := s.ownPodsByNode(workloads)
	// Domains are counted by the topology's interned indices, and nodes
	// come in name order: a hostname key has a domain per node.
	topo := s.topology(key)
	domains, qualifying := make([]bool, len(topo.names)), 0
	// The nodes' static filters are the snapshot's, kept per template:
	// a node object is read only for a selector that needs its labels.
	order := s.liveNodes()
	for pos, id := range order {
		ni := s.nodes[id]
		domain := topo.domainOf[pos]
		if domain < 0 || !sel.Empty() && !sel.Matches(labels.Set(ni.node.Labels)) {
			continue
		}
		admits := true
		requested, podCount := ni.requested, ni.podCount
		if own.has(id) {
			requested, podCount = requested.minus(own.requested[id]), podCount-own.count[id]
		}
		for i := range pods {
			if filters[i].reason[pos] != 0 ||
				podCount+1 > ni.allowedPods ||
				!reqs[i].fitsIn(ni.allocatable, requested, resources{}) ||
				s.attachLimitReached(ni, vols[i]) {
				admits = false
				break
			}
		}
		if !admits {
			continue
		}
		if capacity.QualifyingNodes++; len(capacity.Nodes) < maxNamedNodes {
			capacity.Nodes = append(capacity.Nodes, ni.node.Name)
		}
		if !domains[domain] {
			domains[domain] = true
			qualifying++
		}
	}
	capacity.QualifyingDomains = qualifying
	if key != corev1.LabelHostname {
		for d, ok := range domains {
			if ok {
				capacity.Domains = append(capacity.Domains, topo.names[d])
			}
		}
		sort.Strings(capacity.Domains)
	}
	capacity.RequiredDomains = s.requiredDomains(workloads, c)
	if spec.MinDomains != nil {
		capacity.RequiredDomains = int(*spec.MinDomains)
	}
	capacity.RequiredNodes = capacity.RequiredDomains
	if spec.MinNodes != nil {
		capacity.RequiredNodes = int(*spec.MinNodes)
	}
	return capacity, nil
}

// requiredDomains derives how many domains the hard constraint needs once
// rolled out (whether the rollout itself can get there is the simulation's
// question, and a strategy that cannot is a RolloutDeadlock, not missing
// capacity):
//   - anti-affinity among a workload's own pods: one domain per replica;
//   - anti-affinity from other pods: the domains those pods occupy, plus one;
//   - a spread: minDomains, or two, the least that spreads anything.
func (s *Snapshot) requiredDomains(workloads []*Workload, c Constraint) int {
	need := 0
	for _, w := range workloads {
		n := 0
		switch {
		case c.AntiAffinity != nil:
			own := newRevisionPod(w, w.Name+"-capacity")
			term, err := newAffinityTerm(own, ptrTo(c.AntiAffinity.AffinityTerm(w.Selector)))
			if err != nil {
				continue
			}
			if term.matches(own, namespaceLabels(s, own.Namespace)) {
				n = int(w.Replicas)
			} else {
				n = s.occupiedDomains(&term, w) + 1
			}
		case c.Spread != nil:
			n = 2
			if c.Spread.MinDomains != nil {
				n = int(*c.Spread.MinDomains)
			}
		}
		if n > need {
			need = n
		}
	}
	return need
}

// occupiedDomains counts the domains holding pods the term selects, other
// than the workload's own.
func (s *Snapshot) occupiedDomains(t *affinityTerm, w *Workload) int {
	mine := map[string]bool{}
	for _, uid := range w.Pods {
		mine[string(uid)] = true
	}
	domains := map[string]struct{}{}
	for _, ns := range t.namespaces.UnsortedList() {
		for id := range s.labels.candidates(ns, t.selector) {
			pi := s.pods[id]
			if pi.node == noNode || mine[string(pi.uid)] || !t.matches(pi.common(), namespaceLabels(s, ns)) {
				continue
			}
			if v, ok := s.nodes[pi.node].node.Labels[t.topologyKey]; ok {
				domains[v] = struct{}{}
			}
		}
	}
	return len(domains)
}

// ownPodsByNode counts, per node, the workloads' own bound pods and what
// they request.
func (s *Snapshot) ownPodsByNode(workloads []*Workload) ownPods {
	n := 0
	for _, w := range workloads {
		n += len(w.Pods)
	}
	own := ownPods{on: make([]uint64, (len(s.nodes)+63)/64), count: make(map[nodeID]int64, n), requested: make(map[nodeID]resources, n)}
	for _, w := range workloads {
		for _, uid := range w.Pods {
			id, ok := s.podByUID[uid]
			if !ok || s.pods[id].node == noNode {
				continue
			}
			pi := s.pods[id]
			own.on[pi.node/64] |= 1 << (pi.node % 64)
			own.count[pi.node]++
			r := own.requested[pi.node]
			r.add(pi.requests)
			own.requested[pi.node] = r
		}
	}
	return own
}

// ownPods are the workloads' own pods by node: how many, and what they
// request. A sweep over every node reads the maps only where a bit of on
// says they hold an entry.
type ownPods struct {
	on        []uint64
	count     map[nodeID]int64
	requested map[nodeID]resources
}

func (o ownPods) has(id nodeID) bool { return o.on[id/64]&(1<<(id%64)) != 0 }

func ptrTo[T any](v T) *T { return &v }

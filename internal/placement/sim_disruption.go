package placement

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// The disruptions a placed workload meets after its migration: a node
// drained (a consolidation, an upgrade in place), a node replaced by a surge
// upgrade, a zone lost, and a scale-out (an autoscaler at its maximum). Each
// is simulated on the snapshot as it is, which the simulation leaves as it
// found it.

// Drain is the engine's answer to a drain of one node.
type Drain struct {
	Node string
	// Evicted are the workload's pods on the node.
	Evicted int
	// Unplaced names the evicted pods no other node admits, one after the
	// other, with the node cordoned.
	Unplaced []string
	// Message is the scheduler's message for the first unplaced pod, and
	// Reasons counts the nodes that rejected it per reason.
	Message string
	Reasons map[string]int
}

// SimulateDrain evicts the workload's pods from node in turn, with the node
// cordoned as kubectl drain leaves it, and places a pod of the workload's
// template for each where the scheduler's filters allow.
func (s *Snapshot) SimulateDrain(w *Workload, node string) (Drain, error) {
	d := Drain{Node: node}
	nid, ok := s.nodeByName[node]
	if !ok {
		return d, nil
	}
	lost := map[nodeID]*corev1.Node{nid: asCordoned(s.nodes[nid].node)}
	ev, err := s.evictAndReplace(w, lost, false)
	if err != nil {
		return d, fmt.Errorf("simulate a drain of %s for %s: %w", node, w.Ref(), err)
	}
	d.Evicted, d.Unplaced, d.Message, d.Reasons = ev.evicted, ev.unplaced, ev.first.Message, ev.first.Reasons
	return d, nil
}

// DomainLoss is the engine's answer to the loss of one topology domain
// (a zone): its nodes stop answering and their pods are gone.
type DomainLoss struct {
	Key, Domain string
	// Nodes counts the domain's nodes.
	Nodes int
	// Evicted are the workload's pods that ran there.
	Evicted int
	// Unplaced names those whose replacements no other node admits.
	Unplaced []string
	// Message is the scheduler's message for the first unplaced pod, and
	// Reasons counts the nodes that rejected it per reason.
	Message string
	Reasons map[string]int
}

// SimulateDomainLoss takes every node whose label key is domain out as an
// outage does: the nodes stay in the cluster, tainted unreachable by the
// node lifecycle controller, and every pod on them is gone (terminating
// pods count for no spread). A pod of the workload's template is then
// placed for each of the workload's pods that ran there. That the nodes
// stay matters: under nodeTaintsPolicy Ignore, the default, the lost domain
// still counts for a spread constraint, with none of the pods.
func (s *Snapshot) SimulateDomainLoss(w *Workload, key, domain string) (DomainLoss, error) {
	dl := DomainLoss{Key: key, Domain: domain}
	lost := map[nodeID]*corev1.Node{}
	for _, id := range s.liveNodes() {
		n := s.nodes[id].node
		if v, ok := n.Labels[key]; ok && v == domain {
			lost[id] = asUnreachable(n)
		}
	}
	dl.Nodes = len(lost)
	if len(lost) == 0 {
		return dl, nil
	}
	ev, err := s.evictAndReplace(w, lost, true)
	if err != nil {
		return dl, fmt.Errorf("simulate the loss of %s=%s for %s: %w", key, domain, w.Ref(), err)
	}
	dl.Evicted, dl.Unplaced, dl.Message, dl.Reasons = ev.evicted, ev.unplaced, ev.first.Message, ev.first.Reasons
	return dl, nil
}

// DomainsOf lists, sorted, the values of the label key on the nodes the
// workload's pods run on.
func (s *Snapshot) DomainsOf(w *Workload, key string) []string {
	var domains []string
	for _, id := range s.workloadPods(w.Pods) {
		nid := s.pods[id].node
		if nid == noNode {
			continue
		}
		if v, ok := s.nodes[nid].node.Labels[key]; ok && !slices.Contains(domains, v) {
			domains = append(domains, v)
		}
	}
	slices.Sort(domains)
	return domains
}

// eviction is what evictAndReplace found.
type eviction struct {
	evicted  int
	unplaced []string
	// first is the verdict on the first pod unplaced.
	first Verdict
}

// evictAndReplace evaluates the cluster with the lost nodes as given and
// takes the workload's pods off them. A drain (all false) evicts them one
// by one, placing a pod of the workload's template after each; an outage
// (all true) takes every pod on the nodes at once, then places the
// workload's replacements.
func (s *Snapshot) evictAndReplace(w *Workload, lost map[nodeID]*corev1.Node, all bool) (eviction, error) {
	var ev eviction
	own := s.workloadPods(w.Pods)
	p, err := s.newPlacerWith(w, newPod(w, w.Name+"-evicted", nil), evalOptions{altered: lost})
	if err != nil {
		return ev, err
	}
	var evicted []podID
	for _, id := range own {
		if _, ok := lost[s.pods[id].node]; ok {
			evicted = append(evicted, id)
		}
	}
	if all {
		for nid := range lost {
			for id := range s.nodes[nid].pods {
				if !slices.Contains(evicted, id) {
					p.remove(id)
				}
			}
		}
	}
	for k, id := range evicted {
		ev.evicted++
		p.remove(id)
		if !all {
			ev.replace(p, w, k, s.pods[id].name)
		}
	}
	if all {
		for k, id := range evicted {
			ev.replace(p, w, k, s.pods[id].name)
		}
	}
	return ev, nil
}

// replace places the replacement of the evicted pod named name, or records
// it unplaced.
func (ev *eviction) replace(p *placer, w *Workload, k int, name string) {
	if p.place(newPod(w, fmt.Sprintf("%s-evicted-%d", w.Name, k), nil)) >= 0 {
		return
	}
	ev.unplaced = append(ev.unplaced, name)
	if len(ev.unplaced) == 1 {
		ev.first = p.e.verdict()
	}
}

// asCordoned is node as kubectl drain leaves it: unschedulable, and tainted
// so by the node lifecycle controller.
func asCordoned(node *corev1.Node) *corev1.Node {
	n := withTaints(node, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	n.Spec.Unschedulable = true
	return n
}

// asUnreachable is node as the node lifecycle controller leaves one whose
// kubelet stopped answering.
func asUnreachable(node *corev1.Node) *corev1.Node {
	return withTaints(node,
		corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})
}

// withTaints is a copy of node with taints added; what it shares with node
// is only read.
func withTaints(node *corev1.Node, taints ...corev1.Taint) *corev1.Node {
	n := *node
	n.Spec.Taints = append(slices.Clip(node.Spec.Taints), taints...)
	return &n
}

// surgeNode is the node a surge upgrade adds before it drains node: the
// same labels (its own hostname), capacity and taints, schedulable.
func surgeNode(node *corev1.Node) *corev1.Node {
	n := *node
	n.Name = node.Name + "/surge"
	n.Labels = make(map[string]string, len(node.Labels))
	for k, v := range node.Labels {
		n.Labels[k] = v
	}
	if _, ok := n.Labels[corev1.LabelHostname]; ok {
		n.Labels[corev1.LabelHostname] = n.Name
	}
	n.Spec.Unschedulable = false
	return &n
}

// ScaleOut is the engine's answer to a scale-out of the workload.
type ScaleOut struct {
	Replicas int32
	// Placed counts the replicas that find a node: those running and the
	// added ones placed one by one.
	Placed int32
	// Message is the scheduler's message for the first added pod that
	// finds none.
	Message string
}

// SimulateScaleTo adds pods of the workload's template one by one until it
// has replicas, each where the scheduler's filters allow.
func (s *Snapshot) SimulateScaleTo(w *Workload, replicas int32) (ScaleOut, error) {
	own := s.workloadPods(w.Pods)
	out := ScaleOut{Replicas: replicas}
	for _, id := range own {
		if s.pods[id].node != noNode {
			out.Placed++
		}
	}
	if out.Placed >= replicas {
		return out, nil
	}
	p, err := s.newPlacer(w, newPod(w, w.Name+"-scaled", nil))
	if err != nil {
		return out, fmt.Errorf("simulate scaling %s to %d: %w", w.Ref(), replicas, err)
	}
	for k := out.Placed; k < replicas && !s.interrupted(); k++ {
		if p.place(newPod(w, fmt.Sprintf("%s-scaled-%d", w.Name, k), nil)) < 0 {
			out.Message = p.e.verdict().Message
			break
		}
		out.Placed++
	}
	return out, nil
}

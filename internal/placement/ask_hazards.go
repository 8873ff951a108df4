package placement

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
)

// selectorOverlap finds pods that the constraint's selector, scoped by its
// matchLabelKeys as the API server scopes it for a new pod, selects although
// they belong to no target: another workload, or another release of a
// blue/green pair. Pods of other targets are meant to be counted together.
func (s *Snapshot) selectorOverlap(w *Workload, c Constraint, targets map[types.UID]bool) *Hazard {
	own := newRevisionPod(w, w.Name+"-next")
	var term affinityTerm
	var err error
	switch {
	case c.AntiAffinity != nil:
		term, err = newAffinityTerm(own, ptrTo(c.AntiAffinity.AffinityTerm(w.Selector)))
	case c.Spread != nil:
		sc := c.Spread.SpreadConstraint(w.Selector, pgv1.StageHard)
		term, err = newAffinityTerm(own, &corev1.PodAffinityTerm{LabelSelector: sc.LabelSelector, MatchLabelKeys: sc.MatchLabelKeys, TopologyKey: sc.TopologyKey})
	}
	if err != nil {
		return &Hazard{Type: HazardSelectorOverlap, Blocking: true, Workload: w.Ref(), Message: fmt.Sprintf("%s: the constraint's selector is invalid: %v", w.Ref(), err)}
	}
	// A selector that does not select the workload's own pods keeps them
	// apart from others on purpose (a graph DB apart from a search engine).
	if !term.matches(own, namespaceLabels(s, own.Namespace)) {
		return nil
	}
	// Pods of other namespaces are counted, never named: the migration's
	// status is readable by whoever may read the migration.
	var strangers []string
	elsewhere := 0
	for _, ns := range term.namespaces.UnsortedList() {
		for id := range s.labels.candidates(ns, term.selector) {
			pi := s.pods[id]
			p := pi.common()
			if targets[pi.uid] || pi.terminating() || !term.matches(p, namespaceLabels(s, ns)) {
				continue
			}
			if p.Namespace != w.Namespace {
				elsewhere++
				continue
			}
			strangers = append(strangers, pi.name)
		}
	}
	if len(strangers) == 0 && elsewhere == 0 {
		return nil
	}
	sort.Strings(strangers)
	if elsewhere > 0 {
		strangers = append(strangers, fmt.Sprintf("%d pod(s) in other namespaces", elsewhere))
	}
	fix := rolloutsOf(w.Kind).overlapFix()
	return withFix(&Hazard{
		Type: HazardSelectorOverlap, Blocking: true, Workload: w.Ref(),
		Message: fmt.Sprintf("%s: the constraint's selector %s also selects %d pod(s) of other workloads or revisions (%s); they would be counted with %s's own pods, as blue and green were in one zone.",
			w.Ref(), describeSelector(term), len(strangers)-min(elsewhere, 1)+elsewhere, brief.FirstFew(strangers, 3, ", "), w.Name),
	}, fix)
}

// clobber finds constraint entries of other owners that applying ours would
// replace: pod anti-affinity term lists are atomic (server-side apply owns
// them whole), and spread constraints are keyed by topologyKey and
// whenUnsatisfiable.
func clobber(w *Workload, c Constraint, stage pgv1.Stage) *Hazard {
	spec := &w.Template.Spec
	switch {
	case c.AntiAffinity != nil:
		if spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil {
			return nil
		}
		ours := c.AntiAffinity.AffinityTerm(w.Selector)
		foreign := 0
		field := ""
		if stage == pgv1.StageHard {
			field = "requiredDuringSchedulingIgnoredDuringExecution"
			for _, t := range spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if !equalTerm(t, ours) {
					foreign++
				}
			}
		} else {
			field = "preferredDuringSchedulingIgnoredDuringExecution"
			for _, t := range spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				if t.Weight != SoftWeight || !equalTerm(t.PodAffinityTerm, ours) {
					foreign++
				}
			}
		}
		if foreign == 0 {
			return nil
		}
		return withFix(&Hazard{
			Type: HazardAffinityClobber, Blocking: true, Workload: w.Ref(),
			Message: fmt.Sprintf("%s already has %d podAntiAffinity.%s term(s) of its own; that list is replaced whole by any writer, so adding ours would take theirs over and the next apply of the workload would drop ours.",
				w.Ref(), foreign, field),
		}, fmt.Sprintf("add the term where %s is defined, next to the existing ones", w.Name))
	case c.Spread != nil:
		ours := c.Spread.SpreadConstraint(w.Selector, stage)
		for _, tsc := range spec.TopologySpreadConstraints {
			if tsc.TopologyKey == ours.TopologyKey && tsc.WhenUnsatisfiable == ours.WhenUnsatisfiable && !equalSpread(tsc, ours) &&
				!equalSpread(tsc, c.Spread.SpreadConstraint(w.Selector, otherStage(stage))) {
				return withFix(&Hazard{
					Type: HazardAffinityClobber, Blocking: true, Workload: w.Ref(),
					Message: fmt.Sprintf("%s already has a %s spread on %s; spread constraints are keyed by topologyKey and whenUnsatisfiable, so ours would overwrite it.",
						w.Ref(), tsc.WhenUnsatisfiable, tsc.TopologyKey),
				}, fmt.Sprintf("change the existing constraint where %s is defined, or spread on another key", w.Name))
			}
		}
	}
	return nil
}

func otherStage(s pgv1.Stage) pgv1.Stage {
	if s == pgv1.StageHard {
		return pgv1.StageSoft
	}
	return pgv1.StageHard
}

// rolloutHazard turns a rollout that does not complete into a finding: a
// deadlock when the strategy is the cause, volume pinning when bound
// volumes are, and otherwise the scheduler's plain verdict.
func (s *Snapshot) rolloutHazard(w *Workload, c Constraint, r Rollout) *Hazard {
	if r.Completes || r.Blocked == nil {
		return nil
	}
	verdict := r.Blocked.Message
	if r.Slots > 0 {
		return withFix(&Hazard{
			Type: HazardUnschedulable, Blocking: true, Workload: w.Ref(),
			Message: fmt.Sprintf("%s: %d replicas exceed the %d pods the cluster's nodes admit together, so its rollout cannot complete (it was not simulated pod by pod).",
				w.Ref(), w.Replicas, r.Slots),
		}, "lower the replicas, or add nodes first")
	}
	if r.Blocked.Reasons[ReasonVolumeNodeAffinity] > 0 || r.Blocked.Reasons[ReasonVolumeZone] > 0 {
		return withFix(&Hazard{
			Type: HazardVolumeZonePinning, Blocking: true, Workload: w.Ref(),
			Message: fmt.Sprintf("%s: pod %s is pinned by its bound volume to domains the constraint on %s cannot accept (%s).",
				w.Ref(), r.BlockedPod, c.TopologyKey(), verdict),
		}, "move or recreate the volume in another domain first, or spread with a larger maxSkew")
	}
	if surge, unavailable, surges, err := rolloutsOf(w.Kind).surgeLimits(w); surges {
		if err == nil && unavailable == 0 && r.Blocked.Reasons[ReasonNodePorts] > 0 && s.completesWithOneUnavailable(w) {
			return withFixes(&Hazard{
				Type: HazardRolloutDeadlock, Blocking: true, Workload: w.Ref(),
				Message: fmt.Sprintf("%s: the rollout would deadlock: its pods bind host port %s, which the old pods hold on every node a new pod may use, and maxUnavailable 0 keeps every old pod, so surge pod %s stays Pending (%s).",
					w.Ref(), describeHostPorts(podHostPorts(&corev1.Pod{Spec: w.Template.Spec})), r.BlockedPod, verdict),
			}, deadlockFix, deadlockFixAtLength)
		}
		if err == nil && unavailable == 0 && s.completesWithOneUnavailable(w) {
			return withFixes(&Hazard{
				Type: HazardRolloutDeadlock, Blocking: true, Workload: w.Ref(),
				Message: fmt.Sprintf("%s: the rollout would deadlock: %d replicas + maxSurge %d need more %s domains than the hard constraint allows, and maxUnavailable 0 keeps every old pod, so surge pod %s stays Pending (%s).",
					w.Ref(), w.Replicas, surge, c.TopologyKey(), r.BlockedPod, verdict),
			}, deadlockFix, deadlockFixAtLength+s.revisionScopedAdvice(w, c))
		}
	}
	return withFix(&Hazard{
		Type: HazardUnschedulable, Blocking: true, Workload: w.Ref(),
		Message: fmt.Sprintf("%s: pod %s could not be placed during the rollout: %s", w.Ref(), r.BlockedPod, verdict),
	}, "add nodes that admit the pod, or keep the constraint soft (finalStage: Soft)")
}

// The fix of a Deployment's rolling update that deadlocks, in few words
// and at length.
const (
	deadlockFix         = "set maxUnavailable: 1 (or maxSurge: 0), or add a node"
	deadlockFixAtLength = "set spec.strategy.rollingUpdate.maxUnavailable to at least 1, or maxSurge to 0, or add a node"
)

// revisionScopedAdvice offers, for a Deployment's anti-affinity among its
// own pods, the term scoped to one revision when that rollout completes:
// the surge pod then only avoids pods of its own revision. It is advice,
// never a default: an old and a new pod may share a node while the rollout
// runs.
func (s *Snapshot) revisionScopedAdvice(w *Workload, c Constraint) string {
	if c.AntiAffinity == nil || len(c.AntiAffinity.MatchLabelKeys) > 0 {
		return ""
	}
	scoped := *c.AntiAffinity
	scoped.MatchLabelKeys = []string{appsv1.DefaultDeploymentUniqueLabelKey}
	without, err := c.Apply(&w.Template.Spec, w.Selector, pgv1.StageNone)
	if err != nil {
		return ""
	}
	spec, err := Constraint{AntiAffinity: &scoped}.Apply(without, w.Selector, pgv1.StageHard)
	if err != nil {
		return ""
	}
	if r, err := s.SimulateRollout(w.WithSpec(spec)); err != nil || !r.Completes {
		return ""
	}
	return "; or scope the term to the new revision with matchLabelKeys: [pod-template-hash], which lets the rollout finish but lets an old and a new pod share a " + c.TopologyKey() + " domain while it runs"
}

// completesWithOneUnavailable reports whether the same rollout would
// complete if the strategy allowed one unavailable pod: then the strategy,
// not the cluster, is what deadlocks.
func (s *Snapshot) completesWithOneUnavailable(w *Workload) bool {
	alt := *w
	one := intstr.FromInt32(1)
	alt.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &one}}
	if w.Strategy.RollingUpdate != nil {
		alt.Strategy.RollingUpdate.MaxSurge = w.Strategy.RollingUpdate.MaxSurge
	}
	r, err := s.SimulateRollout(&alt)
	return err == nil && r.Completes
}

func describeHostPorts(ports []hostPort) string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = fmt.Sprintf("%d/%s", p.port, p.protocol)
	}
	return strings.Join(out, ", ")
}

func describeSelector(t affinityTerm) string {
	return "{" + t.selector.String() + "}"
}

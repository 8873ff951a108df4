package plugin

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// node is a line of the status tree and the lines under it.
type node struct {
	text     string
	children []*node
}

func (n *node) add(format string, args ...any) *node {
	c := &node{text: fmt.Sprintf(format, args...)}
	n.children = append(n.children, c)
	return c
}

// write draws the tree with box-drawing branches.
func (n *node) write(w io.Writer, prefix string) {
	for i, c := range n.children {
		branch, indent := "├─ ", "│  "
		if i == len(n.children)-1 {
			branch, indent = "└─ ", "   "
		}
		fmt.Fprintf(w, "%s%s%s\n", prefix, branch, c.text)
		c.write(w, prefix+indent)
	}
}

// printStatusTree writes what a person needs to know of a migration.
func printStatusTree(w io.Writer, pm *pgv1.PlacementMigration, now time.Time) {
	root := &node{}
	st := pm.Status
	phase := string(st.Phase)
	if phase == "" {
		phase = "(not reconciled yet)"
	}
	if pm.Spec.Paused {
		phase += " (spec.paused)"
	}
	p := root.add("Phase: %s, stage %s, final stage %s, generation %d observed %d", phase, orNone(string(st.Stage)), pm.Spec.Final(), pm.Generation, st.ObservedGeneration)
	if ready := meta.FindStatusCondition(st.Conditions, pgv1.ConditionReady); ready != nil {
		p.add("%s", ready.Message)
	}
	if c := st.Capacity; c != nil {
		root.add("Capacity: %s", placement.Capacity{QualifyingNodes: int(c.QualifyingNodes), RequiredNodes: int(c.RequiredNodes),
			QualifyingDomains: int(c.QualifyingDomains), RequiredDomains: int(c.RequiredDomains)}.Found())
	}
	conds := root.add("Conditions")
	for _, c := range st.Conditions {
		conds.add("%s=%s %s (%s ago): %s", c.Type, c.Status, c.Reason, ago(c.LastTransitionTime.Time, now), c.Message)
	}
	if op := st.Operation; op.Held() {
		root.add("Operation held: %s %s -> %s, recorded %s ago, written after %s if the decision then is the same", op.Action, orNone(string(op.From)), op.Stage,
			ago(op.StartedAt.Time, now), op.NotBefore.UTC().Format(time.RFC3339))
	} else if op != nil {
		root.add("Operation in flight: %s %s -> %s since %s ago", op.Action, orNone(string(op.From)), op.Stage, ago(op.StartedAt.Time, now))
	}
	targets := root.add("Targets")
	for _, ts := range st.Targets {
		addTargetStatus(targets, ts, now)
	}
	if len(st.Hazards) > 0 {
		hazards := root.add("Hazards")
		for _, h := range st.Hazards {
			hazards.add("%s %s %s: %s", h.Severity, h.Type, orNone(h.Target), h.Message)
		}
	}
	addRebalance(root, pm, now)
	plan := root.add("Plan")
	for _, e := range st.Plan {
		more := ""
		if int(e.RecreatesCount) > len(e.Recreates) {
			more = fmt.Sprintf(" and %d more", int(e.RecreatesCount)-len(e.Recreates))
		}
		plan.add("%s/%s to %s: %s; recreates %d pod(s) %s%s", e.Kind, e.Name, e.Stage, e.Change, e.RecreatesCount, strings.Join(e.Recreates, ", "), more)
	}
	fmt.Fprintf(w, "PlacementMigration %s/%s\n", pm.Namespace, pm.Name)
	root.write(w, "")
}

// addRebalance shows what spec.rebalance keeps: the mode, the move in
// flight and the moves made, newest first.
func addRebalance(parent *node, pm *pgv1.PlacementMigration, now time.Time) {
	mode := pm.Spec.RebalanceMode()
	rb := pm.Status.Rebalance
	if mode == pgv1.RebalanceOff && rb == nil {
		return
	}
	budget := ""
	if mode == pgv1.RebalanceEvict {
		budget = fmt.Sprintf(", at most %d move(s) an hour", pm.Spec.MaxMovesPerHour())
	}
	r := parent.add("Rebalance: %s%s", mode, budget)
	if rb == nil {
		return
	}
	if rb.Stopped != "" {
		r.add("%s", rb.Stopped)
	}
	if mv := rb.Move; mv != nil {
		state := "recorded, to be evicted"
		if mv.Evicted {
			state = "evicted, waiting for its replacement"
		}
		r.add("Moving %s of %s from %s to %s (node %s): %s, since %s ago", mv.Pod, mv.Target, mv.From, mv.To, orNone(mv.Node), state, ago(mv.At.Time, now))
	}
	for i := len(rb.Moves) - 1; i >= 0; i-- {
		mv := rb.Moves[i]
		what := fmt.Sprintf("%s %s of %s from %s to %s, %s ago", mv.Result, mv.Pod, mv.Target, mv.From, mv.To, ago(mv.At.Time, now))
		switch {
		case mv.Replacement != "":
			what += fmt.Sprintf(": replaced by %s in %s", mv.Replacement, mv.LandedIn)
		case mv.Message != "":
			what += ": " + mv.Message
		}
		r.add("%s", what)
	}
}

func addTargetStatus(parent *node, ts pgv1.TargetStatus, now time.Time) {
	verified := "nothing verified"
	if ts.Verified != nil {
		verified = fmt.Sprintf("%s verified %s ago", ts.Verified.Stage, ago(ts.Verified.At.Time, now))
	}
	pods := ""
	if ts.Pods != nil {
		pods = fmt.Sprintf(", %d pod(s), %d restart(s)", ts.Pods.Count, ts.Pods.Restarts)
	}
	t := parent.add("%s/%s: stage %s, %s%s", ts.Kind, ts.Name, orNone(string(ts.Stage)), verified, pods)
	for _, s := range ts.Stages {
		outcome := string(s.Outcome)
		if outcome == "" {
			outcome = "in progress"
		}
		t.add("%s: %s", s.Stage, outcome)
	}
}

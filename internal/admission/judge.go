package admission

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// The API server keeps each admission warning to 256 characters and all of
// a response's warnings to 4 KiB; longer ones are cut or dropped.
const (
	maxWarning  = 256
	maxWarnings = 4096
)

// Finding is one hazard of a change, worded for an admission response: at
// most 256 characters, naming the fix.
type Finding struct {
	Type     string
	Blocking bool
	Message  string
	// Constraint names the hard constraint the finding is of, in a few
	// words.
	Constraint string
	// Key is the whole constraint the finding is of (its kind, topology
	// key, selector, namespaces, skew): two findings are of the same
	// constraint only when their keys are equal.
	Key string
}

// Judgement is what the check found of a workload: as a change leaves it,
// or as it was before.
type Judgement struct {
	Findings []Finding
	// Replicas are the workload's, and Unplaced how many of them cannot
	// be placed (placement.Snapshot.Unplaceable); counted only where a
	// change's blocking findings are weighed against the workload's
	// before it (Worse).
	Replicas int32
	Unplaced int
}

// Blocking reports a blocking finding.
func (j Judgement) Blocking() bool {
	for _, f := range j.Findings {
		if f.Blocking {
			return true
		}
	}
	return false
}

// Worse are the blocking findings of after that before does not account
// for: what a change to a workload adds to what was wrong with it
// already. Nothing is accounted for when the change leaves more of its
// replicas unplaceable than there were: moving an unsatisfiable workload
// where even fewer of its pods fit is worse, whatever its findings say.
// Else a finding is accounted for by the same hazard of the same whole
// constraint before (kind, topology key, selector, namespaces, skew: the
// same key with another selector is another constraint), or by pods of
// that constraint that could not be placed before at all: the worst there
// is, after which the engine asks nothing more of it (a rollout that
// would deadlock, say). A change that adds replicas to a workload with a
// blocking finding makes it worse whatever it finds: it asks for more of
// what the cluster cannot give.
func Worse(before, after Judgement, addsReplicas bool) []Finding {
	had := map[string]bool{}
	unplaced := map[string]bool{}
	for _, f := range before.Findings {
		if f.Blocking {
			had[f.Key+"\x00"+f.Type] = true
			unplaced[f.Key] = unplaced[f.Key] || cannotPlace(f.Type)
		}
	}
	placesFewer := after.Unplaced > before.Unplaced
	var out []Finding
	for _, f := range after.Findings {
		if f.Blocking && (addsReplicas || placesFewer || !had[f.Key+"\x00"+f.Type] && !unplaced[f.Key]) {
			out = append(out, f)
		}
	}
	return out
}

// LeavesMoreUnplaced are the blocking findings of after when it leaves
// more of the workload's replicas unplaceable than before: what Deny
// refuses of a scale, which changes nothing but the replicas.
func LeavesMoreUnplaced(before, after Judgement) []Finding {
	if after.Unplaced <= before.Unplaced {
		return nil
	}
	var out []Finding
	for _, f := range after.Findings {
		if f.Blocking {
			out = append(out, f)
		}
	}
	return out
}

// cannotPlace reports a hazard of pods that cannot be placed at all.
func cannotPlace(hazard string) bool {
	return hazard == placement.HazardInsufficientCapacity || hazard == placement.HazardUnschedulable
}

// Judge asks the one question (planning.JudgeChange) about every hard
// constraint of the workload as the change leaves it, with the pods it runs
// now, against the cluster in snap: another migration that writes the same
// field, pods that cannot be placed (the qualifying nodes counted), a
// rollout that deadlocks, a selector that counts other workloads' pods, a
// spread that ends skewed, volumes that pin pods, and what the rollout
// leaves that a drain, a zone's loss or the autoscaler cannot place.
// Blocking findings come first.
func Judge(snap *placement.Snapshot, ch planning.Change) ([]Finding, error) {
	withNodes := snap.NodeCount() > 0
	judged, err := planning.JudgeChange(snap, ch, func(placement.Constraint) bool { return withNodes })
	if err != nil {
		return nil, err
	}
	ref := ch.Target.String()
	var out []Finding
	seen := map[string]bool{}
	for _, cf := range judged {
		for _, h := range cf.Hazards {
			f := Finding{Type: h.Type, Blocking: h.Blocking, Message: word(ref, cf.Constraint, h), Constraint: cf.Constraint.Short(), Key: keyOf(cf.Constraint)}
			if !seen[f.Message] {
				seen[f.Message] = true
				out = append(out, f)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Blocking && !out[j].Blocking })
	return out, nil
}

// keyOf is a constraint's whole identity, as Worse compares them.
func keyOf(c placement.Constraint) string {
	b, err := json.Marshal(c)
	if err != nil {
		return c.Short()
	}
	return string(b)
}

// Unplaced counts the replicas of the change's workload that cannot be
// placed, as Judgement.Unplaced.
func Unplaced(snap *placement.Snapshot, ch planning.Change) (int, error) {
	return snap.Unplaceable(ch.Target.Workload)
}

// word puts a hazard into one warning: the workload, the constraint, the
// engine's first clause, and the fix the engine (or planning, for a
// change) gives it, worded for the workload's kind.
func word(ref string, c placement.Constraint, h placement.Hazard) string {
	what := firstClause(strings.TrimPrefix(h.Message, ref+": "))
	head := fmt.Sprintf("%s: %s %s: ", ref, c.Short(), h.Type)
	tail := ""
	if h.Fix != "" {
		tail = ". Fix: " + h.Fix
	}
	// The fix is what a person acts on: the engine's words give way first.
	room := maxWarning - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail)
	return clip(head+clip(what, max(room, 16))+tail, maxWarning)
}

// firstClause is a message up to its first full stop or semicolon.
func firstClause(msg string) string {
	end := len(msg)
	for _, sep := range []string{"; ", ". "} {
		if i := strings.Index(msg, sep); i >= 0 && i < end {
			end = i
		}
	}
	return strings.TrimSuffix(msg[:end], ".")
}

// ClipWarning cuts a warning to the 256 characters the API server keeps.
func ClipWarning(s string) string { return clip(s, maxWarning) }

// clip cuts s to n characters at most, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Warnings are the findings as admission warnings: the most important
// first, each within 256 characters and all within 4 KiB, the last saying
// how many were left out.
func Warnings(fs []Finding) []string {
	var out []string
	total := 0
	for i, f := range fs {
		if total+len(f.Message) > maxWarnings-64 {
			out = append(out, fmt.Sprintf("placement-guard: %d more finding(s) left out; kubectl placement lint shows them all", len(fs)-i))
			break
		}
		out = append(out, f.Message)
		total += len(f.Message)
	}
	return out
}

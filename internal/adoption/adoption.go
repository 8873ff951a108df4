// Package adoption is the Adopt mode of the admission check: a hard
// placement constraint that arrives straight in a workload (a Helm upgrade,
// a GitOps sync, a kubectl apply) is admitted in its soft form, and a
// record of what was softened is left on the workload, from which the
// operator makes a PlacementMigration that takes it to the hard form once
// it is safe.
//
// The soft form is decided from the request alone (the object and the one
// it replaces), never from the cluster, so that a GitOps tool's server-side
// dry run of the same manifest gives the same answer every time: no drift
// while the migration waits, and none after it hardened, when the request
// no longer adds the constraint. This package knows nothing of webhooks or
// reconcilers; the manager's webhook and the operator call it.
package adoption

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// Annotation holds, on a workload, the records of the constraints admitted
// soft: what the operator reads to make and drive their migrations.
const Annotation = "placementguard.io/adopted"

// AdoptedLabel marks the PlacementMigrations made from a record, with the
// name of the workload they adopt a constraint of.
const AdoptedLabel = "placementguard.io/adopted-from"

// Record is one hard constraint admitted in its soft form: exactly as the
// change wrote it, and where.
type Record struct {
	// Migration is the PlacementMigration that takes it to the hard form.
	Migration string `json:"migration"`
	// Term is a required pod anti-affinity term, admitted as a preferred
	// one of weight placement.SoftWeight.
	Term *corev1.PodAffinityTerm `json:"term,omitempty"`
	// Spread is a DoNotSchedule spread, admitted as ScheduleAnyway.
	Spread *corev1.TopologySpreadConstraint `json:"spread,omitempty"`
	// Index is its place in the change's list, where the hard form goes
	// back, so that the workload ends exactly as the manifest wrote it.
	Index int `json:"index"`
	// Author is the field manager of the change, whose later writes say
	// whether its manifest still has the constraint; "" when the request
	// named none.
	Author string `json:"author,omitempty"`
	// Made is the uid of the PlacementMigration the operator made for the
	// record: once it is gone (deleted, aborted) the adoption has ended,
	// not waited to begin.
	Made string `json:"made,omitempty"`
	// Ended says why the adoption ended, by whom: the migration aborted or
	// deleted, or the constraint taken back by a write of someone other
	// than its author (a rollback). An ended record keeps the constraint
	// in the form it was left in, makes no migration, and lasts until its
	// author's manifest changes or drops the constraint.
	Ended string `json:"ended,omitempty"`
}

// Active reports a record whose adoption goes on.
func (r Record) Active() bool { return r.Ended == "" }

// Softened is what Soften did to a change.
type Softened struct {
	// Spec is the pod spec with the adopted constraints in soft form.
	Spec *corev1.PodSpec
	// Records are the adopted constraints, one per migration.
	Records []Record
	// Kept are the hard constraints the change adds that cannot be
	// adopted, each with the reason, in words: they stay hard and are
	// judged as in Warn mode.
	Kept []string
}

// Soften puts every hard constraint that spec adds to old (nil for a
// create) into its soft form. kind and name are the workload's: they name
// the migrations. Nothing is changed, and Softened.Spec is nil, when the
// change adds no hard constraint that can be adopted.
func Soften(kind, name string, old, spec *corev1.PodSpec) Softened {
	out := Softened{}
	soft := spec.DeepCopy()
	var oldTerms []corev1.PodAffinityTerm
	var oldSpreads []corev1.TopologySpreadConstraint
	if old != nil {
		if old.Affinity != nil && old.Affinity.PodAntiAffinity != nil {
			oldTerms = old.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		oldSpreads = old.TopologySpreadConstraints
	}
	if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
		paa := soft.Affinity.PodAntiAffinity
		var kept []corev1.PodAffinityTerm
		for i, term := range spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if containsTerm(oldTerms, term) {
				kept = append(kept, term)
				continue
			}
			if why := unadoptableTerm(term); why != "" {
				kept = append(kept, term)
				out.Kept = append(out.Kept, why)
				continue
			}
			preferred := corev1.WeightedPodAffinityTerm{Weight: placement.SoftWeight, PodAffinityTerm: term}
			if !slices.ContainsFunc(paa.PreferredDuringSchedulingIgnoredDuringExecution, func(t corev1.WeightedPodAffinityTerm) bool {
				return equality.Semantic.DeepEqual(t, preferred)
			}) {
				paa.PreferredDuringSchedulingIgnoredDuringExecution = append(paa.PreferredDuringSchedulingIgnoredDuringExecution, preferred)
			}
			r := Record{Term: term.DeepCopy(), Index: i}
			r.Migration = MigrationName(kind, name, r)
			out.Records = append(out.Records, r)
		}
		paa.RequiredDuringSchedulingIgnoredDuringExecution = kept
	}
	var drop []corev1.TopologySpreadConstraint
	for i, s := range spec.TopologySpreadConstraints {
		if s.WhenUnsatisfiable != corev1.DoNotSchedule || containsSpread(oldSpreads, s) {
			continue
		}
		r := Record{Spread: s.DeepCopy(), Index: i}
		r.Migration = MigrationName(kind, name, r)
		switch why := unadoptableSpread(spec.TopologySpreadConstraints, s); {
		case why == "":
			soft.TopologySpreadConstraints[i] = placement.SoftSpread(s)
		case containsSpread(oldSpreads, placement.SoftSpread(s)) && containsSpread(spec.TopologySpreadConstraints, placement.SoftSpread(s)):
			// The soft form was there already, from an earlier adoption
			// of the same spread: a manifest applied again (a sync, a dry
			// run) brings the hard form back beside it, and it goes.
			drop = append(drop, s)
		default:
			out.Kept = append(out.Kept, why)
			continue
		}
		out.Records = append(out.Records, r)
	}
	soft.TopologySpreadConstraints = slices.DeleteFunc(soft.TopologySpreadConstraints, func(s corev1.TopologySpreadConstraint) bool {
		return containsSpread(drop, s)
	})
	if len(out.Records) > 0 {
		out.Spec = soft
	}
	return out
}

// unadoptableTerm says why a term cannot be a migration's constraint.
func unadoptableTerm(t corev1.PodAffinityTerm) string {
	switch {
	case t.LabelSelector == nil:
		return fmt.Sprintf("the required anti-affinity term on %s has no labelSelector (it selects no pod)", t.TopologyKey)
	case len(t.MismatchLabelKeys) > 0:
		return fmt.Sprintf("the required anti-affinity term on %s uses mismatchLabelKeys, which a PlacementMigration cannot express", t.TopologyKey)
	}
	return ""
}

// unadoptableSpread says why a spread cannot be a migration's constraint.
func unadoptableSpread(all []corev1.TopologySpreadConstraint, s corev1.TopologySpreadConstraint) string {
	if s.LabelSelector == nil {
		return fmt.Sprintf("the DoNotSchedule spread on %s has no labelSelector (it counts no pod)", s.TopologyKey)
	}
	for _, other := range all {
		if other.TopologyKey == s.TopologyKey && other.WhenUnsatisfiable == corev1.ScheduleAnyway {
			return fmt.Sprintf("the DoNotSchedule spread on %s has a ScheduleAnyway twin, so its soft form would repeat a key", s.TopologyKey)
		}
	}
	return ""
}

func containsTerm(ts []corev1.PodAffinityTerm, t corev1.PodAffinityTerm) bool {
	return slices.ContainsFunc(ts, func(o corev1.PodAffinityTerm) bool { return equality.Semantic.DeepEqual(o, t) })
}

func containsSpread(ss []corev1.TopologySpreadConstraint, s corev1.TopologySpreadConstraint) bool {
	return slices.ContainsFunc(ss, func(o corev1.TopologySpreadConstraint) bool { return equality.Semantic.DeepEqual(o, s) })
}

// MigrationName names the migration of a record: the workload's name and a
// hash of its kind, name and the constraint as written, so that the same
// change always names the same migration and two constraints never share
// one.
func MigrationName(kind, name string, r Record) string {
	constraint, _ := json.Marshal(struct {
		Term   *corev1.PodAffinityTerm          `json:"term,omitempty"`
		Spread *corev1.TopologySpreadConstraint `json:"spread,omitempty"`
	}{r.Term, r.Spread})
	sum := sha256.Sum256([]byte(kind + "/" + name + "/" + string(constraint)))
	suffix := "-adopted-" + hex.EncodeToString(sum[:])[:8]
	if room := validation.DNS1123SubdomainMaxLength - len(suffix); len(name) > room {
		name = strings.TrimRight(name[:room], ".-")
	}
	return name + suffix
}

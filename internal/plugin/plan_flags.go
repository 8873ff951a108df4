package plugin

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// migration builds the PlacementMigration the flags describe.
func (f *planFlags) migration(namespace string) (*pgv1.PlacementMigration, error) {
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "plan", Namespace: namespace}}
	switch {
	case len(f.targets) > 0 && f.targetSelector != "":
		return nil, usagef("give either --target or --target-selector, not both")
	case f.targetSelector != "":
		sel, err := metav1.ParseToLabelSelector(f.targetSelector)
		if err != nil {
			return nil, usagef("--target-selector: %v", err)
		}
		pm.Spec.TargetSelector = &pgv1.TargetSelector{Selector: *pgv1.SelectorFrom(sel)}
	case len(f.targets) > 0:
		for _, t := range f.targets {
			ref, err := parseTarget(t)
			if err != nil {
				return nil, err
			}
			pm.Spec.Targets = append(pm.Spec.Targets, ref)
		}
	default:
		return nil, usagef("name the workloads with --target KIND/NAME or --target-selector, or give a manifest with -f")
	}
	sel, err := optionalSelector("--selector", f.selector)
	if err != nil {
		return nil, err
	}
	switch {
	case f.antiKey != "" && f.spreadKey != "":
		return nil, usagef("give either --anti-affinity-key or --spread-key, not both")
	case f.antiKey != "":
		pm.Spec.Constraint.PodAntiAffinity = &pgv1.PodAntiAffinityConstraint{TopologyKey: f.antiKey, LabelSelector: sel, MatchLabelKeys: f.matchLabelKeys}
	case f.spreadKey != "":
		s := &pgv1.TopologySpreadConstraint{TopologyKey: f.spreadKey, MaxSkew: f.maxSkew, LabelSelector: sel, MatchLabelKeys: f.matchLabelKeys}
		if f.minDomains > 0 {
			s.MinDomains = &f.minDomains
		}
		pm.Spec.Constraint.TopologySpread = s
	default:
		return nil, usagef("give the constraint: --anti-affinity-key KEY or --spread-key KEY")
	}
	switch pgv1.Stage(f.finalStage) {
	case pgv1.StageSoft, pgv1.StageHard:
		pm.Spec.FinalStage = pgv1.Stage(f.finalStage)
	default:
		return nil, usagef("--final-stage must be Soft or Hard, not %q", f.finalStage)
	}
	nodes, err := optionalSelector("--node-selector", f.nodeSelector)
	if err != nil {
		return nil, err
	}
	if nodes != nil || f.minNodes > 0 {
		pm.Spec.Capacity = &pgv1.Capacity{NodeSelector: nodes}
		if f.minNodes > 0 {
			pm.Spec.Capacity.MinNodes = &f.minNodes
		}
	}
	return pm, nil
}

func optionalSelector(flag, s string) (*pgv1.LabelSelector, error) {
	if s == "" {
		return nil, nil
	}
	sel, err := metav1.ParseToLabelSelector(s)
	if err != nil {
		return nil, usagef("%s: %v", flag, err)
	}
	return pgv1.SelectorFrom(sel), nil
}

// parseTarget reads deploy/NAME or sts/NAME, in any of kubectl's spellings.
func parseTarget(s string) (pgv1.TargetRef, error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok || name == "" {
		return pgv1.TargetRef{}, usagef("--target %q: want KIND/NAME, e.g. deploy/web or sts/db", s)
	}
	if k := targets.KindSpelled(kind); k != nil {
		return pgv1.TargetRef{Kind: k.Name, Name: name}, nil
	}
	return pgv1.TargetRef{}, usagef("--target %q: a migration targets Deployments (deploy/NAME) and StatefulSets (sts/NAME)", s)
}

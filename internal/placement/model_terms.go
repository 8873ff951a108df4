package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
)

// affinityTerm is a pod (anti-)affinity term ready to match pods, with the
// scheduler's namespace rules: the term's namespaces, or those its
// namespaceSelector selects, or else the owning pod's own namespace.
type affinityTerm struct {
	topologyKey string
	selector    labels.Selector
	namespaces  sets.Set[string]
	// nsSelector is labels.Nothing() when the term has no namespaceSelector.
	nsSelector    labels.Selector
	hasNSSelector bool
}

func newAffinityTerm(owner *corev1.Pod, t *corev1.PodAffinityTerm) (affinityTerm, error) {
	sel, err := termSelector(t.LabelSelector, owner.Labels, t.MatchLabelKeys, t.MismatchLabelKeys)
	if err != nil {
		return affinityTerm{}, fmt.Errorf("labelSelector of the term on %q: %w", t.TopologyKey, err)
	}
	at := affinityTerm{topologyKey: t.TopologyKey, selector: sel, nsSelector: labels.Nothing()}
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		at.namespaces = sets.New(owner.Namespace)
	} else {
		at.namespaces = sets.New(t.Namespaces...)
	}
	if t.NamespaceSelector != nil {
		at.hasNSSelector = true
		if at.nsSelector, err = metav1.LabelSelectorAsSelector(t.NamespaceSelector); err != nil {
			return affinityTerm{}, fmt.Errorf("namespaceSelector of the term on %q: %w", t.TopologyKey, err)
		}
	}
	return at, nil
}

// termSelector is the term's label selector with matchLabelKeys and
// mismatchLabelKeys merged in from the owning pod's labels, as the API server
// does when it admits the pod. A nil selector matches nothing.
func termSelector(ls *metav1.LabelSelector, podLabels map[string]string, matchKeys, mismatchKeys []string) (labels.Selector, error) {
	if ls == nil {
		return labels.Nothing(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, err
	}
	for _, k := range matchKeys {
		if v, ok := podLabels[k]; ok {
			r, err := labels.NewRequirement(k, selection.In, []string{v})
			if err != nil {
				return nil, err
			}
			sel = sel.Add(*r)
		}
	}
	for _, k := range mismatchKeys {
		if v, ok := podLabels[k]; ok {
			r, err := labels.NewRequirement(k, selection.NotIn, []string{v})
			if err != nil {
				return nil, err
			}
			sel = sel.Add(*r)
		}
	}
	return sel, nil
}

// matches reports whether the term selects pod; nsLabels are the labels of
// the pod's namespace.
func (t *affinityTerm) matches(pod *corev1.Pod, nsLabels labels.Set) bool {
	if !t.namespaces.Has(pod.Namespace) && !t.nsSelector.Matches(nsLabels) {
		return false
	}
	return t.selector.Matches(labels.Set(pod.Labels))
}

func requiredAntiAffinityTerms(p *corev1.Pod) ([]affinityTerm, error) {
	if p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
		return nil, nil
	}
	return buildTerms(p, p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
}

func requiredAffinityTerms(p *corev1.Pod) ([]affinityTerm, error) {
	if p.Spec.Affinity == nil || p.Spec.Affinity.PodAffinity == nil {
		return nil, nil
	}
	return buildTerms(p, p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
}

func buildTerms(p *corev1.Pod, raw []corev1.PodAffinityTerm) ([]affinityTerm, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	terms := make([]affinityTerm, 0, len(raw))
	for i := range raw {
		t, err := newAffinityTerm(p, &raw[i])
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	return terms, nil
}

// spreadConstraint is a DoNotSchedule topology spread constraint ready to
// count pods.
type spreadConstraint struct {
	topologyKey        string
	maxSkew            int
	minDomains         int
	selector           labels.Selector
	nodeAffinityPolicy corev1.NodeInclusionPolicy
	nodeTaintsPolicy   corev1.NodeInclusionPolicy
}

// hardSpreadConstraints returns the pod's DoNotSchedule constraints; the
// ScheduleAnyway ones only weigh in scoring and never filter a node.
func hardSpreadConstraints(p *corev1.Pod) ([]spreadConstraint, error) {
	return spreadConstraintsOf(p, p.Spec.TopologySpreadConstraints, corev1.DoNotSchedule)
}

// spreadConstraintsOf are those of constraints, written for pod p, that
// act as action says.
func spreadConstraintsOf(p *corev1.Pod, constraints []corev1.TopologySpreadConstraint, action corev1.UnsatisfiableConstraintAction) ([]spreadConstraint, error) {
	var out []spreadConstraint
	for _, c := range constraints {
		if c.WhenUnsatisfiable != action {
			continue
		}
		sel, err := termSelector(c.LabelSelector, p.Labels, c.MatchLabelKeys, nil)
		if err != nil {
			return nil, fmt.Errorf("labelSelector of the spread on %q: %w", c.TopologyKey, err)
		}
		sc := spreadConstraint{
			topologyKey:        c.TopologyKey,
			maxSkew:            int(c.MaxSkew),
			minDomains:         1,
			selector:           sel,
			nodeAffinityPolicy: corev1.NodeInclusionPolicyHonor,
			nodeTaintsPolicy:   corev1.NodeInclusionPolicyIgnore,
		}
		if c.MinDomains != nil {
			sc.minDomains = int(*c.MinDomains)
		}
		if c.NodeAffinityPolicy != nil {
			sc.nodeAffinityPolicy = *c.NodeAffinityPolicy
		}
		if c.NodeTaintsPolicy != nil {
			sc.nodeTaintsPolicy = *c.NodeTaintsPolicy
		}
		out = append(out, sc)
	}
	return out, nil
}

// weightedTerm is a preferred pod (anti-)affinity term and its weight,
// negative for anti-affinity.
type weightedTerm struct {
	affinityTerm
	weight int64
}

// scoringTerms are a pod's terms InterPodAffinity's score reads: its
// preferred terms, and its required affinity terms, which weigh with the
// profile's hardPodAffinityWeight when the pod is an existing one.
type scoringTerms struct {
	requiredAffinity []affinityTerm
	preferred        []weightedTerm
}

// podScoringTerms are p's scoring terms, nil when it has none.
func podScoringTerms(p *corev1.Pod) (*scoringTerms, error) {
	a := p.Spec.Affinity
	if a == nil || (a.PodAffinity == nil && a.PodAntiAffinity == nil) {
		return nil, nil
	}
	required, err := requiredAffinityTerms(p)
	if err != nil {
		return nil, err
	}
	st := &scoringTerms{requiredAffinity: required}
	if a.PodAffinity != nil {
		if st.preferred, err = appendWeighted(st.preferred, p, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1); err != nil {
			return nil, err
		}
	}
	if a.PodAntiAffinity != nil {
		if st.preferred, err = appendWeighted(st.preferred, p, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, -1); err != nil {
			return nil, err
		}
	}
	if len(st.requiredAffinity) == 0 && len(st.preferred) == 0 {
		return nil, nil
	}
	return st, nil
}

func appendWeighted(out []weightedTerm, p *corev1.Pod, raw []corev1.WeightedPodAffinityTerm, sign int64) ([]weightedTerm, error) {
	for i := range raw {
		t, err := newAffinityTerm(p, &raw[i].PodAffinityTerm)
		if err != nil {
			return nil, err
		}
		out = append(out, weightedTerm{affinityTerm: t, weight: sign * int64(raw[i].Weight)})
	}
	return out, nil
}

// softSpreadConstraints are p's ScheduleAnyway constraints, which only
// weigh in scoring.
func softSpreadConstraints(p *corev1.Pod) ([]spreadConstraint, error) {
	return spreadConstraintsOf(p, p.Spec.TopologySpreadConstraints, corev1.ScheduleAnyway)
}

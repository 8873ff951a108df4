package planning

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// maxZonesSimulated bounds the zones whose loss is simulated per target.
const maxZonesSimulated = 10

// zoneLoss simulates, for a constraint over zones, the loss of each zone
// the target runs in. A zone's nodes stay in the cluster when it is lost,
// unreachable, so a spread under nodeTaintsPolicy Ignore still counts it.
func zoneLoss(snap *placement.Snapshot, c placement.Constraint, t *Target, final pgv1.Stage) (DisruptionVerdict, error) {
	var keys []string
	if c.Spread != nil {
		keys = append(keys, c.Spread.TopologyKey)
	}
	if c.AntiAffinity != nil && !slices.Contains(keys, c.AntiAffinity.TopologyKey) {
		keys = append(keys, c.AntiAffinity.TopologyKey)
	}
	var survived []string
	for _, key := range keys {
		if key == corev1.LabelHostname {
			continue
		}
		domains := snap.DomainsOf(t.Workload, key)
		for _, domain := range domains[:min(len(domains), maxZonesSimulated)] {
			l, err := snap.SimulateDomainLoss(t.Workload, key, domain)
			if err != nil {
				return DisruptionVerdict{}, err
			}
			if len(l.Unplaced) > 0 {
				return failed(pgv1.ReasonZoneLossUnplaceable, fmt.Sprintf("the loss of %s=%s (%d nodes unreachable, their pods gone) leaves %s of %s Pending until it returns, under the %s constraint (%s)",
					key, domain, l.Nodes, brief.FirstFew(l.Unplaced, 3, "; "), t, final, l.Message), zoneLossFix(c, l, final)), nil
			}
		}
		if len(domains) > 0 {
			survived = append(survived, "and the loss of any one "+key)
		}
	}
	return DisruptionVerdict{OK: true, Message: strings.Join(survived, ", ")}, nil
}

// zoneLossFix offers what would let the lost zone's pods go elsewhere: for
// a spread, not counting the lost zone or allowing more skew; otherwise
// room in the zones left.
func zoneLossFix(c placement.Constraint, l placement.DomainLoss, final pgv1.Stage) string {
	ts := c.Spread
	if ts == nil || ts.TopologyKey != l.Key || l.Reasons[placement.ReasonSpread] == 0 {
		return "add qualifying capacity in the other zones (N+1 per zone)" + softerFix(final)
	}
	if ts.NodeTaintsPolicy != nil && *ts.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor && ts.MinDomains != nil {
		return "the zones left are fewer than minDomains: lower minDomains, or raise maxSkew" + softerFix(final)
	}
	return "the spread still counts the lost zone, with none of the pods, while its nodes exist: set nodeTaintsPolicy Honor (unreachable nodes then count for no zone), or raise maxSkew" + softerFix(final)
}

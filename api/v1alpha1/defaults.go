package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The defaults the CRD applies when a field is unset. They are repeated
// here for objects that never passed through the API server's defaulting
// (unit tests, the kubectl plugin's offline files).
const (
	DefaultSoakDuration = 5 * time.Minute
	DefaultStageTimeout = 15 * time.Minute
	DefaultMinPodAge    = 2 * time.Minute
)

// Soak is how long the soft stage must hold before the hard stage.
func (s *PlacementMigrationSpec) Soak() time.Duration {
	return durationOr(s.SoakDuration, DefaultSoakDuration)
}

// Timeout is how long a stage's rollout may take.
func (s *PlacementMigrationSpec) Timeout() time.Duration {
	return durationOr(s.StageTimeout, DefaultStageTimeout)
}

// Final is the stage the migration ends in.
func (s *PlacementMigrationSpec) Final() Stage {
	if s.FinalStage == "" {
		return StageHard
	}
	return s.FinalStage
}

// MinPodAge is how long target pods must have run without a restart.
func (s *PlacementMigrationSpec) MinPodAge() time.Duration {
	if s.Guards == nil {
		return DefaultMinPodAge
	}
	return durationOr(s.Guards.MinPodAge, DefaultMinPodAge)
}

// MaxRestarts is how many restarts a target pod may add during a stage.
func (s *PlacementMigrationSpec) MaxRestarts() int32 {
	if s.Guards == nil || s.Guards.MaxRestarts == nil {
		return 0
	}
	return *s.Guards.MaxRestarts
}

// DisruptionCheck is what the pre-flight check of disruptions does.
func (s *PlacementMigrationSpec) DisruptionCheck() DisruptionPolicy {
	if s.Guards == nil || s.Guards.Disruptions == "" {
		return DisruptionWarn
	}
	return s.Guards.Disruptions
}

// Protected is the selector of the pods the migration must not recreate.
func (s *PlacementMigrationSpec) Protected() *LabelSelector {
	if s.Guards == nil {
		return nil
	}
	return s.Guards.ProtectedPods
}

// EvictStuck reports whether a rollback may evict a stuck StatefulSet pod.
func (s *PlacementMigrationSpec) EvictStuck() bool {
	return s.Guards != nil && s.Guards.EvictStuckPods
}

// RebalanceMode is what the migration does after success, Off when unset.
func (s *PlacementMigrationSpec) RebalanceMode() RebalanceMode {
	if s.Rebalance == nil || s.Rebalance.Mode == "" {
		return RebalanceOff
	}
	return s.Rebalance.Mode
}

// KeepsDeletionCosts reports a migration whose pods' deletion costs the
// operator keeps (modes DeletionCost and Evict), unless it is a dry run.
func (s *PlacementMigrationSpec) KeepsDeletionCosts() bool {
	m := s.RebalanceMode()
	return (m == RebalanceDeletionCost || m == RebalanceEvict) && !s.DryRun
}

// DefaultMaxMovesPerHour is the eviction budget of mode Evict when unset.
const DefaultMaxMovesPerHour = 6

// MaxMovesPerHour is how many pods mode Evict may evict in an hour.
func (s *PlacementMigrationSpec) MaxMovesPerHour() int {
	if s.Rebalance == nil || s.Rebalance.MaxMovesPerHour == nil {
		return DefaultMaxMovesPerHour
	}
	return int(*s.Rebalance.MaxMovesPerHour)
}

// MovesLocalData reports whether mode Evict may move pods that keep data
// on their node; false when unset.
func (s *PlacementMigrationSpec) MovesLocalData() bool {
	return s.Rebalance != nil && s.Rebalance.MoveLocalData != nil && *s.Rebalance.MoveLocalData
}

// CapacityOrEmpty is the capacity spec, empty when unset.
func (s *PlacementMigrationSpec) CapacityOrEmpty() Capacity {
	if s.Capacity == nil {
		return Capacity{}
	}
	return *s.Capacity
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// AsMeta returns the selector as the API machinery's type; nil for nil.
func (s *LabelSelector) AsMeta() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{}
	if len(s.MatchLabels) > 0 {
		out.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = string(v)
		}
	}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: e.Key, Operator: e.Operator, Values: append([]string(nil), e.Values...),
		})
	}
	return out
}

// Labels builds a selector of matchLabels, for code and tests.
func Labels(kv map[string]string) *LabelSelector {
	return SelectorFrom(&metav1.LabelSelector{MatchLabels: kv})
}

// SelectorFrom converts the API machinery's selector; nil for nil.
func SelectorFrom(s *metav1.LabelSelector) *LabelSelector {
	if s == nil {
		return nil
	}
	out := &LabelSelector{}
	if len(s.MatchLabels) > 0 {
		out.MatchLabels = make(map[string]LabelValue, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = LabelValue(v)
		}
	}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, LabelSelectorRequirement{
			Key: e.Key, Operator: e.Operator, Values: append([]string(nil), e.Values...),
		})
	}
	return out
}

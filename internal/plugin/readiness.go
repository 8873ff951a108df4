package plugin

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/fleet"
)

// migrationLevel ranks a migration for someone waiting on it, as kstatus does:
// OK once Ready for the spec's current generation, Blocked while Stalled
// for it (a person must act: Blocked, RolledBack, Failed, Degraded), Warn
// otherwise (working, waiting for capacity, or its status still about an
// older spec).
func migrationLevel(pm *pgv1.PlacementMigration) fleet.Level {
	switch {
	case holds(pm, pgv1.ConditionStalled, metav1.ConditionTrue):
		return fleet.Blocked
	case holds(pm, pgv1.ConditionReady, metav1.ConditionTrue):
		return fleet.OK
	}
	return fleet.Warn
}

// holds reports whether the migration's status is about its current spec
// and its condition of type t has status s.
func holds(pm *pgv1.PlacementMigration, t string, s metav1.ConditionStatus) bool {
	if pm.Status.ObservedGeneration != pm.Generation {
		return false
	}
	c := meta.FindStatusCondition(pm.Status.Conditions, t)
	return c != nil && c.Status == s && c.ObservedGeneration == pm.Generation
}

// waitFor is a condition `wait --for` waits on: condition=Type, with
// =Status when it is not True.
type waitFor struct {
	Type   string
	Status metav1.ConditionStatus
}

// parseWaitFor reads --for as kubectl wait does: condition=Ready,
// condition=Stalled, condition=Ready=False. The type is matched as
// kubectl matches it, without regard to case.
func parseWaitFor(s string) (waitFor, error) {
	rest, ok := strings.CutPrefix(s, "condition=")
	if !ok || rest == "" {
		return waitFor{}, usagef("--for %q: give condition=TYPE[=STATUS], such as condition=Ready or condition=Stalled", s)
	}
	t, status, hasStatus := strings.Cut(rest, "=")
	w := waitFor{Type: t, Status: metav1.ConditionTrue}
	if hasStatus {
		switch {
		case strings.EqualFold(status, "true"):
		case strings.EqualFold(status, "false"):
			w.Status = metav1.ConditionFalse
		case strings.EqualFold(status, "unknown"):
			w.Status = metav1.ConditionUnknown
		default:
			return waitFor{}, usagef("--for %q: a condition's status is True, False or Unknown", s)
		}
	}
	for _, known := range []string{pgv1.ConditionReady, pgv1.ConditionStalled, pgv1.ConditionReconciling} {
		if strings.EqualFold(w.Type, known) {
			w.Type = known
		}
	}
	return w, nil
}

// String is the condition as --for names it.
func (w waitFor) String() string {
	if w.Status == metav1.ConditionTrue {
		return "condition=" + w.Type
	}
	return fmt.Sprintf("condition=%s=%s", w.Type, w.Status)
}

// met reports whether pm meets the condition for its current spec.
func (w waitFor) met(pm *pgv1.PlacementMigration) bool {
	for _, c := range pm.Status.Conditions {
		if strings.EqualFold(c.Type, w.Type) {
			return pm.Status.ObservedGeneration == pm.Generation && c.ObservedGeneration == pm.Generation && c.Status == w.Status
		}
	}
	return false
}

// failed says why waiting on pm for Ready is over without it: it is
// Stalled for its current spec, and a person, not time, moves it on.
// "" while waiting may still end well, and for any other condition.
func (w waitFor) failed(pm *pgv1.PlacementMigration) string {
	if w.Type != pgv1.ConditionReady || w.Status != metav1.ConditionTrue || !holds(pm, pgv1.ConditionStalled, metav1.ConditionTrue) {
		return ""
	}
	c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionStalled)
	return fmt.Sprintf("Stalled (%s): %s", c.Reason, c.Message)
}

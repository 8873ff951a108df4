// Package rebalance is the step of the migration reconciler that keeps a
// succeeded migration's spread true while its pods come and go
// (spec.rebalance): deletion costs that make a scale-down take the most
// crowded domains first (mode DeletionCost), and, in mode Evict, moves of
// one pod at a time, each recorded before its eviction. Planning answers
// which costs and which move (planning.Rankings, planning.NextMove), as it
// does for `kubectl placement plan`; this package writes them, judges each
// move, and records the Balanced condition and status.rebalance. The
// migration reconciler runs it after its own step, with the migration and
// targets it read, and patches the status once.
package rebalance

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/clusterstate"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// Step is one reconcile's rebalance of a migration.
type Step struct {
	// Client patches pods' deletion costs, evicts pods and takes the
	// migration's deletion-cost finalizer off.
	Client client.Client
	// State is the engine's view of the cluster.
	State *clusterstate.ClusterState
	// Migration is the migration as the reconcile has it: the step
	// records its Balanced condition and status.rebalance into it.
	Migration *pgv1.PlacementMigration
	// Others are the migrations of the namespace: the oldest one keeping
	// deletion costs on a target ranks its pods.
	Others []pgv1.PlacementMigration
	// Targets are the migration's targets, rendered.
	Targets    []*planning.Target
	Constraint placement.Constraint
	Now        time.Time
	// Settled says every target pod runs, none is being deleted: a move
	// waits for it.
	Settled bool

	result Result
}

// Result is what the step has the reconciler tell and do.
type Result struct {
	// Events are told besides the migration's phase.
	Events []Event
	// After asks for another look this soon; zero for none.
	After time.Duration
}

// Event is one Event on the migration.
type Event struct {
	Type, Reason, Message string
}

// retrySoon is how soon the step looks again at writes it left to do.
const retrySoon = 200 * time.Millisecond

// lookAgainIn asks for another look within d.
func (s *Step) lookAgainIn(d time.Duration) {
	s.result.After = planning.Shortest(s.result.After, d)
}

// tell adds an Event.
func (s *Step) tell(kind, reason, message string) {
	s.result.Events = append(s.result.Events, Event{Type: kind, Reason: reason, Message: message})
}

// setBalanced records the Balanced condition.
func (s *Step) setBalanced(status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&s.Migration.Status.Conditions, metav1.Condition{
		Type: pgv1.ConditionBalanced, Status: status, Reason: reason, Message: brief.Truncate(msg, 4096),
		ObservedGeneration: s.Migration.Generation, LastTransitionTime: metav1.NewTime(s.Now),
	})
}

// targetNamed finds a target by its "Kind/name".
func (s *Step) targetNamed(name string) *planning.Target {
	for _, t := range s.Targets {
		if t.String() == name {
			return t
		}
	}
	return nil
}

package rebalance

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// Mode Evict moves the pods of a spread that sit more unevenly than the
// engine can now place them, one pod at a time, each move a recorded
// operation like a stage: the engine picks the pod and predicts where its
// replacement lands (placement.PlanMove); the move is recorded in
// status.rebalance before the eviction, the eviction goes through the
// Eviction API so that PodDisruptionBudgets hold, and the next move waits
// for the replacement to be Ready where the engine said. A misprediction,
// a spread that grew more uneven or a replacement never Ready stops the
// moves for the generation; a refusal, the budget or a pod that may not
// move waits. An operator killed between the record and the eviction, or
// between the eviction and its record, finds the pod gone or terminating
// and does not evict a second one.

// keptMoves is how many past moves status keeps.
const keptMoves = 10

// moveRecheck is how often a move in flight is looked at besides the
// events of its pods.
const moveRecheck = 5 * time.Second

// Results of a move.
const (
	moveLanded       = "Landed"
	moveMispredicted = "Mispredicted"
	moveRefused      = "Refused"
	moveGone         = "Gone"
)

// moveVerdict is what the moves concluded this reconcile, for Balanced.
type moveVerdict struct {
	status  metav1.ConditionStatus
	reason  string
	message string
	event   *Event
}

// moves takes the next step of mode Evict.
func (s *Step) moves(ctx context.Context) (moveVerdict, error) {
	pm := s.Migration
	if pm.Status.Rebalance == nil {
		pm.Status.Rebalance = &pgv1.RebalanceStatus{}
	}
	rb := pm.Status.Rebalance
	if rb.Stopped != "" && rb.StoppedGeneration != pm.Generation {
		// An edited spec lifts a stop of an earlier generation.
		rb.Stopped, rb.StoppedGeneration = "", 0
	}
	if rb.Move != nil {
		return s.continueMove(ctx, rb)
	}
	if rb.Stopped != "" {
		return moveVerdict{status: metav1.ConditionFalse, reason: pgv1.ReasonRebalanceStopped, message: rb.Stopped +
			"; no pod is moved until the spec changes"}, nil
	}
	if !s.Settled {
		s.lookAgainIn(moveRecheck)
		return moveVerdict{status: metav1.ConditionUnknown, reason: pgv1.ReasonMovingPod, message: "Waiting for every target pod to run before the next move"}, nil
	}
	return s.planMove(ctx)
}

// planMove asks the engine for the next move and records it, within the
// budget.
func (s *Step) planMove(ctx context.Context) (moveVerdict, error) {
	rb := s.Migration.Status.Rebalance
	var even, kept []string
	var next *pgv1.PodMove
	err := s.State.With(ctx, func(snap *placement.Snapshot) error {
		for _, t := range s.Targets {
			plan, err := planning.NextMove(snap, s.Migration, t, s.Now)
			if err != nil {
				return err
			}
			if plan.Counts != nil {
				metrics.RecordSkew(s.Migration.Namespace, s.Migration.Name, t.String(), plan.Skew)
			}
			switch {
			case plan.Move != nil && next == nil:
				mv := plan.Move
				next = &pgv1.PodMove{Target: t.String(), Pod: mv.Pod, UID: string(mv.UID), From: mv.From, To: mv.To, Node: mv.Node, At: metav1.NewTime(s.Now), SkewBefore: int32(plan.Skew)}
			case plan.Move != nil:
			case plan.Even:
				even = append(even, t.String()+": "+plan.Why)
			default:
				kept = append(kept, t.String()+": "+plan.Why)
			}
		}
		return nil
	})
	if err != nil {
		return moveVerdict{}, err
	}
	if next == nil {
		if len(kept) > 0 {
			return moveVerdict{status: metav1.ConditionFalse, reason: pgv1.ReasonNoMovablePod, message: strings.Join(kept, ". ")}, nil
		}
		return moveVerdict{status: metav1.ConditionTrue, reason: pgv1.ReasonBalanced, message: strings.Join(even, ". ")}, nil
	}
	if last := lastMove(rb); last != nil && last.Result == moveRefused && s.Now.Sub(last.At.Time) < refusalBackoff {
		s.lookAgainIn(refusalBackoff - s.Now.Sub(last.At.Time))
		return refusedVerdict(last), nil
	}
	if used, until := s.movesWithin(planning.MoveWindow); used >= s.Migration.Spec.MaxMovesPerHour() {
		s.lookAgainIn(until)
		return moveVerdict{status: metav1.ConditionFalse, reason: pgv1.ReasonMoveBudgetSpent, message: fmt.Sprintf(
			"%s could move from %s to %s, but %d move(s) were made in the last hour (spec.rebalance.maxMovesPerHour %d); the next in %s",
			next.Pod, next.From, next.To, used, s.Migration.Spec.MaxMovesPerHour(), until.Round(time.Second))}, nil
	}
	// Record the intent; the next reconcile evicts the pod it names.
	rb.Move = next
	s.lookAgainIn(retrySoon)
	return moveVerdict{status: metav1.ConditionFalse, reason: pgv1.ReasonMovingPod, message: fmt.Sprintf(
		"Moving %s of %s from %s to %s (node %s, as the engine places its replacement): recorded, evicting it next", next.Pod, next.Target, next.From, next.To, next.Node)}, nil
}

// evictRole is the opt-in ClusterRole that lets the operator evict pods.
const evictRole = "placement-guard-evict"

// EvictRoleHint tells how to grant the operator the right to evict pods.
func EvictRoleHint(namespace string) string {
	return fmt.Sprintf("Bind the opt-in ClusterRole %s to the operator's ServiceAccount in namespace %s (docs/operations.md, \"Evictions\")", evictRole, namespace)
}

// refusalBackoff is how long a refused eviction holds the next try.
const refusalBackoff = time.Minute

// refusedVerdict says that the eviction mv records was refused.
func refusedVerdict(mv *pgv1.PodMove) moveVerdict {
	return moveVerdict{status: metav1.ConditionFalse, reason: pgv1.ReasonEvictionRefused, message: fmt.Sprintf(
		"The eviction of %s (%s, from %s to %s) was refused: %s. Refusals count against spec.rebalance.maxMovesPerHour; the next try is at %s",
		mv.Pod, mv.Target, mv.From, mv.To, mv.Message, mv.At.Add(refusalBackoff).UTC().Format(time.RFC3339))}
}

func lastMove(rb *pgv1.RebalanceStatus) *pgv1.PodMove {
	if len(rb.Moves) == 0 {
		return nil
	}
	return &rb.Moves[len(rb.Moves)-1]
}

// movesWithin counts the moves of the last window, and how long until the
// oldest of them leaves it.
func (s *Step) movesWithin(window time.Duration) (int, time.Duration) {
	used, until := 0, window
	for _, mv := range s.Migration.Status.Rebalance.Moves {
		if age := s.Now.Sub(mv.At.Time); age < window {
			used++
			until = min(until, window-age)
		}
	}
	return used, until
}

// continueMove takes the move in flight one step: evict the pod it names,
// or judge its replacement.
func (s *Step) continueMove(ctx context.Context, rb *pgv1.RebalanceStatus) (moveVerdict, error) {
	mv := rb.Move
	t := s.targetNamed(mv.Target)
	if t == nil {
		mv.Result = moveGone
		s.finishMove(rb)
		return moveVerdict{status: metav1.ConditionUnknown, reason: pgv1.ReasonMovingPod, message: mv.Target + " is no longer a target; its move was dropped"}, nil
	}
	if !mv.Evicted {
		return s.evict(ctx, rb, t)
	}
	return s.judgeReplacement(ctx, rb, t)
}

// evict evicts the pod the recorded move names, unless it is already
// going: an operator killed after the eviction, or whose cache is behind
// it, does not evict another.
func (s *Step) evict(ctx context.Context, rb *pgv1.RebalanceStatus, t *planning.Target) (moveVerdict, error) {
	mv := rb.Move
	if pod := podOf(t, types.UID(mv.UID)); pod != nil && pod.DeletionTimestamp == nil {
		logf.FromContext(ctx).Info("Evicting a pod to even the spread", "migration", klog.KObj(s.Migration), "target", mv.Target, "pod", mv.Pod, "from", mv.From, "to", mv.To)
		uid := types.UID(mv.UID)
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: s.Migration.Namespace, Name: mv.Pod},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}}
		err := s.Client.SubResource("eviction").Create(ctx, &corev1.Pod{ObjectMeta: ev.ObjectMeta}, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err), apierrors.IsForbidden(err), apierrors.IsConflict(err):
			why := err.Error()
			if apierrors.IsForbidden(err) {
				why += ". " + EvictRoleHint(s.Migration.Namespace)
			}
			mv.Result, mv.Message, mv.At = moveRefused, brief.Truncate(why, 1024), metav1.NewTime(s.Now)
			s.finishMove(rb)
			metrics.CountMove(s.Migration.Namespace, s.Migration.Name, "refused")
			s.lookAgainIn(refusalBackoff)
			v := refusedVerdict(mv)
			v.event = &Event{Type: corev1.EventTypeWarning, Reason: pgv1.ReasonEvictionRefused, Message: v.message}
			return v, nil
		default:
			return moveVerdict{}, fmt.Errorf("evict pod %s/%s to even the spread of %s: %w", s.Migration.Namespace, mv.Pod, mv.Target, err)
		}
		metrics.CountMove(s.Migration.Namespace, s.Migration.Name, "evicted")
	}
	// At stays when the move was recorded: the eviction came after it, so
	// the replacement is the pod created since, even one created while an
	// operator killed after the eviction was down.
	mv.Evicted = true
	s.lookAgainIn(moveRecheck)
	return moveVerdict{status: metav1.ConditionFalse, reason: pgv1.ReasonMovingPod, message: fmt.Sprintf(
		"Evicted %s of %s from %s; waiting for its replacement to be Ready in %s", mv.Pod, mv.Target, mv.From, mv.To)}, nil
}

// judgeReplacement waits for the evicted pod's replacement to be Ready,
// then checks it landed where the engine said and the spread is no less
// even than before.
func (s *Step) judgeReplacement(ctx context.Context, rb *pgv1.RebalanceStatus, t *planning.Target) (moveVerdict, error) {
	mv := rb.Move
	replacement := s.replacementOf(t, mv)
	if replacement == nil || !s.Settled {
		if waited := s.Now.Sub(mv.At.Time); waited > s.Migration.Spec.Timeout() {
			return s.stopMoves(rb, fmt.Sprintf("the replacement of %s (%s) was not Ready within spec.stageTimeout %s", mv.Pod, mv.Target, s.Migration.Spec.Timeout())), nil
		}
		s.lookAgainIn(moveRecheck)
		return moveVerdict{status: metav1.ConditionFalse, reason: pgv1.ReasonMovingPod, message: fmt.Sprintf(
			"Evicted %s of %s from %s; waiting for its replacement to be Ready in %s", mv.Pod, mv.Target, mv.From, mv.To)}, nil
	}
	landed, skew, err := s.landing(ctx, t, replacement)
	if err != nil {
		return moveVerdict{}, err
	}
	mv.Replacement, mv.LandedIn = replacement.Name, landed
	if landed != mv.To {
		mv.Result = moveMispredicted
		metrics.CountMove(s.Migration.Namespace, s.Migration.Name, "mispredicted")
		return s.stopMoves(rb, fmt.Sprintf("the replacement of %s (%s) landed in %s, not in %s where the engine placed it", mv.Pod, mv.Target, landed, mv.To)), nil
	}
	mv.Result = moveLanded
	metrics.CountMove(s.Migration.Namespace, s.Migration.Name, "landed")
	if skew > int(mv.SkewBefore) {
		return s.stopMoves(rb, fmt.Sprintf("after moving %s (%s) from %s to %s the skew is %d, was %d", mv.Pod, mv.Target, mv.From, mv.To, skew, mv.SkewBefore)), nil
	}
	s.finishMove(rb)
	s.lookAgainIn(retrySoon)
	msg := fmt.Sprintf("Moved %s of %s from %s to %s: its replacement %s is Ready there, as the engine placed it (skew %d, was %d)", mv.Pod, mv.Target, mv.From, mv.To, replacement.Name, skew, mv.SkewBefore)
	return moveVerdict{status: metav1.ConditionFalse, reason: pgv1.ReasonMovingPod, message: msg,
		event: &Event{Type: corev1.EventTypeNormal, Reason: "PodMoved", Message: msg}}, nil
}

// replacementOf is the Ready pod of the target created since the eviction
// that replaced the evicted one, once the evicted one is gone.
func (s *Step) replacementOf(t *planning.Target, mv *pgv1.PodMove) *corev1.Pod {
	var newest *corev1.Pod
	for _, p := range t.Pods {
		if string(p.UID) == mv.UID {
			return nil
		}
		if p.DeletionTimestamp != nil || p.Spec.NodeName == "" || !isReady(p) || p.CreationTimestamp.Add(time.Second).Before(mv.At.Time) {
			continue
		}
		if newest == nil || newest.CreationTimestamp.Before(&p.CreationTimestamp) {
			newest = p
		}
	}
	return newest
}

// landing is the domain the replacement runs in and the target's skew now.
func (s *Step) landing(ctx context.Context, t *planning.Target, replacement *corev1.Pod) (string, int, error) {
	var domain string
	var skew int
	err := s.State.With(ctx, func(snap *placement.Snapshot) error {
		if n, ok := snap.Node(replacement.Spec.NodeName); ok {
			domain = n.Labels[s.Constraint.TopologyKey()]
		}
		m, err := snap.Measure(t.Workload, t.Rendered)
		skew = m.Skew
		return err
	})
	return domain, skew, err
}

// stopMoves ends the move in flight and stops the moves for this
// generation.
func (s *Step) stopMoves(rb *pgv1.RebalanceStatus, why string) moveVerdict {
	s.finishMove(rb)
	rb.Stopped, rb.StoppedGeneration = brief.Truncate("Moves stopped: "+why, 1024), s.Migration.Generation
	return moveVerdict{status: metav1.ConditionFalse, reason: pgv1.ReasonRebalanceStopped, message: rb.Stopped + "; no pod is moved until the spec changes",
		event: &Event{Type: corev1.EventTypeWarning, Reason: pgv1.ReasonRebalanceStopped, Message: rb.Stopped}}
}

// finishMove files the move in flight among the last moves.
func (s *Step) finishMove(rb *pgv1.RebalanceStatus) {
	rb.Moves = append(rb.Moves, *rb.Move)
	if len(rb.Moves) > keptMoves {
		rb.Moves = rb.Moves[len(rb.Moves)-keptMoves:]
	}
	rb.Move = nil
}

func podOf(t *planning.Target, uid types.UID) *corev1.Pod {
	for _, p := range t.Pods {
		if p.UID == uid {
			return p
		}
	}
	return nil
}

func isReady(p *corev1.Pod) bool {
	ready, _ := targets.PodReady(p)
	return ready
}

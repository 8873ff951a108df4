package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/provision"
)

// requestPoll is how often a standing request is read back: the
// autoscaler's word on it arrives on objects the operator does not watch.
const requestPoll = 10 * time.Second

// provision keeps the migration's capacity request in step with the
// step's decision (outcome.capacity): a request stands exactly while the
// migration waits for capacity the engine says it lacks and
// spec.capacity.provision asks for it, and stays as it is while a fact
// holds the stage before the engine is asked again. The request is
// recorded in the status before it is created and forgotten only after it
// is deleted, so a crash between the two never loses one.
func (s *scope) provision(ctx context.Context, o outcome) (outcome, error) {
	pm := s.pm
	recorded := s.asked
	defer func() { s.keepRequest(recorded) }()
	mode := pm.Spec.Capacity.ProvisionMode()
	kind := provision.KindFor(mode)
	// A dry run changes nothing in the cluster, a capacity request included.
	allowed := mode != pgv1.ProvisionNone && !pm.Spec.DryRun && pm.DeletionTimestamp.IsZero()
	if allowed && o.capacity == holdRequest && (recorded == nil || recorded.Kind == kind) {
		return standing(o, recorded), nil
	}
	want := allowed && o.capacity == askForCapacity && s.request != nil && s.request.Shortfall > 0
	// The nodes launched for the request that stands count against
	// maxNodes from now on, whether it stays or goes in this pass.
	before := len(s.launchedNodes())
	if recorded != nil {
		s.noteLaunched(s.launched)
	}
	if recorded != nil && (!want || recorded.Kind != kind) {
		leftAlone, err := s.r.deleteRequest(ctx, pm.Namespace, recorded.Kind, recorded.Name, pm.UID)
		if err != nil {
			// The outcome stands; what could not be removed is said, and
			// tried again, instead of the status freezing on the error.
			return s.removalFailed(o, recorded, releaseReason(pm, o, recorded.Kind != kind), err), nil
		}
		o.events = append(o.events, releaseNote(recorded, releaseReason(pm, o, recorded.Kind != kind), leftAlone))
		recorded = nil
		meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionCapacityRequested)
	}
	if !want {
		// A bound reached is said while the migration waits for capacity
		// it may not ask for, and no longer.
		if c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionCapacityRequested); recorded == nil && c != nil && c.Reason == pgv1.ReasonMaxNodesReached {
			meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionCapacityRequested)
		}
		return o, nil
	}
	req := s.request
	qualifying := int32(0)
	if c := pm.Status.Capacity; c != nil {
		qualifying = c.QualifyingNodes
	}
	if recorded == nil {
		// Nodes launched for the migration's earlier requests count: a
		// request made again before the next stage asks only for what is
		// left of maxNodes, and is not made when nothing is.
		if _, nodes := req.Sized(len(s.launchedNodes()), s.requestSpec().MaxNodes); nodes == 0 {
			return s.boundReached(o, kind), nil
		}
		// Record the intent; the next reconcile creates what it names.
		recorded = &pgv1.CapacityRequestStatus{Kind: kind, Name: provision.Name(pm.Name), Since: metav1.NewTime(s.now),
			Replicas: int32(req.Replicas), Shortfall: int32(req.Shortfall), BaselineNodes: qualifying, Autoscaler: "recorded; creating it next"}
		s.r.baselines.remember(client.ObjectKeyFromObject(pm), s.now, s.nodes)
		setCondition(pm, s.now, pgv1.ConditionCapacityRequested, metav1.ConditionTrue, pgv1.ReasonCapacityRequested,
			fmt.Sprintf("Asking for %d node(s) through %s %s", req.Replicas, kind, recorded.Name))
		o.after = staleRetry
		return s.describeRequest(o, recorded), nil
	}
	recorded = recorded.DeepCopy()
	// A node launched for the request counts from the moment it
	// registers, qualifying or not yet: the request must shrink before the
	// migration's pods can take the node, or the autoscaler provisions
	// another for the placeholder they displace. Those launched for the
	// migration's earlier requests count too, and stay counted when they
	// leave.
	earlier := len(s.launchedNodes()) - len(s.launched)
	launched := max(len(s.launchedNodes()), earlier+int(qualifying-recorded.BaselineNodes), before)
	placeholders, nodes := req.Sized(launched, s.requestSpec().MaxNodes)
	recorded.Replicas, recorded.Shortfall = int32(placeholders), int32(req.Shortfall)
	word, failing, err := s.r.ensureRequest(ctx, provision.Request{
		Mode: mode, Name: recorded.Name, Owner: pm, Template: req.Template, Replicas: recorded.Replicas,
	})
	taken, nameTaken := asNameTaken(err)
	switch {
	case nameTaken:
		recorded.Replicas = 0
		recorded.Autoscaler = "nothing was asked for: " + taken.Error()
		s.warnRequest(&o, pgv1.ReasonRequestNameTaken, fmt.Sprintf(
			"%s; it was left untouched and no capacity was asked for. Rename or delete that object, or rename this migration", taken))
	case errors.Is(err, errStale):
		return o, err
	case provision.IsAPIMissing(err):
		recorded.Autoscaler = "the cluster serves no CapacityBuffer API (autoscaling.x-k8s.io/v1beta1); waiting as with mode None"
		setCondition(pm, s.now, pgv1.ConditionCapacityRequested, metav1.ConditionFalse, pgv1.ReasonAutoscalerAPIMissing,
			"spec.capacity.provision.mode is CapacityBuffer, but the cluster serves no CapacityBuffer API (autoscaling.x-k8s.io/v1beta1): nothing was asked for, and the migration waits for nodes as with mode None. Install an autoscaler that serves it, or use mode PlaceholderPods")
	case err != nil:
		recorded.Autoscaler = brief.Truncate("the request could not be made: "+err.Error(), 1024)
		s.warnRequest(&o, pgv1.ReasonRequestFailed, fmt.Sprintf(
			"%s %s could not be created or updated: %v%s", kind, recorded.Name, err, forbiddenHint(err, kind, pm.Namespace)))
	case failing:
		recorded.Autoscaler = brief.Truncate(word, 1024)
		s.warnRequest(&o, pgv1.ReasonRequestFailed, fmt.Sprintf(
			"%s %s stands but asks for nothing: %s", kind, recorded.Name, word))
	case nodes < req.Shortfall:
		recorded.Autoscaler = brief.Truncate(word, 1024)
		setCondition(pm, s.now, pgv1.ConditionCapacityRequested, metav1.ConditionTrue, pgv1.ReasonRequestCapped,
			fmt.Sprintf("Asked for %d of the %d node(s) missing through %s %s: spec.capacity.provision.maxNodes is %d over the whole migration, and %d node(s) were launched for its requests",
				nodes, req.Shortfall, kind, recorded.Name, s.requestSpec().MaxNodes, max(0, launched)))
	default:
		recorded.Autoscaler = brief.Truncate(word, 1024)
		setCondition(pm, s.now, pgv1.ConditionCapacityRequested, metav1.ConditionTrue, pgv1.ReasonCapacityRequested,
			fmt.Sprintf("Asked for %d node(s) through %s %s", nodes, kind, recorded.Name))
	}
	if o.after == 0 || o.after > requestPoll {
		o.after = requestPoll
	}
	return s.describeRequest(o, recorded), nil
}

// standing leaves the request as it is while a fact holds the stage, and
// says that it stands.
func standing(o outcome, recorded *pgv1.CapacityRequestStatus) outcome {
	if recorded != nil {
		o.message = brief.Truncate(o.message+"; "+requestWords(recorded, nil, false), 2048)
	}
	return o
}

// launchedNodes are the nodes launched for the migration's requests so
// far, as its status records them.
func (s *scope) launchedNodes() []string {
	if c := s.pm.Status.Capacity; c != nil {
		return c.LaunchedNodes
	}
	return nil
}

// noteLaunched adds the nodes launched for the standing request to those
// the status records, each once, by name: a node that leaves stays
// counted.
func (s *scope) noteLaunched(names []string) {
	if len(names) == 0 {
		return
	}
	if s.pm.Status.Capacity == nil {
		s.pm.Status.Capacity = &pgv1.CapacityStatus{}
	}
	all := append(slices.Clone(s.pm.Status.Capacity.LaunchedNodes), names...)
	slices.Sort(all)
	all = slices.Compact(all)
	s.pm.Status.Capacity.LaunchedNodes = all[:min(len(all), maxLaunchedNodes)]
}

// maxLaunchedNodes is how many launched nodes the status names, as its
// schema bounds them; maxNodes is at most as many.
const maxLaunchedNodes = 1000

// boundReached says that the migration may ask for no more nodes: as many
// as maxNodes were launched for its earlier requests. It waits for
// qualifying nodes as with mode None.
func (s *scope) boundReached(o outcome, kind string) outcome {
	launched := s.launchedNodes()
	msg := fmt.Sprintf("Asked for nothing: spec.capacity.provision.maxNodes is %d over the whole migration, and %d node(s) were launched for its earlier requests (%s); waiting for qualifying nodes as with mode None. Raise maxNodes to ask for more",
		s.requestSpec().MaxNodes, len(launched), strings.Join(launched[:min(len(launched), 5)], ", "))
	c := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionCapacityRequested)
	if c == nil || c.Reason != pgv1.ReasonMaxNodesReached {
		o.events = append(o.events, note{kind: corev1.EventTypeNormal, reason: pgv1.ReasonMaxNodesReached, message: msg})
	}
	setCondition(s.pm, s.now, pgv1.ConditionCapacityRequested, metav1.ConditionFalse, pgv1.ReasonMaxNodesReached, msg)
	o.message = brief.Truncate(o.message+"; "+fmt.Sprintf("nothing asked of the autoscaler (%s): maxNodes %d reached", kind, s.requestSpec().MaxNodes), 2048)
	return o
}

// keepRequest puts the request back into the status, which the capacity
// check rebuilds on every pass.
func (s *scope) keepRequest(recorded *pgv1.CapacityRequestStatus) {
	if recorded == nil {
		if s.pm.Status.Capacity != nil {
			s.pm.Status.Capacity.Request = nil
		}
		return
	}
	if s.pm.Status.Capacity == nil {
		s.pm.Status.Capacity = &pgv1.CapacityStatus{}
	}
	s.pm.Status.Capacity.Request = recorded
}

// describeRequest adds the request to what the migration and its
// CapacityAvailable condition say: "asked for 1 node through
// CapacityBuffer graphdb-apart-capacity; provisioning".
func (s *scope) describeRequest(o outcome, r *pgv1.CapacityRequestStatus) outcome {
	c := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionCapacityRequested)
	what := requestWords(r, s.request, c != nil && c.Reason == pgv1.ReasonRequestCapped)
	o.message = brief.Truncate(o.message+"; "+what, 2048)
	if c := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionCapacityAvailable); c != nil && c.Status == metav1.ConditionFalse {
		setCondition(s.pm, s.now, pgv1.ConditionCapacityAvailable, metav1.ConditionFalse, c.Reason, c.Message+"; "+what)
	}
	return o
}

// requestWords say what request r asks of the autoscaler, sized as
// req says when the engine was asked in this pass.
func requestWords(r *pgv1.CapacityRequestStatus, req *placement.CapacityRequest, capped bool) string {
	what := fmt.Sprintf("asked the autoscaler through %s %s: %d placeholder(s) for %d missing node(s)", r.Kind, r.Name, r.Replicas, r.Shortfall)
	if req != nil && req.Sizing != "" {
		what += " (" + req.Sizing + ")"
	}
	if capped {
		what += ", capped by maxNodes"
	}
	if r.Autoscaler != "" {
		what += "; " + r.Autoscaler
	}
	return what
}

// warnRequest records that the request cannot be made or removed, in the
// CapacityRequested condition and, when that changes, in a Warning Event.
func (s *scope) warnRequest(o *outcome, reason, msg string) {
	c := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionCapacityRequested)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || c.Message != brief.Truncate(msg, 4096) {
		o.events = append(o.events, note{kind: corev1.EventTypeWarning, reason: reason, message: msg})
	}
	setCondition(s.pm, s.now, pgv1.ConditionCapacityRequested, metav1.ConditionFalse, reason, msg)
}

// removalFailed reports a request that should go and could not be
// removed. The step's outcome stands, the record stays and the removal is
// tried again: a failing delete never freezes the migration's status.
func (s *scope) removalFailed(o outcome, recorded *pgv1.CapacityRequestStatus, why string, err error) outcome {
	s.warnRequest(&o, pgv1.ReasonRequestRemovalFailed, fmt.Sprintf(
		"%s %s is no longer needed (%s) but could not be removed; trying again every %s: %v%s",
		recorded.Kind, recorded.Name, why, requestPoll, err, forbiddenHint(err, recorded.Kind, s.pm.Namespace)))
	if o.after == 0 || o.after > requestPoll {
		o.after = requestPoll
	}
	return o
}

// releaseNote tells that a request was let go, and which objects of its
// name were left alone because someone else made them.
func releaseNote(recorded *pgv1.CapacityRequestStatus, why string, leftAlone []string) note {
	msg := fmt.Sprintf("Deleted %s %s, which asked for %d node(s): %s", recorded.Kind, recorded.Name, recorded.Replicas, why)
	if len(leftAlone) > 0 {
		msg = fmt.Sprintf("Let the request %s %s go (%s) without deleting %s, which this migration did not make",
			recorded.Kind, recorded.Name, why, strings.Join(leftAlone, ", "))
	}
	return note{kind: corev1.EventTypeNormal, reason: pgv1.ReasonCapacityRequestDeleted, message: msg}
}

// forbiddenHint tells how to grant what a refused request lacked.
func forbiddenHint(err error, kind, namespace string) string {
	if !apierrors.IsForbidden(err) || kind != provision.KindDeployment {
		return ""
	}
	return fmt.Sprintf(". Placeholder pods need the opt-in ClusterRole %s bound to the operator's ServiceAccount in namespace %s (docs/operations.md, \"Placeholder pods\")", provision.PlaceholderRole, namespace)
}

// releaseReason says why a request is let go, from the migration and the
// step's outcome; changed says spec.capacity.provision names another kind.
func releaseReason(pm *pgv1.PlacementMigration, o outcome, changed bool) string {
	halt, halted := terminal(pm)
	op := pm.Status.Operation
	switch {
	case !pm.DeletionTimestamp.IsZero():
		return "the migration is being deleted"
	case pm.Spec.DryRun:
		return "the migration is a dry run"
	case changed || pm.Spec.Capacity.ProvisionMode() == pgv1.ProvisionNone:
		return "spec.capacity.provision changed"
	case o.blocked:
		return "the migration is blocked"
	case pm.Spec.Paused:
		return "the migration is paused"
	case halted && halt == pgv1.PhaseRolledBack, op != nil && op.Action == pgv1.ActionRollBack:
		return "the migration rolled back"
	}
	return "the capacity qualifies"
}

// requestSpec bounds and marks the migration's capacity request.
func (s *scope) requestSpec() placement.RequestSpec { return s.intent().RequestSpec() }

// Package metrics holds placement-guard's Prometheus metrics, registered
// with controller-runtime's registry and served on the manager's secure
// metrics endpoint beside the controller-runtime ones.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

const namespace = "placementguard"

// The labels that name a migration.
const (
	labelNamespace = "namespace"
	labelName      = "name"
)

var (
	// migrationPhase is 1 for each migration's current phase; summed by
	// phase it is the number of migrations in each phase.
	migrationPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "migration_phase",
		Help: "1 for the current phase of each PlacementMigration.",
	}, []string{labelNamespace, labelName, "phase"})

	qualifyingNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "capacity_qualifying_nodes",
		Help: "Nodes that qualify for a PlacementMigration's constraint.",
	}, []string{labelNamespace, labelName})

	requiredNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "capacity_required_nodes",
		Help: "Qualifying nodes a PlacementMigration's hard stage needs.",
	}, []string{labelNamespace, labelName})

	stageDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "stage_duration_seconds",
		Help:    "Time from applying a stage to verifying it, by stage and result.",
		Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600},
	}, []string{"stage", "result"})

	rollbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "rollbacks_total",
		Help: "Stages rolled back, by reason.",
	}, []string{"reason"})

	pendingPods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "pending_target_pods",
		Help: "Target pods of a succeeded PlacementMigration Pending past the unschedulable grace, by cause: constraint (the migration's constraint keeps them out) or other.",
	}, []string{labelNamespace, labelName, "cause"})

	disruptionSimulations = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "disruption_simulations_total",
		Help: "Disruption verdicts computed for succeeded PlacementMigrations; a verdict whose inputs did not change is reused, not counted.",
	})

	reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "migration_reconciles_total",
		Help: "Reconciles of each PlacementMigration: how often a change it depends on, or a timer, made the operator look at it again.",
	}, []string{labelNamespace, labelName})

	evaluationDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "engine_evaluation_duration_seconds",
		Help:    "Time the placement engine took to answer one question.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	})

	podFeedEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "pod_feed_events_total",
		Help: "Pod watch events the pod feed took into the placement engine, by type (added, modified, deleted): the pod churn the operator absorbs.",
	}, []string{"type"})

	admissionFindings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "admission_findings_total",
		Help: "Findings of the admission check of Deployments and StatefulSets, by namespace, kind, hazard and mode (Warn, Deny); the operator records each as an Event on the workload too.",
	}, []string{labelNamespace, "kind", "hazard", "mode"})

	admissionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "admission_duration_seconds",
		Help: "Time the admission check took to answer, by kind, mode (Off for a change it did not judge) and whether it admitted.",
		// Bounds at the check's goals: 50 µs for a change the check does not
		// judge, 10 ms for a judgement, 2 s for its budget.
		Buckets: []float64{0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 2, 5},
	}, []string{"kind", "mode", "allowed"})

	admissionUnjudged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "admission_unjudged_total",
		Help: "Requests the admission check did not judge, by reason: busy (as many judgements at once as --admission-max-judgements allows), budget (no answer within the judging budget), or caller (a request not from the API server, where --admission-client-ca makes the API server known). Deny mode admits an unjudged change, or refuses it where --admission-unjudged or the namespace's placementguard.io/admission-unjudged label says Refuse.",
	}, []string{"reason"})

	unknownModes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "admission_namespace_mode_unknown",
		Help: "1 for each namespace whose placementguard.io/admission label names no mode: the admission check judges it as Warn.",
	}, []string{labelNamespace})

	targetSkew = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "target_skew",
		Help: "The measured skew of each target of a succeeded PlacementMigration that keeps its constraint (spec.rebalance): for a spread the largest difference of pods between two domains, for anti-affinity the most selected pods sharing a domain with one of the target's.",
	}, []string{labelNamespace, labelName, "target"})

	deletionCostWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "deletion_cost_writes_total",
		Help: "Pods whose pod-deletion-cost the operator wrote or removed to keep a spread through scale-downs (spec.rebalance.mode DeletionCost), by result (written, removed, refused).",
	}, []string{labelNamespace, labelName, "result"})

	podMoves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "pod_moves_total",
		Help: "Pods spec.rebalance.mode Evict moved, by result: evicted, then landed (the replacement Ready where the engine placed it) or mispredicted.",
	}, []string{labelNamespace, labelName, "result"})

	// The feed counts every pod event: resolved once, not per event.
	podsAdded    = podFeedEvents.WithLabelValues("added")
	podsModified = podFeedEvents.WithLabelValues("modified")
	podsDeleted  = podFeedEvents.WithLabelValues("deleted")
)

func init() {
	ctrlmetrics.Registry.MustRegister(migrationPhase, qualifyingNodes, requiredNodes, stageDuration, rollbacks, evaluationDuration, pendingPods, disruptionSimulations, reconciles, podFeedEvents,
		admissionFindings, admissionDuration, admissionUnjudged, unknownModes, targetSkew, deletionCostWrites, podMoves)
	// Served at 0 from the start, so that an alert on their rate has a
	// series to read before the first change is let through.
	for _, reason := range []string{"busy", "budget", "caller"} {
		admissionUnjudged.WithLabelValues(reason)
	}
}

// Names are the metric names the operator exports, for dashboards and
// tests that check queries against them.
var Names = []string{
	namespace + "_migration_phase",
	namespace + "_capacity_qualifying_nodes",
	namespace + "_capacity_required_nodes",
	namespace + "_stage_duration_seconds",
	namespace + "_rollbacks_total",
	namespace + "_engine_evaluation_duration_seconds",
	namespace + "_pending_target_pods",
	namespace + "_disruption_simulations_total",
	namespace + "_migration_reconciles_total",
	namespace + "_pod_feed_events_total",
	namespace + "_admission_findings_total",
	namespace + "_admission_duration_seconds",
	namespace + "_admission_unjudged_total",
	namespace + "_admission_namespace_mode_unknown",
	namespace + "_target_skew",
	namespace + "_deletion_cost_writes_total",
	namespace + "_pod_moves_total",
}

// CountFinding counts one finding of the admission check.
func CountFinding(ns, kind, hazard, mode string) {
	admissionFindings.WithLabelValues(ns, kind, hazard, mode).Inc()
}

// RecordUnknownMode records whether a namespace's admission label names
// no mode.
func RecordUnknownMode(ns string, unknown bool) {
	if unknown {
		unknownModes.WithLabelValues(ns).Set(1)
		return
	}
	unknownModes.DeleteLabelValues(ns)
}

// CountUnjudged counts a request not judged.
func CountUnjudged(reason string) { admissionUnjudged.WithLabelValues(reason).Inc() }

// ObserveAdmission records how long the admission check took to answer.
func ObserveAdmission(kind, mode string, allowed bool, d time.Duration) {
	a := "false"
	if allowed {
		a = "true"
	}
	admissionDuration.WithLabelValues(kind, mode, a).Observe(d.Seconds())
}

// RecordPhase sets the migration's phase, removing its previous one.
func RecordPhase(ns, name, phase string) {
	migrationPhase.DeletePartialMatch(prometheus.Labels{labelNamespace: ns, labelName: name})
	migrationPhase.WithLabelValues(ns, name, phase).Set(1)
}

// RecordCapacity records the qualifying and required nodes of a migration.
func RecordCapacity(ns, name string, qualifying, required int) {
	qualifyingNodes.WithLabelValues(ns, name).Set(float64(qualifying))
	requiredNodes.WithLabelValues(ns, name).Set(float64(required))
}

// RecordPendingPods records the target pods Pending after success, by cause.
func RecordPendingPods(ns, name string, byConstraint, other int) {
	pendingPods.WithLabelValues(ns, name, "constraint").Set(float64(byConstraint))
	pendingPods.WithLabelValues(ns, name, "other").Set(float64(other))
}

// Forget drops every series of a deleted migration.
func Forget(ns, name string) {
	labels := prometheus.Labels{labelNamespace: ns, labelName: name}
	migrationPhase.DeletePartialMatch(labels)
	qualifyingNodes.DeletePartialMatch(labels)
	requiredNodes.DeletePartialMatch(labels)
	pendingPods.DeletePartialMatch(labels)
	reconciles.DeletePartialMatch(labels)
	targetSkew.DeletePartialMatch(labels)
	deletionCostWrites.DeletePartialMatch(labels)
	podMoves.DeletePartialMatch(labels)
}

// CountMove counts one step of a pod moved by mode Evict.
func CountMove(ns, name, result string) { podMoves.WithLabelValues(ns, name, result).Inc() }

// RecordSkew records the measured skew of a target of a migration that
// keeps its constraint.
func RecordSkew(ns, name, target string, skew int) {
	targetSkew.WithLabelValues(ns, name, target).Set(float64(skew))
}

// ForgetSkew drops the skew series of a migration that stopped keeping its
// constraint.
func ForgetSkew(ns, name string) {
	targetSkew.DeletePartialMatch(prometheus.Labels{labelNamespace: ns, labelName: name})
}

// CountDeletionCostWrites counts n pods whose deletion cost was written,
// removed or refused.
func CountDeletionCostWrites(ns, name, result string, n int) {
	if n > 0 {
		deletionCostWrites.WithLabelValues(ns, name, result).Add(float64(n))
	}
}

// CountReconcile counts one reconcile of a migration.
func CountReconcile(ns, name string) { reconciles.WithLabelValues(ns, name).Inc() }

// Reconciles is how many times a migration was reconciled.
func Reconciles(ns, name string) float64 {
	var m dto.Metric
	if err := reconciles.WithLabelValues(ns, name).Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// ObserveStage records how long a stage took and how it ended ("verified"
// or "rolled-back").
func ObserveStage(stage, result string, d time.Duration) {
	stageDuration.WithLabelValues(stage, result).Observe(d.Seconds())
}

// CountRollback counts a rollback by its reason.
func CountRollback(reason string) { rollbacks.WithLabelValues(reason).Inc() }

// CountDisruptionSimulation counts one disruption verdict computed.
func CountDisruptionSimulation() { disruptionSimulations.Inc() }

// DisruptionSimulations is how many disruption verdicts were computed.
func DisruptionSimulations() float64 {
	var m dto.Metric
	if err := disruptionSimulations.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// CountPodAdded counts a pod the feed's watch added.
func CountPodAdded() { podsAdded.Inc() }

// CountPodModified counts a pod the feed's watch changed.
func CountPodModified() { podsModified.Inc() }

// CountPodDeleted counts a pod the feed's watch deleted.
func CountPodDeleted() { podsDeleted.Inc() }

// PodFeedEvents is how many pod events of a type ("added", "modified",
// "deleted") the feed took in.
func PodFeedEvents(typ string) float64 {
	var m dto.Metric
	if err := podFeedEvents.WithLabelValues(typ).Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// ObserveEvaluation records one answer of the placement engine.
func ObserveEvaluation(d time.Duration) { evaluationDuration.Observe(d.Seconds()) }

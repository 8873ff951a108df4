package v1alpha1

// Condition types. Ready, Reconciling and Stalled follow the kstatus
// convention read by kubectl wait, Flux, Argo CD and Helm; the others are the
// milestones the reconciler decides from.
const (
	// ConditionReady is True when the migration has reached its final stage
	// and verified it (or, for a dry run, when the plan is complete).
	ConditionReady = "Ready"
	// ConditionReconciling is present, True, while the operator is working
	// towards the desired state.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is present, True, when the migration cannot progress
	// without a person: a blocking hazard, a rollback, an exhausted retry.
	ConditionStalled = "Stalled"

	// ConditionCapacityAvailable is True when enough qualifying nodes and
	// domains exist for the hard stage.
	ConditionCapacityAvailable = "CapacityAvailable"
	// ConditionFeasible is True when the simulated rollout of the next stage
	// completes and no blocking hazard was found.
	ConditionFeasible = "Feasible"
	// ConditionPodsStable is True when every target pod is Ready, old enough
	// and has not restarted since the last observation.
	ConditionPodsStable = "PodsStable"
	// ConditionSoftApplied is True when the soft stage has been applied to
	// every target and verified.
	ConditionSoftApplied = "SoftApplied"
	// ConditionHardApplied is True when the hard stage has been applied to
	// every target and verified.
	ConditionHardApplied = "HardApplied"
	// ConditionConstraintInSync is True while every target still carries the
	// constraint we applied.
	ConditionConstraintInSync = "ConstraintInSync"
	// ConditionDisruptionReady is True, once the migration has succeeded,
	// while the targets survive the disruptions the cluster will bring
	// under the constraint: a drain of any node they run on, and their
	// HorizontalPodAutoscaler at its maximum. False names the first that
	// fails and its fix. It informs; Ready does not depend on it.
	ConditionDisruptionReady = "DisruptionReady"
	// ConditionCapacityRequested is present while the migration asks an
	// autoscaler for the capacity it waits for (spec.capacity.provision):
	// True while the request stands, False when it cannot be made (the
	// CapacityBuffer API is not installed, maxNodes capped it, or the
	// placeholder pods cannot be created).
	ConditionCapacityRequested = "CapacityRequested"
	// ConditionBalanced is present, once the migration has succeeded, while
	// spec.rebalance asks it to keep the constraint true: True while the
	// targets' pods carry the deletion costs that keep their spread through
	// a scale-down, with the pods per domain and the skew; False names what
	// stops it (a cost someone else wrote, a refused write). It informs;
	// Ready does not depend on it.
	ConditionBalanced = "Balanced"
)

// Condition reasons, CamelCase as the API conventions ask.
const (
	ReasonProgressing          = "Progressing"
	ReasonSucceeded            = "Succeeded"
	ReasonPlanned              = "Planned"
	ReasonPaused               = "Paused"
	ReasonWaitingForCapacity   = "WaitingForCapacity"
	ReasonInsufficientCapacity = "InsufficientCapacity"
	ReasonCapacityFound        = "CapacityFound"
	// ReasonCapacityRequested: the request stands; the autoscaler works on it.
	ReasonCapacityRequested = "CapacityRequested"
	// ReasonCapacityRequestDeleted (an event): the request was deleted, as
	// it was no longer wanted or its kind changed.
	ReasonCapacityRequestDeleted = "CapacityRequestDeleted"
	// ReasonRequestCapped: maxNodes asks for fewer nodes than are missing.
	ReasonRequestCapped = "RequestCappedByMaxNodes"
	// ReasonMaxNodesReached: as many nodes as maxNodes were launched for
	// the migration's earlier requests; nothing more is asked for, and it
	// waits for qualifying nodes as with mode None.
	ReasonMaxNodesReached = "MaxNodesReached"
	// ReasonAutoscalerAPIMissing: the cluster serves no CapacityBuffer API;
	// the migration waits as with mode None.
	ReasonAutoscalerAPIMissing = "CapacityBufferAPIMissing"
	// ReasonRequestFailed: the request could not be created or updated, or
	// stands without serving (its placeholder pods cannot be created).
	ReasonRequestFailed = "CapacityRequestFailed"
	// ReasonRequestNameTaken: an object of the request's name exists that
	// the migration did not create; it is left untouched and nothing is
	// asked for.
	ReasonRequestNameTaken = "CapacityRequestNameTaken"
	// ReasonRequestRemovalFailed: a request no longer needed could not be
	// deleted; it is tried again.
	ReasonRequestRemovalFailed = "CapacityRequestRemovalFailed"
	ReasonFeasible             = "RolloutFeasible"
	ReasonHazardFound          = "HazardFound"
	ReasonWaitingForPods       = "WaitingForStablePods"
	// ReasonWaitingForPodView: the operator's view of a target's pods does
	// not yet hold every pod the workload's status counts (its pod watch
	// is behind, or the controller has not created them yet): no guard is
	// judged and nothing is written until it does.
	ReasonWaitingForPodView    = "WaitingForPodView"
	ReasonPodsStable           = "PodsStable"
	ReasonStageApplied         = "StageApplied"
	ReasonStageVerified        = "StageVerified"
	ReasonRolloutInProgress    = "RolloutInProgress"
	ReasonSoaking              = "Soaking"
	ReasonRolledBack           = "RolledBack"
	ReasonStageTimedOut        = "StageTimedOut"
	ReasonProgressDeadline     = "ProgressDeadlineExceeded"
	ReasonPodsUnschedulable    = "PodsUnschedulable"
	ReasonProtectedPodChanged  = "ProtectedPodRecreated"
	ReasonFieldConflict        = "FieldOwnedByOtherManager"
	ReasonTargetNotFound       = "TargetNotFound"
	ReasonInSync               = "InSync"
	ReasonDrifted              = "Drifted"
	ReasonDriftRetriesExceeded = "DriftRetriesExceeded"
	ReasonInvalidSpec          = "InvalidSpec"
	ReasonPodsRestarted        = "PodsRestarted"
	ReasonNoTargets            = "NoTargets"
	ReasonApplyFailed          = "ApplyFailed"
	// ReasonTargetClaimed: another migration owns the field this one would
	// write (an anti-affinity term list, or a spread on the same key).
	ReasonTargetClaimed = "TargetClaimed"
	// ReasonWaitingForMigration: another migration has a stage in flight on
	// a shared target; at most one writes a workload at a time.
	ReasonWaitingForMigration = "WaitingForOtherMigration"
	// ReasonWriteBudgetExceeded: a target was written more often than the
	// operator's write budget allows; a circuit breaker for loops nobody
	// foresaw.
	ReasonWriteBudgetExceeded = "WriteBudgetExceeded"
	// ReasonTooManyTargets: the targetSelector selects more workloads than
	// the status can record.
	ReasonTooManyTargets = "TooManyTargets"
	// ReasonConstraintUnsatisfied: after success, target pods stay Pending
	// because the constraint keeps them off every node (a scale-up beyond
	// the qualifying nodes, a node lost), as both the scheduler and the
	// engine say.
	ReasonConstraintUnsatisfied = "ConstraintUnsatisfied"
	// ReasonTargetPodsPending: target pods stay Pending for a reason the
	// constraint does not cause (their own node selection, resources,
	// taints, volumes), so that nobody is told to remove a constraint that
	// is not the problem. Before success the migration waits, Stalled, and
	// goes on by itself once they are placed.
	ReasonTargetPodsPending = "TargetPodsPending"
	// ReasonTargetRolloutFailed: a target's own rollout gave up (its
	// progress deadline passed) for a change the migration did not make.
	ReasonTargetRolloutFailed = "TargetRolloutFailed"
	// ReasonTargetPodsMissing: a target's controller has made fewer pods
	// than it is asked for (a quota, an admission refusal, an OrderedReady
	// StatefulSet stopped at a pod that is not Ready) for longer than the
	// stage timeout. The migration waits, Stalled, naming the cause, and
	// goes on by itself once the pods exist.
	ReasonTargetPodsMissing = "TargetPodsMissing"
	// ReasonAdoptionTakenBack: another writer took an adopted constraint
	// out of its workload where the admission check did not see it (its
	// namespace Off or Warn, or the check down): the adoption ends, the
	// constraint is not written back, and the migration is deleted.
	ReasonAdoptionTakenBack = "AdoptionTakenBack"
	// ReasonTargetPaused: a target is paused (a Deployment's spec.paused):
	// no stage is written, and no stage timeout runs, until it resumes.
	ReasonTargetPaused = "TargetPaused"
	// ReasonRollbackStalled: a rollback has not rolled out within
	// stageTimeout, or its rollout gave up; it is watched until it does.
	ReasonRollbackStalled = "RollbackStalled"
	// ReasonDisruptionsTolerated: every simulated disruption keeps the
	// targets placed.
	ReasonDisruptionsTolerated = "DisruptionsTolerated"
	// ReasonScaleOutUnsatisfiable: a HorizontalPodAutoscaler may scale a
	// target beyond what the constraint places on today's nodes.
	ReasonScaleOutUnsatisfiable = "ScaleOutUnsatisfiable"
	// ReasonDrainBlockedByBudget: a PodDisruptionBudget of the targets
	// allows no eviction even with every pod healthy, so a drain of any node
	// they run on never completes.
	ReasonDrainBlockedByBudget = "DrainBlockedByBudget"
	// ReasonEvictedPodUnplaceable: a drain of a node evicts a target pod
	// that no other node admits under the constraint.
	ReasonEvictedPodUnplaceable = "EvictedPodUnplaceable"
	// ReasonZoneLossUnplaceable: for a constraint over zones (any topology
	// key but the hostname), the loss of one zone (its nodes unreachable,
	// its pods gone) leaves target pods that no node left admits until the
	// zone returns.
	ReasonZoneLossUnplaceable = "ZoneLossUnplaceable"
	// ReasonRollingBack: a rollback was written and waits for its rollout.
	ReasonRollingBack = "RollingBack"
	// ReasonStuckPod: a rollback cannot roll out until a pod is deleted.
	ReasonStuckPod = "StuckPodBlocksRollback"
	// ReasonUnverified: a target carries a stage no verified record covers
	// (the record was lost); it is verified and soaked before anything
	// stronger.
	ReasonUnverified = "UnverifiedStage"
	// ReasonRetried: the retry annotation restarted the migration.
	ReasonRetried = "Retried"
	// ReasonIntentRecorded: the next write is recorded and about to be made.
	ReasonIntentRecorded = "IntentRecorded"
	// ReasonTargetRemoved: a workload stopped being a target.
	ReasonTargetRemoved = "TargetRemoved"
	// ReasonDeletionCostsKept: the targets' pods carry the costs that keep
	// the spread through a scale-down.
	ReasonDeletionCostsKept = "DeletionCostsKept"
	// ReasonDeletionCostsWriting: costs are being written, a bounded
	// number per reconcile.
	ReasonDeletionCostsWriting = "DeletionCostsWriting"
	// ReasonForeignDeletionCost: a target pod carries a pod-deletion-cost
	// the operator did not write; that target's ranking is left to its
	// owner.
	ReasonForeignDeletionCost = "ForeignDeletionCost"
	// ReasonBalanced: mode Evict finds nothing to move: the spread is as
	// even as the engine can place it.
	ReasonBalanced = "Balanced"
	// ReasonMovingPod: mode Evict moves a pod (recorded, evicted, waiting
	// for its replacement).
	ReasonMovingPod = "MovingPod"
	// ReasonMoveBudgetSpent: the spread could improve, but maxMovesPerHour
	// moves were made in the last hour.
	ReasonMoveBudgetSpent = "MoveBudgetSpent"
	// ReasonNoMovablePod: the spread could improve, but no pod of the
	// crowded domains may move (protected, too young, a volume it cannot
	// take along, an annotation that keeps it, the rollout strategy).
	ReasonNoMovablePod = "NoMovablePod"
	// ReasonEvictionRefused: the eviction was refused (a
	// PodDisruptionBudget allows no disruption now).
	ReasonEvictionRefused = "EvictionRefused"
	// ReasonRebalanceStopped: moves stopped for this generation (a
	// replacement landed elsewhere than predicted, a move did not improve
	// the spread, a replacement was never Ready).
	ReasonRebalanceStopped = "RebalanceStopped"
	// ReasonDeletionCostRefused: the API server refused a cost (the opt-in
	// rebalance ClusterRole is not bound in the namespace, or a policy).
	ReasonDeletionCostRefused = "DeletionCostRefused"
)

// DeletionCostFinalizer holds a migration whose pods may carry the
// deletion costs it wrote until they are removed.
const DeletionCostFinalizer = "placementguard.io/deletion-costs"

// AdmissionLabel sets, on a namespace, how the admission check treats
// changes to its Deployments and StatefulSets: Warn, Deny, Adopt or Off (the
// manager's --admission-mode when absent); on a workload, Off opts it out.
const AdmissionLabel = "placementguard.io/admission"

// AdmissionUnjudgedLabel sets, on a namespace, what the admission check in
// Deny mode does with a change it could not judge (busy, or over its
// budget): Admit it with a warning, or Refuse it (the manager's
// --admission-unjudged when absent).
const AdmissionUnjudgedLabel = "placementguard.io/admission-unjudged"

// RevertFinalizer restores the recorded constraints before a
// PlacementMigration with onDelete: Revert is deleted.
const RevertFinalizer = "placementguard.io/revert"

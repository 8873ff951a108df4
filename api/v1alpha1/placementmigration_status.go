package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is a one-word summary of the migration for people and dashboards;
// the conditions carry the details, and the operator never decides from it.
// +kubebuilder:validation:Enum=Pending;WaitingForCapacity;Blocked;Planned;ApplyingSoft;Soaking;ApplyingHard;Verifying;Succeeded;Degraded;RollingBack;RolledBack;Failed;Paused
type Phase string

const (
	PhasePending            Phase = "Pending"
	PhaseWaitingForCapacity Phase = "WaitingForCapacity"
	PhaseBlocked            Phase = "Blocked"
	PhasePlanned            Phase = "Planned"
	PhaseApplyingSoft       Phase = "ApplyingSoft"
	PhaseSoaking            Phase = "Soaking"
	PhaseApplyingHard       Phase = "ApplyingHard"
	PhaseVerifying          Phase = "Verifying"
	PhaseSucceeded          Phase = "Succeeded"
	// PhaseDegraded is a migration that succeeded whose target pods have
	// since stayed Pending: the conditions say whether its constraint is
	// the cause. It returns to Succeeded once they are placed.
	PhaseDegraded    Phase = "Degraded"
	PhaseRollingBack Phase = "RollingBack"
	PhaseRolledBack  Phase = "RolledBack"
	PhaseFailed      Phase = "Failed"
	PhasePaused      Phase = "Paused"
)

// PlacementMigrationStatus is what the operator observed and did.
type PlacementMigrationStatus struct {
	// conditions are Ready, Reconciling and Stalled (the kstatus convention),
	// the milestones CapacityAvailable, Feasible, PodsStable, SoftApplied,
	// HardApplied and ConstraintInSync, and DisruptionReady after success.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=10
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase summarises the migration for people; decisions use conditions
	// and the operation journal.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// stage is the weakest stage verified on every target.
	// +optional
	// +kubebuilder:validation:Enum=None;Soft;Hard
	Stage Stage `json:"stage,omitempty"`

	// fieldManager is the server-side apply field manager this migration
	// writes the targets with; each migration has its own, so that two
	// migrations of one workload never release each other's fields.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	FieldManager string `json:"fieldManager,omitempty"`

	// operation is the journal of the write in flight: recorded before the
	// operator writes any target, and cleared once the write has been
	// verified (or rolled back). A reconcile that finds it finishes exactly
	// that operation.
	// +optional
	Operation *Operation `json:"operation,omitempty"`

	// capacity is the qualifying capacity found against what is needed.
	// +optional
	Capacity *CapacityStatus `json:"capacity,omitempty"`

	// rebalance records the pods mode Evict moved and the move in flight.
	// +optional
	Rebalance *RebalanceStatus `json:"rebalance,omitempty"`

	// targets records, per workload, the stage verified, what it carried
	// before and what was written.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=50
	Targets []TargetStatus `json:"targets,omitempty"`

	// retained are the workloads that stopped being targets with
	// onDelete Retain and still carry the entry the migration wrote into
	// them. Their pods are counted with the targets', never as another
	// workload's: they spread by the same rule. A workload is dropped from
	// the list once it no longer carries the entry, is gone, or is a target
	// again.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=50
	Retained []RetainedTarget `json:"retained,omitempty"`

	// hazards are the findings of the last feasibility analysis.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Hazards []Hazard `json:"hazards,omitempty"`

	// schedulerProfile is the kube-scheduler profile (its schedulerName)
	// whose filters and scores the last analysis predicted every target's
	// pods with: the profile their spec.schedulerName names in the
	// operator's --scheduler-config (kube-scheduler's default profile
	// without one). Empty when the targets' pods name different profiles:
	// each entry of plan then names its own.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SchedulerProfile string `json:"schedulerProfile,omitempty"`

	// plan is, per target, the change the next stage makes and the pods it
	// recreates.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=50
	Plan []TargetPlan `json:"plan,omitempty"`

	// protectedPods are the pods guards.protectedPods selected when the
	// current operation started; each must keep its uid and restart count
	// until the stage is verified.
	// +optional
	ProtectedPods *ProtectedPodsRecord `json:"protectedPods,omitempty"`

	// driftCorrections counts how often the constraint was re-applied after
	// another writer removed or changed it; after three the migration stalls.
	// +optional
	DriftCorrections int32 `json:"driftCorrections,omitempty"`

	// halt records that the migration stopped at a generation after undoing
	// or giving up on a write: a stage rolled back, drift given up on, the
	// write budget spent. It holds until the spec changes or a retry is
	// asked for. A migration blocked before it wrote anything has none: it
	// resumes by itself once the cause is gone.
	// +optional
	Halt *Halt `json:"halt,omitempty"`

	// lastHandledRetry is the value of the placementguard.io/retry
	// annotation last acted on, so that a value triggers one retry.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastHandledRetry string `json:"lastHandledRetry,omitempty"`
}

// HaltOutcome is how a halted migration ended.
// +kubebuilder:validation:Enum=RolledBack;Failed
type HaltOutcome string

const (
	// HaltRolledBack: a stage was rolled back and the rollback rolled out.
	HaltRolledBack HaltOutcome = "RolledBack"
	// HaltFailed: the operator gave up on a write (drift kept undoing it,
	// or the write budget was spent).
	HaltFailed HaltOutcome = "Failed"
)

// Halt is the milestone of a migration that stopped for good at a
// generation.
type Halt struct {
	// outcome is RolledBack or Failed.
	// +required
	Outcome HaltOutcome `json:"outcome"`
	// reason says why, in one word.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// message says why and what to do, for people.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// generation is the migration's generation it halted at; an edited
	// spec lifts it.
	// +required
	Generation int64 `json:"generation"`
	// at is when it halted.
	// +required
	At metav1.Time `json:"at"`
}

// OperationAction is what an operation writes into the targets.
// +kubebuilder:validation:Enum=ApplyStage;Verify;RollBack;Reapply;Revert
type OperationAction string

const (
	// ActionApplyStage writes a stage and verifies its rollout.
	ActionApplyStage OperationAction = "ApplyStage"
	// ActionVerify writes nothing: a target found carrying a stage that no
	// verified record covers (its record was lost) is verified and soaked
	// before anything stronger.
	ActionVerify OperationAction = "Verify"
	// ActionRollBack writes back what the targets carried before the stage
	// and waits until that rolled out.
	ActionRollBack OperationAction = "RollBack"
	// ActionReapply writes the verified stage again after another writer
	// removed it.
	ActionReapply OperationAction = "Reapply"
	// ActionRevert removes the migration's entry from targets that stopped
	// being targets, or before the migration is deleted (onDelete Revert).
	ActionRevert OperationAction = "Revert"
)

// Operation is one write of the migration into its targets, recorded
// before it is made.
type Operation struct {
	// action is what the operation writes.
	// +required
	Action OperationAction `json:"action"`

	// stage is the stage the operation leaves the targets at.
	// +required
	// +kubebuilder:validation:Enum=None;Soft;Hard
	Stage Stage `json:"stage"`

	// from is the stage the targets carried when the operation started.
	// +optional
	// +kubebuilder:validation:Enum=None;Soft;Hard
	From Stage `json:"from,omitempty"`

	// reason says why a rollback was started, in one word.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// message says why a rollback was started, for people.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// startedAt is when the operation was recorded; its stage timeout
	// counts from here.
	// +required
	StartedAt metav1.Time `json:"startedAt"`

	// timeoutFrom is when the stage timeout counts from, when not from
	// startedAt: startedAt moved on by the time a target spent paused,
	// since a paused workload does not roll out.
	// +optional
	TimeoutFrom *metav1.Time `json:"timeoutFrom,omitempty"`

	// pausedAt is when a target of the operation was first seen paused,
	// while it is; its rollout and the stage timeout wait for it.
	// +optional
	PausedAt *metav1.Time `json:"pausedAt,omitempty"`

	// notBefore holds the write until then: the end of the soak before
	// it. A Hard stage's intent is recorded with the Soft stage's
	// verification; when the soak ends the decision is made again, and the
	// write is made at once if it records the same intent, or the intent is
	// dropped if not. Unset for an operation whose write is due.
	// +optional
	NotBefore *metav1.Time `json:"notBefore,omitempty"`

	// generation is the migration's generation the operation was decided
	// under; a spec edited since is acted on once it has finished.
	// +optional
	Generation int64 `json:"generation,omitempty"`

	// targets are the workloads the operation writes.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=50
	Targets []OperationTarget `json:"targets,omitempty"`
}

// OperationTarget is one workload of an operation.
type OperationTarget struct {
	// kind is Deployment or StatefulSet.
	// +required
	Kind WorkloadKind `json:"kind"`
	// name is the workload's name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// uid is the workload's uid when the operation was recorded; a
	// workload re-created since is a different one.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid,omitempty"`
	// generationBefore is the workload's generation when the operation was
	// recorded.
	// +optional
	GenerationBefore int64 `json:"generationBefore,omitempty"`
	// appliedGeneration is the workload's generation once the operation's
	// write was made; 0 until then.
	// +optional
	AppliedGeneration int64 `json:"appliedGeneration,omitempty"`
	// entry is what the operation writes: the migration's entry as it is
	// written into the template, none for a revert.
	// +optional
	Entry *PlacementSnapshot `json:"entry,omitempty"`
	// previous is the migration's entry before the operation, which a
	// rollback writes back.
	// +optional
	Previous *PlacementSnapshot `json:"previous,omitempty"`
	// podsBefore are the workload's pods when the operation was recorded.
	// +optional
	PodsBefore *PodSetRecord `json:"podsBefore,omitempty"`
}

// CapacityStatus compares the qualifying capacity with what the constraint needs.
type CapacityStatus struct {
	// qualifyingNodes is how many nodes qualify.
	// +required
	QualifyingNodes int32 `json:"qualifyingNodes"`
	// requiredNodes is how many qualifying nodes the hard stage needs.
	// +required
	RequiredNodes int32 `json:"requiredNodes"`
	// qualifyingDomains is how many topology domains the qualifying nodes span.
	// +required
	QualifyingDomains int32 `json:"qualifyingDomains"`
	// requiredDomains is how many domains the hard stage needs.
	// +required
	RequiredDomains int32 `json:"requiredDomains"`
	// nodes are the first qualifying nodes, by name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=253
	Nodes []string `json:"nodes,omitempty"`
	// summary is "found/needed" of the scarcer of nodes and domains, for
	// kubectl's Capacity column.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Summary string `json:"summary,omitempty"`
	// request is the capacity asked of the autoscaler while the migration
	// waits for it (spec.capacity.provision); absent when nothing is asked.
	// +optional
	Request *CapacityRequestStatus `json:"request,omitempty"`
	// launchedNodes are the nodes launched for the migration's capacity
	// requests over its whole life, by name, those that left since
	// included: they count against spec.capacity.provision.maxNodes until
	// the migration ends, whichever of its requests they were launched for.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=253
	LaunchedNodes []string `json:"launchedNodes,omitempty"`
}

// CapacityRequestStatus is what the migration asked an autoscaler for. It is
// recorded before the request is created and removed after it is deleted,
// so a request the operator made is never forgotten.
type CapacityRequestStatus struct {
	// kind is CapacityBuffer or Deployment (placeholder pods).
	// +required
	// +kubebuilder:validation:Enum=CapacityBuffer;Deployment
	Kind string `json:"kind"`
	// name is the request's name, in the migration's namespace.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// replicas is how many placeholder pods, one per node, were asked for.
	// +required
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`
	// shortfall is how many nodes the final stage lacks; more than replicas
	// when maxNodes capped the request.
	// +required
	// +kubebuilder:validation:Minimum=0
	Shortfall int32 `json:"shortfall"`
	// baselineNodes is how many nodes qualified when the request was
	// recorded. Nodes that qualify beyond them are taken to be the ones
	// asked for: they count against maxNodes, and the request keeps them.
	// +required
	// +kubebuilder:validation:Minimum=0
	BaselineNodes int32 `json:"baselineNodes"`
	// since is when the request was first recorded.
	// +required
	Since metav1.Time `json:"since"`
	// autoscaler is the autoscaler's latest word on the request: the
	// CapacityBuffer's Provisioning condition, or the placeholder pods'
	// state.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Autoscaler string `json:"autoscaler,omitempty"`
}

// RetainedTarget is a former target that keeps the migration's entry.
type RetainedTarget struct {
	// kind is Deployment or StatefulSet.
	// +required
	Kind WorkloadKind `json:"kind"`
	// name is the workload's name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// uid is the workload's uid; a workload re-created since is another.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid,omitempty"`
	// applied is the entry the migration wrote into it and it keeps.
	// +optional
	Applied *PlacementSnapshot `json:"applied,omitempty"`
}

// TargetStatus is what the migration knows about one workload.
type TargetStatus struct {
	// kind is Deployment or StatefulSet.
	// +required
	Kind WorkloadKind `json:"kind"`
	// name is the workload's name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// uid is the workload's uid.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid,omitempty"`
	// stage is the stage of the migration's entry the live template carries.
	// +optional
	// +kubebuilder:validation:Enum=None;Soft;Hard
	Stage Stage `json:"stage,omitempty"`
	// verified is the stage last verified on the workload and when: the
	// soft stage's soak counts from it.
	// +optional
	Verified *StageMilestone `json:"verified,omitempty"`
	// before is the workload's anti-affinity and spread constraints as found
	// before the migration first changed it, kept for audit.
	// +optional
	Before *PlacementSnapshot `json:"before,omitempty"`
	// applied is the migration's entry in the workload's pod template at
	// the verified stage, exactly as written: with the matchLabelKeys the
	// operator adds by default (see
	// spec.constraint.topologySpread.revisionScope). Drift is judged
	// against it.
	// +optional
	Applied *PlacementSnapshot `json:"applied,omitempty"`
	// pods are the workload's pods when its last stage was verified: the
	// soak's guards compare with them.
	// +optional
	Pods *PodSetRecord `json:"pods,omitempty"`
	// stages records the last stages applied: when, how they ended, and
	// the pods before and after.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	Stages []StageRecord `json:"stages,omitempty"`
}

// StageMilestone is a stage and when it was reached.
type StageMilestone struct {
	// stage is Soft or Hard.
	// +kubebuilder:validation:Enum=None;Soft;Hard
	// +required
	Stage Stage `json:"stage"`
	// at is when it was verified.
	// +required
	At metav1.Time `json:"at"`
}

// StageOutcome is how a stage ended.
// +kubebuilder:validation:Enum=Verified;RolledBack;Superseded
type StageOutcome string

const (
	OutcomeVerified   StageOutcome = "Verified"
	OutcomeRolledBack StageOutcome = "RolledBack"
	// OutcomeSuperseded is a stage that ended because the spec changed.
	OutcomeSuperseded StageOutcome = "Superseded"
)

// StageRecord is the history of one stage on one workload.
type StageRecord struct {
	// stage is Soft or Hard.
	// +kubebuilder:validation:Enum=None;Soft;Hard
	// +required
	Stage Stage `json:"stage"`
	// startedAt is when the stage was applied.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// completedAt is when the stage was verified or rolled back.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// outcome is how the stage ended.
	// +optional
	Outcome StageOutcome `json:"outcome,omitempty"`
	// podsBefore summarises the pods before the stage.
	// +optional
	PodsBefore *PodSetSummary `json:"podsBefore,omitempty"`
	// podsAfter summarises the pods when the stage ended.
	// +optional
	PodsAfter *PodSetSummary `json:"podsAfter,omitempty"`
}

// PodSetSummary identifies a set of pod incarnations: the digest changes
// when a pod is recreated, added, removed or restarted.
type PodSetSummary struct {
	// count is how many pods the set holds.
	// +required
	Count int32 `json:"count"`
	// restarts is the sum of their containers' restart counts.
	// +required
	Restarts int32 `json:"restarts"`
	// digest hashes every pod's uid and restart count.
	// +kubebuilder:validation:MaxLength=64
	// +required
	Digest string `json:"digest"`
}

// PodSetRecord is a set of pods observed at one moment: a summary of every
// pod and the pods that had restarted by then with their counts (a pod not
// listed had none, unless the list is marked incomplete).
type PodSetRecord struct {
	PodSetSummary `json:",inline"`
	// observedAt is when the pods were observed.
	// +required
	ObservedAt metav1.Time `json:"observedAt"`
	// restarted are the pods that had restarted, with their counts.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Restarted []PodRestarts `json:"restarted,omitempty"`
	// restartedIncomplete is true when more pods had restarted than
	// Restarted holds: the guards then detect later restarts of the others
	// from their containers' start times, one restart each.
	// +optional
	RestartedIncomplete bool `json:"restartedIncomplete,omitempty"`
}

// ProtectedPodsRecord is the record of the protected pods, with the first
// of them by name, so that a message can say which one changed.
type ProtectedPodsRecord struct {
	PodSetRecord `json:",inline"`
	// pods are the first pods by name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Pods []PodObservation `json:"pods,omitempty"`
}

// PodRestarts is a pod's restart count at an observation.
type PodRestarts struct {
	// uid of the pod.
	// +kubebuilder:validation:MaxLength=64
	// +required
	UID string `json:"uid"`
	// restarts is the sum of the restart counts of the pod's containers.
	// +required
	Restarts int32 `json:"restarts"`
}

// PodObservation identifies one incarnation of a pod: a recreated pod has a
// new uid and creationTimestamp, a restarted one a higher restart count.
type PodObservation struct {
	// name of the pod.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// uid of the pod.
	// +kubebuilder:validation:MaxLength=64
	// +required
	UID string `json:"uid"`
	// creationTimestamp of the pod.
	// +required
	CreationTimestamp metav1.Time `json:"creationTimestamp"`
	// restarts is the sum of the restart counts of the pod's containers.
	// +required
	Restarts int32 `json:"restarts"`
	// nodeName is where the pod ran.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName,omitempty"`
}

// HazardSeverity separates findings that stop a migration from notes.
// +kubebuilder:validation:Enum=Blocking;Info
type HazardSeverity string

const (
	SeverityBlocking HazardSeverity = "Blocking"
	SeverityInfo     HazardSeverity = "Info"
)

// Hazard is one finding of the feasibility analysis.
type Hazard struct {
	// type is a stable name such as RolloutDeadlock or SelectorOverlap;
	// docs/how-it-works.md lists them and what each means.
	// +kubebuilder:validation:MaxLength=64
	// +required
	Type string `json:"type"`
	// severity is Blocking or Info.
	// +required
	Severity HazardSeverity `json:"severity"`
	// target is the workload the finding is about, as Kind/name.
	// +optional
	// +kubebuilder:validation:MaxLength=320
	Target string `json:"target,omitempty"`
	// message says what was found and what change would fix it.
	// +kubebuilder:validation:MaxLength=2048
	// +required
	Message string `json:"message"`
}

// TargetPlan is the change the next stage makes to one workload.
type TargetPlan struct {
	// kind is Deployment or StatefulSet.
	// +required
	Kind WorkloadKind `json:"kind"`
	// name is the workload's name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// stage is the stage the change applies.
	// +kubebuilder:validation:Enum=Soft;Hard
	// +required
	Stage Stage `json:"stage"`
	// change describes the fields added or replaced, in words.
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Change string `json:"change"`
	// recreates are the first pods the change would recreate.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:MaxLength=253
	Recreates []string `json:"recreates,omitempty"`
	// recreatesCount is how many pods the change would recreate.
	// +optional
	RecreatesCount int32 `json:"recreatesCount,omitempty"`
	// predictedPlacement says, for a hard spread, where the rollout of the
	// hard stage can leave the workload's pods, per domain.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	PredictedPlacement string `json:"predictedPlacement,omitempty"`
	// schedulerProfile is the kube-scheduler profile (its schedulerName)
	// the workload's pods were predicted with: the one their
	// spec.schedulerName names in the operator's --scheduler-config.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SchedulerProfile string `json:"schedulerProfile,omitempty"`
}

// RebalanceStatus is the journal of mode Evict: the move in flight,
// recorded before its eviction, and the last moves made.
type RebalanceStatus struct {
	// move is the move in flight: recorded before the pod is evicted, so
	// that an operator killed between the two evicts it once, and kept
	// until its replacement is Ready.
	// +optional
	Move *PodMove `json:"move,omitempty"`

	// moves are the last moves, newest last: the budget counts those of
	// the last hour, refused evictions included.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Moves []PodMove `json:"moves,omitempty"`

	// stopped says why moves stopped for this generation (a misprediction,
	// a move that did not improve the spread, a replacement never Ready);
	// a change of the spec lifts it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Stopped string `json:"stopped,omitempty"`

	// stoppedGeneration is the generation stopped applies to.
	// +optional
	StoppedGeneration int64 `json:"stoppedGeneration,omitempty"`
}

// PodMove is one pod moved, or to be moved, to where the engine places its
// replacement.
type PodMove struct {
	// target is the workload, Kind/name.
	// +required
	// +kubebuilder:validation:MaxLength=300
	Target string `json:"target"`

	// pod is the name of the pod evicted.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod"`

	// uid is the uid of the pod evicted.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid,omitempty"`

	// from is the domain the pod left.
	// +required
	// +kubebuilder:validation:MaxLength=253
	From string `json:"from"`

	// to is the domain the engine predicted for its replacement.
	// +required
	// +kubebuilder:validation:MaxLength=253
	To string `json:"to"`

	// node is the node the engine predicted for its replacement.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node,omitempty"`

	// skewBefore is the target's skew when the move was planned: the move
	// must not leave it larger.
	// +optional
	SkewBefore int32 `json:"skewBefore,omitempty"`

	// evicted is set once the Eviction API accepted the eviction.
	// +optional
	Evicted bool `json:"evicted,omitempty"`

	// at is when the move was recorded (its eviction and replacement come
	// after), or when its eviction was refused.
	// +required
	At metav1.Time `json:"at"`

	// result is Landed (the replacement is Ready where predicted),
	// Mispredicted, Refused (a PodDisruptionBudget or the API server
	// refused the eviction) or Gone (the pod went by itself); empty while
	// in flight.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Result string `json:"result,omitempty"`

	// message says why an eviction was refused.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// replacement names the pod that replaced the evicted one.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Replacement string `json:"replacement,omitempty"`

	// landedIn is the domain the replacement runs in.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	LandedIn string `json:"landedIn,omitempty"`
}

// Ref is the workload the target's record is of.
func (t TargetStatus) Ref() TargetRef { return TargetRef{Kind: t.Kind, Name: t.Name} }

// Ref is the workload the operation writes.
func (t OperationTarget) Ref() TargetRef { return TargetRef{Kind: t.Kind, Name: t.Name} }

// Held reports whether the operation's write waits for its notBefore:
// recorded ahead, it writes nothing yet and holds no target.
func (op *Operation) Held() bool {
	return op != nil && op.NotBefore != nil
}

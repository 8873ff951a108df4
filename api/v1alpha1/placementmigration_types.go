package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkloadKind names a workload controller that placement-guard can migrate.
// +kubebuilder:validation:Enum=Deployment;StatefulSet
type WorkloadKind string

const (
	KindDeployment  WorkloadKind = "Deployment"
	KindStatefulSet WorkloadKind = "StatefulSet"
)

// Stage is the strength at which the constraint is applied to a workload.
// Fields set Soft;Hard or None;Soft;Hard as their enum: status also
// reports a workload without our constraint.
type Stage string

const (
	// StageSoft is the preferred anti-affinity term or a ScheduleAnyway spread:
	// the scheduler favours it but never leaves a pod Pending because of it.
	StageSoft Stage = "Soft"
	// StageHard is the required anti-affinity term or a DoNotSchedule spread:
	// a pod that cannot satisfy it stays Pending.
	StageHard Stage = "Hard"
)

// StageNone is the stage of a workload that carries none of our constraint.
// It only appears in status.
const StageNone Stage = "None"

// DeletionPolicy says what happens to the applied constraint when the
// PlacementMigration is deleted.
// +kubebuilder:validation:Enum=Retain;Revert
type DeletionPolicy string

const (
	// DeletionRetain leaves the applied constraint on the workloads.
	DeletionRetain DeletionPolicy = "Retain"
	// DeletionRevert restores the constraints recorded before the migration.
	DeletionRevert DeletionPolicy = "Revert"
)

// InclusionPolicy mirrors the scheduler's nodeAffinityPolicy and nodeTaintsPolicy.
// +kubebuilder:validation:Enum=Honor;Ignore
type InclusionPolicy string

const (
	PolicyHonor  InclusionPolicy = "Honor"
	PolicyIgnore InclusionPolicy = "Ignore"
)

// PlacementMigrationSpec says which workloads receive which placement
// constraint, how much capacity it needs and how carefully to roll it out.
// +kubebuilder:validation:XValidation:rule="has(self.targets) != has(self.targetSelector)",message="set exactly one of spec.targets (workloads by name) or spec.targetSelector (workloads by label)"
// +kubebuilder:validation:XValidation:rule="!has(self.constraint.topologySpread) || !has(self.constraint.topologySpread.minDomains) || self.finalStage == 'Hard'",message="constraint.topologySpread.minDomains needs finalStage Hard: the scheduler honours minDomains only for DoNotSchedule spreads"
type PlacementMigrationSpec struct {
	// Targets names the workloads, in the PlacementMigration's namespace, that
	// receive the constraint. Set either targets or targetSelector.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	Targets []TargetRef `json:"targets,omitempty"`

	// TargetSelector chooses the workloads in the PlacementMigration's
	// namespace by label, for example every controller sharing an
	// app.kubernetes.io/part-of label. Set either targets or targetSelector.
	// +optional
	TargetSelector *TargetSelector `json:"targetSelector,omitempty"`

	// Constraint is the placement constraint to add to every target's pod
	// template. Existing affinity and spread constraints are kept.
	// +required
	Constraint Constraint `json:"constraint"`

	// Capacity says which nodes qualify for the constraint and how many must
	// exist before the hard stage is applied. Unset numbers are derived from
	// the constraint and the targets' rollout strategy.
	// +optional
	Capacity Capacity `json:"capacity,omitempty"`

	// FinalStage is the stage the migration ends in. Soft applies only the
	// preferred anti-affinity term or the ScheduleAnyway spread; Hard goes on
	// to the required term or the DoNotSchedule spread after the soak.
	// +optional
	// +kubebuilder:default=Hard
	// +kubebuilder:validation:Enum=Soft;Hard
	FinalStage Stage `json:"finalStage,omitempty"`

	// SoakDuration is how long the soft stage must stay healthy and spread
	// before the hard stage is applied. Between 0s and 24h.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="soakDuration must be between 0s and 24h"
	SoakDuration metav1.Duration `json:"soakDuration,omitempty"`

	// StageTimeout is how long a stage's rollout may take; a stage that has
	// not completed by then is rolled back. Between 30s and 24h.
	// +optional
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s') && duration(self) <= duration('24h')",message="stageTimeout must be between 30s and 24h"
	StageTimeout metav1.Duration `json:"stageTimeout,omitempty"`

	// Guards are the conditions the pods must meet before each stage and the
	// pods the migration must never cause to be recreated.
	// +optional
	// +kubebuilder:default={}
	Guards Guards `json:"guards,omitempty"`

	// Paused holds the migration in its current phase; nothing is patched
	// while it is set.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// DryRun computes capacity, feasibility and the plan, records them in
	// status and stops in phase Planned without patching any workload.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// OnDelete says what happens to the applied constraint when this object
	// is deleted: Retain keeps it, Revert restores what the targets had before.
	// +optional
	// +kubebuilder:default=Retain
	OnDelete DeletionPolicy `json:"onDelete,omitempty"`
}

// TargetRef names one workload in the PlacementMigration's namespace.
type TargetRef struct {
	// Kind is Deployment or StatefulSet.
	// +required
	Kind WorkloadKind `json:"kind"`

	// Name is the workload's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="name must be a DNS-1123 subdomain: lower case letters, digits, '-' and '.', starting and ending with a letter or digit"
	Name string `json:"name"`
}

// TargetSelector chooses workloads by label.
type TargetSelector struct {
	// Kinds are the workload kinds to select; both by default.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:default={"Deployment","StatefulSet"}
	Kinds []WorkloadKind `json:"kinds,omitempty"`

	// Selector matches the labels of the workload objects (not of their pods).
	// +required
	Selector metav1.LabelSelector `json:"selector"`
}

// Constraint is exactly one placement constraint.
// +kubebuilder:validation:XValidation:rule="has(self.podAntiAffinity) != has(self.topologySpread)",message="set exactly one of constraint.podAntiAffinity or constraint.topologySpread"
type Constraint struct {
	// PodAntiAffinity keeps each target's pods apart from the pods its
	// labelSelector selects: from each other ("replicas apart") or from
	// another workload's pods ("this workload apart from that one").
	// +optional
	PodAntiAffinity *PodAntiAffinityConstraint `json:"podAntiAffinity,omitempty"`

	// TopologySpread spreads each target's pods evenly over the domains of
	// topologyKey.
	// +optional
	TopologySpread *TopologySpreadConstraint `json:"topologySpread,omitempty"`
}

// PodAntiAffinityConstraint becomes a podAntiAffinity term on each target.
type PodAntiAffinityConstraint struct {
	// TopologyKey is the node label whose values are the domains pods are kept
	// apart in, for example kubernetes.io/hostname.
	// +required
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="topologyKey must not be empty: name a node label such as kubernetes.io/hostname or topology.kubernetes.io/zone"
	// +kubebuilder:validation:XValidation:rule="self.size() == 0 || !format.qualifiedName().validate(self).hasValue()",message="topologyKey must be a valid label key, such as kubernetes.io/hostname"
	TopologyKey string `json:"topologyKey"`

	// LabelSelector selects the pods to keep away from. When unset, each
	// target is kept apart from its own pods (the pod template's labels).
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`

	// MatchLabelKeys are pod label keys whose values, taken from the incoming
	// pod, are added to the selector; pod-template-hash scopes the term to one
	// revision of a Deployment.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=317
	MatchLabelKeys []string `json:"matchLabelKeys,omitempty"`

	// Namespaces the selected pods may be in; the target's namespace when
	// neither namespaces nor namespaceSelector is set.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelector selects further namespaces the selected pods may be in.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// TopologySpreadConstraint becomes a topologySpreadConstraints entry on each target.
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabelKeys) || !has(self.revisionScope)",message="set either matchLabelKeys or revisionScope: matchLabelKeys already says which pods the spread counts"
type TopologySpreadConstraint struct {
	// TopologyKey is the node label whose values are the domains to spread
	// over, for example topology.kubernetes.io/zone.
	// +required
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="topologyKey must not be empty: name a node label such as kubernetes.io/hostname or topology.kubernetes.io/zone"
	// +kubebuilder:validation:XValidation:rule="self.size() == 0 || !format.qualifiedName().validate(self).hasValue()",message="topologyKey must be a valid label key, such as topology.kubernetes.io/zone"
	TopologyKey string `json:"topologyKey"`

	// MaxSkew is the largest allowed difference between the number of
	// selected pods in any domain and in the emptiest eligible domain.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="maxSkew must be at least 1"
	MaxSkew int32 `json:"maxSkew,omitempty"`

	// MinDomains is the number of eligible domains below which the global
	// minimum counts as zero. Only with finalStage Hard.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="minDomains must be at least 1"
	MinDomains *int32 `json:"minDomains,omitempty"`

	// LabelSelector selects the pods that are counted. When unset, each
	// target's own pods (the pod template's labels) are counted.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`

	// MatchLabelKeys are pod label keys whose values, taken from the incoming
	// pod, are added to the selector; pod-template-hash keeps blue and green
	// revisions from being counted together. When unset on a Deployment
	// target, the operator writes matchLabelKeys: [pod-template-hash] (see
	// revisionScope).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=317
	MatchLabelKeys []string `json:"matchLabelKeys,omitempty"`

	// RevisionScope says which pods of a Deployment target the spread counts
	// when matchLabelKeys is unset. NewRevision (the default) writes
	// matchLabelKeys: [pod-template-hash], so that the scheduler counts only
	// the pods of the revision being rolled out: counting the old revision's
	// pods, which the rollout then removes, lets a rollout whose every step
	// is legal end skewed. AllRevisions writes the selector alone; the
	// migration is then Blocked with SpreadEndsSkewed when the simulated
	// rollout can end outside maxSkew. StatefulSets replace each pod in
	// place, so every revision is always counted and this field does not
	// apply to them; nor does it to a labelSelector that also selects
	// another target's pods, which spreads the targets as one set.
	// Set either matchLabelKeys or revisionScope.
	// +optional
	RevisionScope *RevisionScope `json:"revisionScope,omitempty"`

	// NodeAffinityPolicy says whether the pod's node affinity and nodeSelector
	// limit the domains counted. Honor by default, as in the scheduler.
	// +optional
	// +kubebuilder:default=Honor
	NodeAffinityPolicy InclusionPolicy `json:"nodeAffinityPolicy,omitempty"`

	// NodeTaintsPolicy says whether node taints the pod does not tolerate
	// exclude domains. Ignore by default, as in the scheduler.
	// +optional
	// +kubebuilder:default=Ignore
	NodeTaintsPolicy InclusionPolicy `json:"nodeTaintsPolicy,omitempty"`
}

// RevisionScope says which revisions of a Deployment a spread counts.
// +kubebuilder:validation:Enum=NewRevision;AllRevisions
type RevisionScope string

const (
	// RevisionScopeNew counts only the pods of the revision being rolled
	// out (matchLabelKeys: [pod-template-hash]).
	RevisionScopeNew RevisionScope = "NewRevision"
	// RevisionScopeAll counts the pods of every revision the selector
	// selects, old ones included.
	RevisionScopeAll RevisionScope = "AllRevisions"
)

// Capacity says which nodes qualify for the constraint and how many are needed.
type Capacity struct {
	// NodeSelector selects the nodes that count as qualifying, for example
	// role=data. Nodes must also admit the targets' pods (node affinity,
	// taints, allocatable resources). All nodes when unset.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// MinNodes is how many qualifying nodes must exist before the hard stage.
	// Derived from the replicas and the rollout strategy when unset.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MinNodes *int32 `json:"minNodes,omitempty"`

	// MinDomains is how many distinct values of the constraint's topologyKey
	// the qualifying nodes must span before the hard stage. Derived from the
	// constraint when unset.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MinDomains *int32 `json:"minDomains,omitempty"`
}

// Guards protect the running pods during the migration.
type Guards struct {
	// MinPodAge is how long every target pod must have existed before a stage
	// starts, so that a crash-looping or freshly moved pod is not disturbed.
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="guards.minPodAge must be between 0s and 24h"
	MinPodAge metav1.Duration `json:"minPodAge,omitempty"`

	// MaxRestarts is how many container restarts a target pod may add during
	// a stage before the stage counts as failed.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MaxRestarts int32 `json:"maxRestarts,omitempty"`

	// ProtectedPods selects pods in the namespace (for example a broker
	// without a volume) that the migration must never cause to be recreated.
	// A stage that would recreate one is refused; one recreated during a
	// stage rolls the stage back.
	// +optional
	ProtectedPods *metav1.LabelSelector `json:"protectedPods,omitempty"`
}

// Phase is a one-word summary of the migration for people and dashboards;
// the conditions carry the details.
// +kubebuilder:validation:Enum=Pending;WaitingForCapacity;Blocked;Planned;ApplyingSoft;Soaking;ApplyingHard;Verifying;Succeeded;RolledBack;Failed;Paused
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
	PhaseRolledBack         Phase = "RolledBack"
	PhaseFailed             Phase = "Failed"
	PhasePaused             Phase = "Paused"
)

// PlacementMigrationStatus is what the operator observed and did.
type PlacementMigrationStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase summarises the migration for people; decisions use conditions.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Stage is the strongest stage currently applied to the targets.
	// +optional
	// +kubebuilder:validation:Enum=None;Soft;Hard
	Stage Stage `json:"stage,omitempty"`

	// Conditions are Ready, Reconciling and Stalled (the kstatus convention)
	// and the milestones CapacityAvailable, Feasible, PodsStable, SoftApplied,
	// HardApplied and ConstraintInSync.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Capacity is the qualifying capacity found against what is needed.
	// +optional
	Capacity *CapacityStatus `json:"capacity,omitempty"`

	// Targets records, per workload, the stage applied, what it had before
	// and the pods seen around each stage.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=50
	Targets []TargetStatus `json:"targets,omitempty"`

	// Hazards are the findings of the last feasibility analysis.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Hazards []Hazard `json:"hazards,omitempty"`

	// Plan is, per target, the change the next stage makes and the pods it
	// recreates.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Plan []TargetPlan `json:"plan,omitempty"`

	// ProtectedPods are the pods guards.protectedPods selected when the
	// current stage started; each must keep its uid, creationTimestamp and
	// restart count until the stage is verified.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	ProtectedPods []PodObservation `json:"protectedPods,omitempty"`

	// DriftCorrections counts how often the constraint was re-applied after
	// another writer removed or changed it; after three the migration stalls.
	// +optional
	DriftCorrections int32 `json:"driftCorrections,omitempty"`
}

// CapacityStatus compares the qualifying capacity with what the constraint needs.
type CapacityStatus struct {
	// QualifyingNodes is how many nodes qualify.
	QualifyingNodes int32 `json:"qualifyingNodes"`
	// RequiredNodes is how many qualifying nodes the hard stage needs.
	RequiredNodes int32 `json:"requiredNodes"`
	// QualifyingDomains is how many topology domains the qualifying nodes span.
	QualifyingDomains int32 `json:"qualifyingDomains"`
	// RequiredDomains is how many domains the hard stage needs.
	RequiredDomains int32 `json:"requiredDomains"`
	// Nodes are the first qualifying nodes, by name.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=253
	Nodes []string `json:"nodes,omitempty"`
	// Summary is "found/needed" of the scarcer of nodes and domains, for
	// kubectl's Capacity column.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Summary string `json:"summary,omitempty"`
}

// TargetStatus is what the migration knows about one workload.
type TargetStatus struct {
	// Kind is Deployment or StatefulSet.
	Kind WorkloadKind `json:"kind"`
	// Name is the workload's name.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Stage is the stage of our constraint currently applied to the workload.
	// +optional
	// +kubebuilder:validation:Enum=None;Soft;Hard
	Stage Stage `json:"stage,omitempty"`
	// Before is the workload's anti-affinity and spread constraints as found
	// before the migration first changed it, kept for rollback and audit.
	// +optional
	Before *PlacementSnapshot `json:"before,omitempty"`
	// Applied is the constraint entry this migration writes into the
	// workload's pod template at its current stage, exactly as written:
	// with the matchLabelKeys the operator adds by default (see
	// spec.constraint.topologySpread.revisionScope).
	// +optional
	Applied *PlacementSnapshot `json:"applied,omitempty"`
	// AppliedGeneration is the workload's metadata.generation after our last
	// apply; the rollout of that generation is what a stage waits for.
	// +optional
	AppliedGeneration int64 `json:"appliedGeneration,omitempty"`
	// Stages records each stage applied: when, and the pods before and after.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Stages []StageRecord `json:"stages,omitempty"`
}

// PlacementSnapshot is the part of a pod template placement-guard changes.
type PlacementSnapshot struct {
	// PodAntiAffinity as found on the pod template.
	// +optional
	PodAntiAffinity *corev1.PodAntiAffinity `json:"podAntiAffinity,omitempty"`
	// TopologySpreadConstraints as found on the pod template.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}

// StageRecord is the history of one stage on one workload.
type StageRecord struct {
	// Stage is Soft or Hard.
	// +kubebuilder:validation:Enum=Soft;Hard
	Stage Stage `json:"stage"`
	// StartedAt is when the stage was applied.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when the stage was verified.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// PodsBefore are the target's pods just before the stage was applied.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	PodsBefore []PodObservation `json:"podsBefore,omitempty"`
	// PodsAfter are the target's pods once the stage was verified.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	PodsAfter []PodObservation `json:"podsAfter,omitempty"`
}

// PodObservation identifies one incarnation of a pod: a recreated pod has a
// new uid and creationTimestamp, a restarted one a higher restart count.
type PodObservation struct {
	// Name of the pod.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// UID of the pod.
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
	// CreationTimestamp of the pod.
	CreationTimestamp metav1.Time `json:"creationTimestamp"`
	// Restarts is the sum of the restart counts of the pod's containers.
	Restarts int32 `json:"restarts"`
	// NodeName is where the pod ran.
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
	// Type is a stable name such as RolloutDeadlock or SelectorOverlap.
	// +kubebuilder:validation:MaxLength=64
	Type string `json:"type"`
	// Severity is Blocking or Info.
	Severity HazardSeverity `json:"severity"`
	// Target is the workload the finding is about, as Kind/name.
	// +optional
	// +kubebuilder:validation:MaxLength=320
	Target string `json:"target,omitempty"`
	// Message says what was found and what change would fix it.
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message"`
}

// TargetPlan is the change the next stage makes to one workload.
type TargetPlan struct {
	// Kind is Deployment or StatefulSet.
	Kind WorkloadKind `json:"kind"`
	// Name is the workload's name.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Stage is the stage the change applies.
	// +kubebuilder:validation:Enum=Soft;Hard
	Stage Stage `json:"stage"`
	// Change describes the fields added or replaced, in words.
	// +kubebuilder:validation:MaxLength=2048
	Change string `json:"change"`
	// Recreates are the pods the change would recreate.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	Recreates []string `json:"recreates,omitempty"`
	// RecreatesCount is how many pods the change would recreate; Recreates
	// may list only the first of them.
	// +optional
	RecreatesCount int32 `json:"recreatesCount,omitempty"`
	// PredictedPlacement says, for a hard spread, where the rollout of the
	// hard stage can leave the workload's pods, per domain.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	PredictedPlacement string `json:"predictedPlacement,omitempty"`
}

// PlacementMigration turns a change of a workload's placement constraint into
// a guarded migration: wait for capacity, prove the rollout can complete,
// apply soft then hard, verify, and roll back on its own when a stage stalls.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pmig,categories=placementguard
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Stage",type=string,JSONPath=`.status.stage`
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=`.status.capacity.summary`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PlacementMigration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired migration.
	// +required
	Spec PlacementMigrationSpec `json:"spec"`

	// Status is what the operator observed and did.
	// +optional
	Status PlacementMigrationStatus `json:"status,omitempty"`
}

// PlacementMigrationList is a list of PlacementMigrations.
// +kubebuilder:object:root=true
type PlacementMigrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PlacementMigration `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PlacementMigration{}, &PlacementMigrationList{})
}

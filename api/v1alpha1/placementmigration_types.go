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

// Rank orders stages by strength: None, Soft, Hard.
func (s Stage) Rank() int {
	switch s {
	case StageSoft:
		return 1
	case StageHard:
		return 2
	}
	return 0
}

// DeletionPolicy says what happens to the applied constraint when the
// PlacementMigration is deleted, or when a workload stops being a target.
// +kubebuilder:validation:Enum=Retain;Revert
type DeletionPolicy string

const (
	// DeletionRetain leaves the applied constraint on the workloads.
	DeletionRetain DeletionPolicy = "Retain"
	// DeletionRevert restores the constraints recorded before the migration.
	DeletionRevert DeletionPolicy = "Revert"
)

// DisruptionPolicy says what the pre-flight check of disruptions does
// before the hard stage.
// +kubebuilder:validation:Enum=Ignore;Warn;Block
type DisruptionPolicy string

const (
	// DisruptionIgnore skips the check.
	DisruptionIgnore DisruptionPolicy = "Ignore"
	// DisruptionWarn applies the hard stage and tells, in a Warning Event,
	// the disruption it would not survive.
	DisruptionWarn DisruptionPolicy = "Warn"
	// DisruptionBlock keeps the soft stage and blocks the migration until
	// the disruption is survivable or the policy changes.
	DisruptionBlock DisruptionPolicy = "Block"
)

// InclusionPolicy mirrors the scheduler's nodeAffinityPolicy and nodeTaintsPolicy.
// +kubebuilder:validation:Enum=Honor;Ignore
type InclusionPolicy string

const (
	PolicyHonor  InclusionPolicy = "Honor"
	PolicyIgnore InclusionPolicy = "Ignore"
)

// RetryAnnotation restarts a RolledBack or Failed migration from its last
// verified stage when set to a value the migration has not handled yet
// (status.lastHandledRetry), for example a timestamp.
const RetryAnnotation = "placementguard.io/retry"

// PlacementMigrationSpec says which workloads receive which placement
// constraint, how much capacity it needs and how carefully to roll it out.
// +kubebuilder:validation:XValidation:rule="has(self.targets) != has(self.targetSelector)",message="set exactly one of spec.targets (workloads by name) or spec.targetSelector (workloads by label)"
// +kubebuilder:validation:XValidation:rule="!has(self.constraint.topologySpread) || !has(self.constraint.topologySpread.minDomains) || !has(self.finalStage) || self.finalStage == 'Hard'",message="constraint.topologySpread.minDomains needs finalStage Hard: the scheduler honours minDomains only for DoNotSchedule spreads"
type PlacementMigrationSpec struct {
	// targets names the workloads, in the PlacementMigration's namespace, that
	// receive the constraint. Set either targets or targetSelector.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	Targets []TargetRef `json:"targets,omitempty"`

	// targetSelector chooses the workloads in the PlacementMigration's
	// namespace by label, for example every controller sharing an
	// app.kubernetes.io/part-of label. Set either targets or targetSelector.
	// A workload that starts to match goes through every stage from the
	// start; one that stops matching is reverted or retained as onDelete
	// says. A selector that selects more than 50 workloads is Blocked.
	// +optional
	TargetSelector *TargetSelector `json:"targetSelector,omitempty"`

	// constraint is the placement constraint to add to every target's pod
	// template. Existing affinity and spread constraints are kept.
	// +required
	Constraint Constraint `json:"constraint,omitzero"`

	// capacity says which nodes qualify for the constraint and how many must
	// exist before the hard stage is applied. Unset numbers are derived from
	// the constraint and the targets' rollout strategy.
	// +optional
	Capacity *Capacity `json:"capacity,omitempty"`

	// finalStage is the stage the migration ends in. Soft applies only the
	// preferred anti-affinity term or the ScheduleAnyway spread; Hard goes on
	// to the required term or the DoNotSchedule spread after the soak.
	// +optional
	// +kubebuilder:default=Hard
	// +kubebuilder:validation:Enum=Soft;Hard
	FinalStage Stage `json:"finalStage,omitempty"`

	// soakDuration is how long the soft stage must stay healthy and spread
	// before the hard stage is applied. Between 0s and 24h; 5m when unset.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="soakDuration must be between 0s and 24h"
	SoakDuration *metav1.Duration `json:"soakDuration,omitempty"`

	// stageTimeout is how long a stage's rollout may take; a stage that has
	// not completed by then is rolled back. Between 30s and 24h; 15m when
	// unset.
	// +optional
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s') && duration(self) <= duration('24h')",message="stageTimeout must be between 30s and 24h"
	StageTimeout *metav1.Duration `json:"stageTimeout,omitempty"`

	// guards are the conditions the pods must meet before each stage and the
	// pods the migration must never cause to be recreated.
	// +optional
	// +kubebuilder:default={}
	Guards *Guards `json:"guards,omitempty"`

	// paused holds the migration in its current phase; nothing is patched
	// while it is set.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// dryRun computes capacity, feasibility and the plan, records them in
	// status and stops in phase Planned without patching any workload.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// onDelete says what happens to the applied constraint when this object
	// is deleted, or a workload stops being a target: Retain keeps it,
	// Revert restores what the workload had before.
	// +optional
	// +kubebuilder:default=Retain
	OnDelete DeletionPolicy `json:"onDelete,omitempty"`

	// rebalance keeps the constraint true after success, as the cluster
	// moves under it. Off when unset.
	// +optional
	Rebalance *Rebalance `json:"rebalance,omitempty"`
}

// RebalanceMode is what a migration does after success to keep its
// constraint true.
// +kubebuilder:validation:Enum=Off;DeletionCost;Evict
type RebalanceMode string

const (
	// RebalanceOff does nothing after success.
	RebalanceOff RebalanceMode = "Off"
	// RebalanceDeletionCost keeps controller.kubernetes.io/pod-deletion-cost
	// on the pods of the Deployment targets, so that a scale-down removes
	// pods from the most crowded domains of the constraint's topology key
	// first and leaves the spread as even as it was (the ReplicaSet
	// controller's own choice ignores zones). Costs are written only when
	// the ranking changes, never over a cost someone else wrote, and
	// removed when the mode is Off again or the migration is deleted. The
	// operator needs the opt-in rebalance ClusterRole (patch pods) bound in
	// the namespace.
	RebalanceDeletionCost RebalanceMode = "DeletionCost"
	// RebalanceEvict keeps the deletion costs and, when the pods of a
	// Deployment target sit more unevenly than the engine can now place
	// them (a soft spread or anti-affinity placed them while a zone or node
	// was missing, a zone came back after an outage), moves them one at a
	// time:
	// the engine picks the pod and predicts where its replacement lands, the
	// operator evicts it through the Eviction API (PodDisruptionBudgets
	// hold), waits for the replacement to be Ready where predicted, and
	// moves the next only if the spread improved, within maxMovesPerHour.
	// The operator needs the opt-in rebalance ClusterRole for the costs and
	// the opt-in evict ClusterRole for the evictions.
	RebalanceEvict RebalanceMode = "Evict"
)

// Rebalance says how the migration keeps its constraint true after
// success.
type Rebalance struct {
	// mode is Off (the default), DeletionCost or Evict.
	// +optional
	// +kubebuilder:default=Off
	Mode RebalanceMode `json:"mode,omitempty"`

	// maxMovesPerHour is how many pods mode Evict may evict in any hour,
	// refused evictions included; 6 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	MaxMovesPerHour *int32 `json:"maxMovesPerHour,omitempty"`

	// moveLocalData lets mode Evict move pods that keep data on their
	// node: a hostPath volume, or an emptyDir on the node's disk (not
	// medium Memory). A move leaves that data behind, or loses it, so such
	// pods stay where they are unless this is true, as cluster-autoscaler
	// and the descheduler keep them by default.
	// +optional
	MoveLocalData *bool `json:"moveLocalData,omitempty"`
}

// TargetRef names one workload in the PlacementMigration's namespace.
type TargetRef struct {
	// kind is Deployment or StatefulSet.
	// +required
	Kind WorkloadKind `json:"kind,omitempty"`

	// name is the workload's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="name must be a DNS-1123 subdomain: lower case letters, digits, '-' and '.', starting and ending with a letter or digit"
	Name string `json:"name,omitempty"`
}

// String is the reference as placement-guard's messages, status and keys
// write it: "Kind/name"; empty for no workload (a finding about the
// cluster).
func (r TargetRef) String() string {
	if r == (TargetRef{}) {
		return ""
	}
	return string(r.Kind) + "/" + r.Name
}

// TargetSelector chooses workloads by label.
// +kubebuilder:validation:XValidation:rule="(has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",message="targetSelector.selector needs at least one matchLabels or matchExpressions entry: an empty selector would select every workload in the namespace"
type TargetSelector struct {
	// kinds are the workload kinds to select; both by default.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:default={"Deployment","StatefulSet"}
	Kinds []WorkloadKind `json:"kinds,omitempty"`

	// selector matches the labels of the workload objects (not of their pods).
	// +required
	Selector LabelSelector `json:"selector"`
}

// LabelSelector is a label query, written as a metav1.LabelSelector, with
// bounds that let the API server check its syntax when it is created
// rather than when it is used.
type LabelSelector struct {
	// matchLabels are key=value pairs a label set must all carry.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="matchLabels keys must be valid label keys, such as app or app.kubernetes.io/part-of"
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`

	// matchExpressions are requirements a label set must all meet.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelValue is the value of a label.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="!format.labelValue().validate(self).hasValue()",message="must be a valid label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
type LabelValue string

// LabelSelectorRequirement is one requirement of a LabelSelector.
// +kubebuilder:validation:XValidation:rule="(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",message="operators In and NotIn need values; Exists and DoesNotExist take none"
type LabelSelectorRequirement struct {
	// key is the label key the requirement applies to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="key must be a valid label key, such as app or app.kubernetes.io/part-of"
	Key string `json:"key,omitempty"`

	// operator is In, NotIn, Exists or DoesNotExist.
	// +required
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator,omitempty"`

	// values are the label values In and NotIn compare with.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.all(v, !format.labelValue().validate(v).hasValue())",message="values must be valid label values"
	Values []string `json:"values,omitempty"`
}

// Constraint is exactly one placement constraint.
// +kubebuilder:validation:XValidation:rule="has(self.podAntiAffinity) != has(self.topologySpread)",message="set exactly one of constraint.podAntiAffinity or constraint.topologySpread"
// +kubebuilder:validation:MinProperties=1
type Constraint struct {
	// podAntiAffinity keeps each target's pods apart from the pods its
	// labelSelector selects: from each other ("replicas apart") or from
	// another workload's pods ("this workload apart from that one").
	// +optional
	PodAntiAffinity *PodAntiAffinityConstraint `json:"podAntiAffinity,omitempty"`

	// topologySpread spreads each target's pods evenly over the domains of
	// topologyKey.
	// +optional
	TopologySpread *TopologySpreadConstraint `json:"topologySpread,omitempty"`
}

// PodAntiAffinityConstraint becomes a podAntiAffinity term on each target.
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabelKeys) || !has(self.labelSelector) || self.matchLabelKeys.all(k, !(has(self.labelSelector.matchLabels) && k in self.labelSelector.matchLabels) && !(has(self.labelSelector.matchExpressions) && self.labelSelector.matchExpressions.exists(e, e.key == k)))",message="a key of matchLabelKeys may not also be in labelSelector: the API server refuses such a pod template"
type PodAntiAffinityConstraint struct {
	// topologyKey is the node label whose values are the domains pods are kept
	// apart in, for example kubernetes.io/hostname.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="topologyKey must not be empty: name a node label such as kubernetes.io/hostname or topology.kubernetes.io/zone"
	// +kubebuilder:validation:XValidation:rule="self.size() == 0 || !format.qualifiedName().validate(self).hasValue()",message="topologyKey must be a valid label key, such as kubernetes.io/hostname"
	TopologyKey string `json:"topologyKey,omitempty"`

	// labelSelector selects the pods to keep away from. When unset, each
	// target is kept apart from its own pods (the pod template's labels).
	// +optional
	LabelSelector *LabelSelector `json:"labelSelector,omitempty"`

	// matchLabelKeys are pod label keys whose values, taken from the incoming
	// pod, are added to the selector; pod-template-hash scopes the term to one
	// revision of a Deployment. A key may not also be in labelSelector.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="matchLabelKeys items must be valid label keys, such as pod-template-hash"
	MatchLabelKeys []string `json:"matchLabelKeys,omitempty"`

	// namespaces the selected pods may be in; the target's namespace when
	// neither namespaces nor namespaceSelector is set.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.all(n, !format.dns1123Label().validate(n).hasValue())",message="namespaces items must be namespace names: lower case letters, digits and '-', starting and ending with a letter or digit"
	Namespaces []string `json:"namespaces,omitempty"`

	// namespaceSelector selects further namespaces the selected pods may be in.
	// +optional
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
}

// TopologySpreadConstraint becomes a topologySpreadConstraints entry on each target.
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabelKeys) || !has(self.labelSelector) || self.matchLabelKeys.all(k, !(has(self.labelSelector.matchLabels) && k in self.labelSelector.matchLabels) && !(has(self.labelSelector.matchExpressions) && self.labelSelector.matchExpressions.exists(e, e.key == k)))",message="a key of matchLabelKeys may not also be in labelSelector: the API server refuses such a pod template"
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabelKeys) || !has(self.revisionScope)",message="set either matchLabelKeys or revisionScope: matchLabelKeys already says which pods the spread counts"
type TopologySpreadConstraint struct {
	// topologyKey is the node label whose values are the domains to spread
	// over, for example topology.kubernetes.io/zone.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="topologyKey must not be empty: name a node label such as kubernetes.io/hostname or topology.kubernetes.io/zone"
	// +kubebuilder:validation:XValidation:rule="self.size() == 0 || !format.qualifiedName().validate(self).hasValue()",message="topologyKey must be a valid label key, such as topology.kubernetes.io/zone"
	TopologyKey string `json:"topologyKey,omitempty"`

	// maxSkew is the largest allowed difference between the number of
	// selected pods in any domain and in the emptiest eligible domain.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="maxSkew must be at least 1"
	MaxSkew int32 `json:"maxSkew,omitempty"`

	// minDomains is the number of eligible domains below which the global
	// minimum counts as zero. Only with finalStage Hard.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="minDomains must be at least 1"
	MinDomains *int32 `json:"minDomains,omitempty"`

	// labelSelector selects the pods that are counted. When unset, each
	// target's own pods (the pod template's labels) are counted.
	// +optional
	LabelSelector *LabelSelector `json:"labelSelector,omitempty"`

	// matchLabelKeys are pod label keys whose values, taken from the incoming
	// pod, are added to the selector; pod-template-hash keeps blue and green
	// revisions from being counted together. When unset on a Deployment
	// target, the operator writes matchLabelKeys: [pod-template-hash] (see
	// revisionScope). A key may not also be in labelSelector.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="matchLabelKeys items must be valid label keys, such as pod-template-hash"
	MatchLabelKeys []string `json:"matchLabelKeys,omitempty"`

	// revisionScope says which pods of a Deployment target the spread counts
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

	// nodeAffinityPolicy says whether the pod's node affinity and nodeSelector
	// limit the domains counted. Honor by default, as in the scheduler.
	// +optional
	// +kubebuilder:default=Honor
	NodeAffinityPolicy InclusionPolicy `json:"nodeAffinityPolicy,omitempty"`

	// nodeTaintsPolicy says whether node taints the pod does not tolerate
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
	// nodeSelector selects the nodes that count as qualifying, for example
	// role=data. Nodes must also admit the targets' pods (node affinity,
	// taints, allocatable resources). All nodes when unset.
	// +optional
	NodeSelector *LabelSelector `json:"nodeSelector,omitempty"`

	// minNodes is how many qualifying nodes must exist before the hard stage.
	// Derived from the replicas and the rollout strategy when unset.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MinNodes *int32 `json:"minNodes,omitempty"`

	// minDomains is how many distinct values of the constraint's topologyKey
	// the qualifying nodes must span before the hard stage. Derived from the
	// constraint when unset.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MinDomains *int32 `json:"minDomains,omitempty"`

	// provision asks the cluster's autoscaler for the nodes the hard stage
	// lacks while the migration waits for them. Nothing is asked for when
	// unset (mode None): the migration waits for nodes someone else adds.
	// +optional
	Provision *Provision `json:"provision,omitempty"`
}

// ProvisionMode is how a migration asks an autoscaler for capacity.
// +kubebuilder:validation:Enum=None;CapacityBuffer;PlaceholderPods
type ProvisionMode string

const (
	// ProvisionNone asks for nothing: the migration waits.
	ProvisionNone ProvisionMode = "None"
	// ProvisionCapacityBuffer creates a PodTemplate and a CapacityBuffer
	// (autoscaling.x-k8s.io/v1beta1), which cluster-autoscaler and
	// Karpenter provision for.
	ProvisionCapacityBuffer ProvisionMode = "CapacityBuffer"
	// ProvisionPlaceholderPods creates a Deployment of placeholder pods at
	// a negative priority, which any autoscaler provisions for and any real
	// pod preempts.
	ProvisionPlaceholderPods ProvisionMode = "PlaceholderPods"
)

// Provision says how the migration asks for the capacity it waits for, and
// how much it may ask for.
// +kubebuilder:validation:XValidation:rule="self.mode == 'None' || has(self.maxNodes)",message="capacity.provision.maxNodes is required unless mode is None"
type Provision struct {
	// mode is None (wait, the default), CapacityBuffer or PlaceholderPods.
	// +optional
	// +kubebuilder:default=None
	Mode ProvisionMode `json:"mode,omitempty"`

	// maxNodes is the most nodes the migration may ask for over its whole
	// life, so that a typo cannot provision a fleet: every node launched for
	// any of its requests counts against it (status.capacity.launchedNodes),
	// one that left since included, and so do nodes that qualify after a
	// request was made. A larger shortfall is asked for up to what is left
	// of maxNodes, and the status says so.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxNodes *int32 `json:"maxNodes,omitempty"`
}

// ProvisionMode is the mode, None when unset.
func (c *Capacity) ProvisionMode() ProvisionMode {
	if c == nil || c.Provision == nil || c.Provision.Mode == "" {
		return ProvisionNone
	}
	return c.Provision.Mode
}

// Guards protect the running pods during the migration.
type Guards struct {
	// minPodAge is how long every target pod must have been Ready with its
	// containers running, without a restart, before a stage starts, so that
	// a crash-looping or freshly moved pod is not disturbed. Between 0s and
	// 24h; 2m when unset.
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="guards.minPodAge must be between 0s and 24h"
	MinPodAge *metav1.Duration `json:"minPodAge,omitempty"`

	// maxRestarts is how many container restarts a target pod may add during
	// a stage or the soak before the stage counts as failed; 0 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MaxRestarts *int32 `json:"maxRestarts,omitempty"`

	// protectedPods selects pods in the namespace (for example a broker
	// without a volume) that the migration must never cause to be recreated.
	// A stage that would recreate one is refused; one recreated during a
	// stage rolls the stage back.
	// +optional
	ProtectedPods *LabelSelector `json:"protectedPods,omitempty"`

	// evictStuckPods lets a rollback evict a StatefulSet pod that is stuck
	// Pending with the template being rolled back: an OrderedReady
	// StatefulSet does not replace a pod that never became Ready
	// (kubernetes#67250), so the reverted template would never roll out.
	// When false, the migration names the pod to delete. The operator
	// needs the opt-in evict ClusterRole bound in the namespace to evict.
	// +optional
	EvictStuckPods bool `json:"evictStuckPods,omitempty"`

	// disruptions is what the pre-flight check before the hard stage does
	// when the hard constraint would not survive a disruption the cluster
	// will bring, simulated on the placement the hard stage's rollout would
	// leave: a drain of a node the targets would run on that leaves an
	// evicted pod nowhere to go (replicas == qualifying nodes), the loss of
	// a zone, a PodDisruptionBudget that allows no eviction, a
	// HorizontalPodAutoscaler whose maxReplicas do not fit. Warn when unset.
	// +optional
	// +kubebuilder:default=Warn
	Disruptions DisruptionPolicy `json:"disruptions,omitempty"`
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
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired migration.
	// +required
	Spec PlacementMigrationSpec `json:"spec"`

	// status is what the operator observed and did. It defaults to empty so
	// that a tool reading a migration the operator has not seen yet (a
	// fleet gate's expression on status) finds a status to read, not a
	// missing field.
	// +kubebuilder:default={}
	// +optional
	Status PlacementMigrationStatus `json:"status,omitzero"`
}

// PlacementMigrationList is a list of PlacementMigrations.
// +kubebuilder:object:root=true
type PlacementMigrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// +required
	Items []PlacementMigration `json:"items"`
}

// PlacementSnapshot is the part of a pod template placement-guard changes.
type PlacementSnapshot struct {
	// podAntiAffinity as found on the pod template.
	// +optional
	PodAntiAffinity *corev1.PodAntiAffinity `json:"podAntiAffinity,omitempty"`
	// topologySpreadConstraints as found on the pod template.
	// +optional
	// +listType=atomic
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}

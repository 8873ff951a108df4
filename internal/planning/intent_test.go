package planning

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// A migration's intent is its spec with the defaults applied and the
// targets its status says it holds: a stage written, an entry applied, or
// a write in flight. A target recorded at stage None, never written, is
// not held.
func TestIntentOfAMigration(t *testing.T) {
	ref := func(name string) pgv1.TargetRef { return pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: name} }
	pm := &pgv1.PlacementMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "spread", UID: "u-1", CreationTimestamp: metav1.NewTime(time.Unix(7, 0))},
		Spec: pgv1.PlacementMigrationSpec{
			Constraint: pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1}},
			FinalStage: pgv1.StageSoft,
			Capacity:   &pgv1.Capacity{MinDomains: ptr.To[int32](3), Provision: &pgv1.Provision{Mode: pgv1.ProvisionPlaceholderPods, MaxNodes: ptr.To[int32](4)}},
			Guards:     &pgv1.Guards{Disruptions: pgv1.DisruptionBlock, MinPodAge: &metav1.Duration{Duration: time.Minute}},
		},
	}
	pm.Status.Targets = []pgv1.TargetStatus{
		{Kind: pgv1.KindDeployment, Name: "written", Stage: pgv1.StageSoft},
		{Kind: pgv1.KindDeployment, Name: "applied", Stage: pgv1.StageNone, Applied: &pgv1.PlacementSnapshot{}},
		{Kind: pgv1.KindDeployment, Name: "recorded", Stage: pgv1.StageNone},
	}
	pm.Status.Operation = &pgv1.Operation{Targets: []pgv1.OperationTarget{{Kind: pgv1.KindDeployment, Name: "in-flight"}, {Kind: pgv1.KindDeployment, Name: "written"}}}

	in := IntentOf(pm)
	if in.Name != "spread" || in.UID != "u-1" || !in.Created.Equal(&pm.CreationTimestamp) {
		t.Errorf("identity %q %q %v", in.Name, in.UID, in.Created)
	}
	if in.Constraint.Spread == nil || in.Constraint.Spread.TopologyKey != corev1.LabelTopologyZone || in.Final != pgv1.StageSoft {
		t.Errorf("constraint %+v, final %s", in.Constraint, in.Final)
	}
	if ptr.Deref(in.Capacity.MinDomains, 0) != 3 || in.Provision != pgv1.ProvisionPlaceholderPods || in.MaxNodes != 4 {
		t.Errorf("capacity %+v, provision %s, maxNodes %d", in.Capacity, in.Provision, in.MaxNodes)
	}
	if in.Disruptions != pgv1.DisruptionBlock || in.MinPodAge != time.Minute {
		t.Errorf("guards %s %s", in.Disruptions, in.MinPodAge)
	}
	want := []pgv1.TargetRef{ref("in-flight"), ref("written"), ref("applied")}
	if !slices.Equal(in.Held, want) {
		t.Errorf("held %v, want %v", in.Held, want)
	}
	if in.Holds(ref("recorded")) {
		t.Error("a target recorded at None, never written, is held")
	}
	if got := in.RequestSpec(); got.MaxNodes != 4 || got.Labels[placement.PlaceholderLabel] != "u-1" {
		t.Errorf("request spec %+v", got)
	}

	bare := IntentOf(&pgv1.PlacementMigration{})
	if bare.Final != pgv1.StageHard || bare.Provision != pgv1.ProvisionNone || bare.Disruptions != pgv1.DisruptionWarn ||
		bare.MinPodAge != pgv1.DefaultMinPodAge || len(bare.Held) != 0 {
		t.Errorf("the defaults: %+v", bare)
	}
}

// A change is no migration: every migration of the namespace is another
// to it, even one with no name; a migration is not another to itself.
func TestAChangeIsNoMigration(t *testing.T) {
	unnamed := &pgv1.PlacementMigration{}
	if !(Intent{}).isOther(unnamed) {
		t.Error("a change takes a migration for itself")
	}
	self := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	if IntentOf(self).isOther(self) || !IntentOf(self).isOther(&pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "b"}}) {
		t.Error("a migration is told from the others by name")
	}
}

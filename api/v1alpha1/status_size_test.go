package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// fullStatus fills every list of the status to its maximum and every
// string the schema bounds to its bound: the largest status the operator
// could ever write. The corev1 terms in the recorded entries, which the
// schema does not bound, are a realistic one term each.
func fullStatus() pgv1.PlacementMigrationStatus {
	str := func(n int, c string) string { return strings.Repeat(c, n) }
	at := metav1.Now()
	name := func(i int) string { return fmt.Sprintf("%s%03d", str(250, "n"), i) }
	term := corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		MatchLabelKeys: []string{"pod-template-hash"}}
	entry := &pgv1.PlacementSnapshot{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
	before := &pgv1.PlacementSnapshot{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
		WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}
	record := func() *pgv1.PodSetRecord {
		rec := &pgv1.PodSetRecord{PodSetSummary: pgv1.PodSetSummary{Count: 100000, Restarts: 1 << 30, Digest: str(64, "d")}, ObservedAt: at, RestartedIncomplete: true}
		for range 16 {
			rec.Restarted = append(rec.Restarted, pgv1.PodRestarts{UID: str(64, "u"), Restarts: 1 << 30})
		}
		return rec
	}
	protected := &pgv1.ProtectedPodsRecord{PodSetRecord: *record()}
	for i := range 16 {
		protected.Pods = append(protected.Pods, pgv1.PodObservation{Name: name(i), UID: str(64, "u"), CreationTimestamp: at, Restarts: 1 << 30, NodeName: str(253, "x")})
	}
	summary := &pgv1.PodSetSummary{Count: 100000, Restarts: 1 << 30, Digest: str(64, "d")}
	st := pgv1.PlacementMigrationStatus{
		ObservedGeneration: 1 << 40, Phase: pgv1.PhaseWaitingForCapacity, Stage: pgv1.StageSoft,
		FieldManager: str(128, "m"), DriftCorrections: 3, LastHandledRetry: str(256, "r"),
		Capacity:      &pgv1.CapacityStatus{QualifyingNodes: 1 << 30, RequiredNodes: 1 << 30, QualifyingDomains: 1 << 30, RequiredDomains: 1 << 30, Summary: str(32, "s")},
		ProtectedPods: protected,
		Operation: &pgv1.Operation{Action: pgv1.ActionRollBack, Stage: pgv1.StageSoft, From: pgv1.StageHard, Reason: str(64, "R"), Message: str(1024, "m"),
			StartedAt: at, Generation: 1 << 40},
	}
	for i := range 10 {
		st.Capacity.Nodes = append(st.Capacity.Nodes, name(i))
		st.Conditions = append(st.Conditions, metav1.Condition{Type: fmt.Sprintf("Condition%d", i), Status: metav1.ConditionFalse, Reason: str(1024, "R"),
			Message: str(32768, "m"), LastTransitionTime: at, ObservedGeneration: 1 << 40})
	}
	move := pgv1.PodMove{Target: str(300, "t"), Pod: str(253, "p"), UID: str(64, "u"), From: str(253, "f"), To: str(253, "t"), Node: str(253, "n"),
		SkewBefore: 1 << 30, Evicted: true, At: at, Result: str(32, "r"), Message: str(1024, "m"), Replacement: str(253, "p"), LandedIn: str(253, "l")}
	st.Rebalance = &pgv1.RebalanceStatus{Move: &move, Stopped: str(1024, "s"), StoppedGeneration: 1 << 40}
	for range 10 {
		st.Rebalance.Moves = append(st.Rebalance.Moves, move)
	}
	for range 16 {
		st.Hazards = append(st.Hazards, pgv1.Hazard{Type: str(64, "T"), Severity: pgv1.SeverityBlocking, Target: str(320, "t"), Message: str(2048, "m")})
	}
	for i := range 50 {
		st.Operation.Targets = append(st.Operation.Targets, pgv1.OperationTarget{Kind: pgv1.KindStatefulSet, Name: name(i), UID: str(64, "u"),
			GenerationBefore: 1 << 40, AppliedGeneration: 1 << 40, Entry: entry, Previous: entry, PodsBefore: record()})
		ts := pgv1.TargetStatus{Kind: pgv1.KindStatefulSet, Name: name(i), UID: str(64, "u"), Stage: pgv1.StageHard,
			Verified: &pgv1.StageMilestone{Stage: pgv1.StageHard, At: at}, Before: before, Applied: entry, Pods: record()}
		for range 4 {
			ts.Stages = append(ts.Stages, pgv1.StageRecord{Stage: pgv1.StageHard, StartedAt: &at, CompletedAt: &at, Outcome: pgv1.OutcomeRolledBack, PodsBefore: summary, PodsAfter: summary})
		}
		st.Targets = append(st.Targets, ts)
		plan := pgv1.TargetPlan{Kind: pgv1.KindStatefulSet, Name: name(i), Stage: pgv1.StageHard, Change: str(1024, "c"), RecreatesCount: 1 << 30, PredictedPlacement: str(512, "p")}
		for range 5 {
			plan.Recreates = append(plan.Recreates, str(253, "p"))
		}
		st.Plan = append(st.Plan, plan)
	}
	return st
}

var _ = Describe("The status at its largest", func() {
	It("fits every list at its maximum within the API server's 1 MiB object limit", func() {
		pm := &pgv1.PlacementMigration{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "largest"},
			Spec: pgv1.PlacementMigrationSpec{
				Targets:    []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}},
				Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: "kubernetes.io/hostname"}},
				Guards:     &pgv1.Guards{MaxRestarts: ptr.To[int32](1)},
			},
		}
		Expect(k8sClient.Create(ctx, pm)).To(Succeed())
		pm.Status = fullStatus()
		raw, err := json.Marshal(pm)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("the largest PlacementMigration is %d bytes\n", len(raw))
		Expect(len(raw)).To(BeNumerically("<", 1<<20))
		Expect(k8sClient.Status().Update(ctx, pm)).To(Succeed(), "the API server accepts the largest status, every bound included")
	})
})

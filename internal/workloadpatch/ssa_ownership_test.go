package workloadpatch_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

var seq atomic.Int64

// helmLikeDeployment is created by another field manager, as a chart would,
// with a node affinity and an anti-affinity term of its own.
func helmLikeDeployment(withAntiAffinity bool) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("web-%d", seq.Add(1)), Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "registry.invalid/web:1"}},
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
							MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}},
						}}},
					}},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 2, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
				},
			},
		},
	}
	if withAntiAffinity {
		d.Spec.Template.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: "topology.kubernetes.io/zone", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		}}}
	}
	return d
}

func createAs(d *appsv1.Deployment, manager string) {
	Expect(k8sClient.Create(ctx, d, client.FieldOwner(manager))).To(Succeed())
}

// manager is the field manager of the migration the specs play.
var manager = workloadpatch.FieldManager("web-apart")

func applyStage(d *appsv1.Deployment, c placement.Constraint, stage pgv1.Stage) error {
	return applyAs(d, c, stage, manager)
}

func applyAs(d *appsv1.Deployment, c placement.Constraint, stage pgv1.Stage, fieldManager string) error {
	entry, err := c.Entry(d.Spec.Selector, stage)
	Expect(err).NotTo(HaveOccurred())
	ac, err := workloadpatch.ApplyConfiguration(workloadpatch.Target{Kind: pgv1.KindDeployment, Namespace: d.Namespace, Name: d.Name, UID: d.UID}, entry)
	Expect(err).NotTo(HaveOccurred())
	return k8sClient.Apply(ctx, ac, client.FieldOwner(fieldManager))
}

func get(d *appsv1.Deployment) *appsv1.Deployment {
	out := &appsv1.Deployment{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), out)).To(Succeed())
	return out
}

// ownedBy returns the fields a manager owns, as the raw managedFields JSON.
func ownedBy(d *appsv1.Deployment, manager string) string {
	for _, mf := range d.ManagedFields {
		if mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply {
			return mf.FieldsV1.GetRawString()
		}
	}
	return ""
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

var _ = Describe("Server-side apply of the constraint", func() {
	spread := placement.Constraint{Spread: &placement.Spread{TopologyKey: "topology.kubernetes.io/zone", MaxSkew: 1}}
	apart := placement.Constraint{AntiAffinity: &placement.AntiAffinity{TopologyKey: "kubernetes.io/hostname"}}

	It("owns only the spread entry it adds and leaves node affinity and the chart's spread byte for byte", func() {
		d := helmLikeDeployment(false)
		createAs(d, "helm")
		before := get(d)

		Expect(applyStage(d, spread, pgv1.StageSoft)).To(Succeed())
		after := get(d)
		Expect(asJSON(after.Spec.Template.Spec.Affinity)).To(Equal(asJSON(before.Spec.Template.Spec.Affinity)))
		Expect(after.Spec.Template.Spec.TopologySpreadConstraints).To(HaveLen(2))
		Expect(asJSON(after.Spec.Template.Spec.TopologySpreadConstraints[0])).To(Equal(asJSON(before.Spec.Template.Spec.TopologySpreadConstraints[0])))

		owned := ownedBy(after, manager)
		Expect(owned).To(ContainSubstring(`"k:{\"topologyKey\":\"topology.kubernetes.io/zone\",\"whenUnsatisfiable\":\"ScheduleAnyway\"}"`))
		Expect(owned).NotTo(ContainSubstring("kubernetes.io/hostname"), "the chart's own spread stays the chart's")
		Expect(owned).NotTo(ContainSubstring("nodeAffinity"))
		Expect(owned).NotTo(ContainSubstring("containers"))
		Expect(owned).NotTo(ContainSubstring("replicas"))
	})

	It("replaces its soft entry by the hard one, leaving exactly one of ours", func() {
		d := helmLikeDeployment(false)
		createAs(d, "helm")
		Expect(applyStage(d, spread, pgv1.StageSoft)).To(Succeed())
		Expect(applyStage(d, spread, pgv1.StageHard)).To(Succeed())
		tsc := get(d).Spec.Template.Spec.TopologySpreadConstraints
		Expect(tsc).To(HaveLen(2))
		Expect(tsc[1].TopologyKey).To(Equal("topology.kubernetes.io/zone"))
		Expect(tsc[1].WhenUnsatisfiable).To(Equal(corev1.DoNotSchedule))
		Expect(spread.StageOf(&get(d).Spec.Template.Spec, d.Spec.Selector)).To(Equal(pgv1.StageHard))
	})

	It("gives back exactly what was there when it applies no stage", func() {
		d := helmLikeDeployment(false)
		createAs(d, "helm")
		before := get(d)
		Expect(applyStage(d, apart, pgv1.StageSoft)).To(Succeed())
		Expect(applyStage(d, apart, pgv1.StageHard)).To(Succeed())
		Expect(applyStage(d, apart, pgv1.StageNone)).To(Succeed())
		after := get(d)
		Expect(asJSON(after.Spec.Template.Spec)).To(Equal(asJSON(before.Spec.Template.Spec)))
		Expect(ownedBy(after, manager)).To(Or(BeEmpty(), Equal(`{}`)))
	})

	It("adds an anti-affinity term next to node affinity without touching it", func() {
		d := helmLikeDeployment(false)
		createAs(d, "helm")
		before := get(d)
		Expect(applyStage(d, apart, pgv1.StageHard)).To(Succeed())
		after := get(d)
		Expect(asJSON(after.Spec.Template.Spec.Affinity.NodeAffinity)).To(Equal(asJSON(before.Spec.Template.Spec.Affinity.NodeAffinity)))
		Expect(after.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
	})

	It("refuses, naming the manager, to take over a term list another manager owns", func() {
		d := helmLikeDeployment(true)
		createAs(d, "helm")
		err := applyStage(d, apart, pgv1.StageHard)
		Expect(err).To(HaveOccurred())
		conflict, ok := workloadpatch.AsConflict(err)
		Expect(ok).To(BeTrue(), "want a field manager conflict, got %v", err)
		Expect(conflict.Managers).To(Equal([]string{"helm"}))
		Expect(strings.Join(conflict.Fields, " ")).To(ContainSubstring("podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"))
		Expect(get(d).Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1), "nothing changed")
	})
})

var _ = Describe("Field managers of several migrations", func() {
	zones := placement.Constraint{Spread: &placement.Spread{TopologyKey: "topology.kubernetes.io/zone", MaxSkew: 1}}
	hosts := placement.Constraint{Spread: &placement.Spread{TopologyKey: "kubernetes.io/hostname", MaxSkew: 1}}
	apart := placement.Constraint{AntiAffinity: &placement.AntiAffinity{TopologyKey: "kubernetes.io/hostname"}}
	apartZones := placement.Constraint{AntiAffinity: &placement.AntiAffinity{TopologyKey: "topology.kubernetes.io/zone"}}

	It("derives a stable name per migration, within the API server's bound", func() {
		Expect(workloadpatch.FieldManager("web-zones")).To(Equal("placement-guard/web-zones"))
		long := strings.Repeat("a", 253)
		Expect(len(workloadpatch.FieldManager(long))).To(BeNumerically("<=", 128))
		Expect(workloadpatch.FieldManager(long)).To(Equal(workloadpatch.FieldManager(long)))
		Expect(workloadpatch.FieldManager(long)).NotTo(Equal(workloadpatch.FieldManager(long[:252] + "b")))
		name, ours := workloadpatch.MigrationOf("placement-guard/web-zones")
		Expect(ours).To(BeTrue())
		Expect(name).To(Equal("web-zones"))
	})

	It("lets a zone spread and a hostname spread of two migrations live side by side, each releasing only its own", func() {
		d := helmLikeDeployment(false)
		createAs(d, "helm")
		d = get(d)
		Expect(applyAs(d, zones, pgv1.StageHard, workloadpatch.FieldManager("zones"))).To(Succeed())
		Expect(applyAs(d, hosts, pgv1.StageHard, workloadpatch.FieldManager("hosts"))).To(Succeed())
		Expect(get(d).Spec.Template.Spec.TopologySpreadConstraints).To(HaveLen(3), "the chart's, and one of each migration")
		Expect(applyAs(d, hosts, pgv1.StageNone, workloadpatch.FieldManager("hosts"))).To(Succeed())
		tsc := get(d).Spec.Template.Spec.TopologySpreadConstraints
		Expect(tsc).To(HaveLen(2))
		Expect(zones.StageOf(&get(d).Spec.Template.Spec, d.Spec.Selector)).To(Equal(pgv1.StageHard), "the other migration's entry stays")
	})

	It("refuses a second migration's anti-affinity term list, naming the first migration's manager", func() {
		d := helmLikeDeployment(false)
		createAs(d, "helm")
		d = get(d)
		Expect(applyAs(d, apart, pgv1.StageHard, workloadpatch.FieldManager("first"))).To(Succeed())
		err := applyAs(d, apartZones, pgv1.StageHard, workloadpatch.FieldManager("second"))
		conflict, ok := workloadpatch.AsConflict(err)
		Expect(ok).To(BeTrue(), "want a field manager conflict, got %v", err)
		Expect(conflict.Managers).To(Equal([]string{"placement-guard/first"}))
		Expect(get(d).Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
	})

	It("never creates a workload that was deleted, nor writes one re-created since", func() {
		d := helmLikeDeployment(false)
		createAs(d, "helm")
		d = get(d)
		Expect(k8sClient.Delete(ctx, d)).To(Succeed())
		err := applyStage(d, zones, pgv1.StageSoft)
		Expect(err).To(HaveOccurred())
		_, field := workloadpatch.AsConflict(err)
		Expect(field).To(BeFalse())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{})).NotTo(Succeed(), "the write must not create the workload")

		again := helmLikeDeployment(false)
		again.Name = d.Name
		createAs(again, "helm")
		Expect(applyStage(d, zones, pgv1.StageSoft)).NotTo(Succeed(), "the recorded uid is the old workload's")
		Expect(get(again).Spec.Template.Spec.TopologySpreadConstraints).To(HaveLen(1))
	})
})

var _ = Describe("A write decided on a read the API server has moved past", func() {
	zones := placement.Constraint{Spread: &placement.Spread{TopologyKey: "topology.kubernetes.io/zone", MaxSkew: 1}}
	apart := placement.Constraint{AntiAffinity: &placement.AntiAffinity{TopologyKey: "kubernetes.io/hostname"}}

	// applyDecidedOn applies c's stage to the workload read, naming the
	// version read.
	applyDecidedOn := func(read *appsv1.Deployment, c placement.Constraint, stage pgv1.Stage, opts ...client.ApplyOption) error {
		entry, err := c.Entry(read.Spec.Selector, stage)
		Expect(err).NotTo(HaveOccurred())
		ac, err := workloadpatch.ApplyConfiguration(workloadpatch.Target{Kind: pgv1.KindDeployment, Namespace: read.Namespace, Name: read.Name,
			UID: read.UID, ResourceVersion: read.ResourceVersion}, entry)
		Expect(err).NotTo(HaveOccurred())
		return k8sClient.Apply(ctx, ac, append(opts, client.FieldOwner(manager))...)
	}

	It("is refused as a failed precondition, not a field conflict, once the workload changed, and goes through on the current version", func() {
		d := helmLikeDeployment(false)
		createAs(d, "helm")
		read := get(d)

		By("the chart scales the workload after the read")
		scaled := read.DeepCopy()
		scaled.Spec.Replicas = ptr.To[int32](5)
		Expect(k8sClient.Update(ctx, scaled, client.FieldOwner("helm"))).To(Succeed())
		for _, opts := range [][]client.ApplyOption{{client.DryRunAll}, nil} {
			err := applyDecidedOn(read, zones, pgv1.StageSoft, opts...)
			Expect(workloadpatch.IsPreconditionFailed(err)).To(BeTrue(), "options %v: want a failed precondition, got %v", opts, err)
			_, field := workloadpatch.AsConflict(err)
			Expect(field).To(BeFalse())
		}
		Expect(get(d).Spec.Template.Spec.TopologySpreadConstraints).To(HaveLen(1), "nothing written")

		By("decided again on the current version")
		Expect(applyDecidedOn(get(d), zones, pgv1.StageSoft)).To(Succeed())
		Expect(get(d).Spec.Template.Spec.TopologySpreadConstraints).To(HaveLen(2))
	})

	It("still names the other manager when the version is current and a field is owned", func() {
		d := helmLikeDeployment(true)
		createAs(d, "helm")
		err := applyDecidedOn(get(d), apart, pgv1.StageHard, client.DryRunAll)
		conflict, ok := workloadpatch.AsConflict(err)
		Expect(ok).To(BeTrue(), "want a field manager conflict, got %v", err)
		Expect(conflict.Managers).To(Equal([]string{"helm"}))
		Expect(workloadpatch.IsPreconditionFailed(err)).To(BeFalse())
	})
})

package controller

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/plugin"
)

// The operator and `kubectl placement plan` ask one question
// (planning.Evaluate). This holds them to it where their inputs are put
// together differently: the operator from its cache and warm snapshot,
// plan from a snapshot directory of YAML. For generated clusters, the
// verdict the operator records for a dry-run migration and the verdict
// plan gives offline, on a snapshot of that very cluster, must be the
// same: the outcome, the hazards, the pods recreated and the predicted
// end state.

// differentialClusters is how many clusters a spec generates, 320 in
// all by default (200 asked before the first stage, 120 taken to the
// Hard stage); PG_DIFFERENTIAL_CLUSTERS sets it for a longer run.
func differentialClusters(fallback int) int {
	if n, err := strconv.Atoi(os.Getenv("PG_DIFFERENTIAL_CLUSTERS")); err == nil && n > 0 {
		return n
	}
	return fallback
}

// decided is the operator's verdict as it recorded it, once it has one.
func (g generatedCluster) decided() *pgv1.PlacementMigration {
	pm := g.fc.pm(g.name)
	if pm.Status.ObservedGeneration != pm.Generation {
		return nil
	}
	switch pm.Status.Phase {
	case pgv1.PhasePlanned, pgv1.PhaseBlocked, pgv1.PhaseWaitingForCapacity:
		return pm
	}
	return nil
}

// writeSnapshot reads the cluster as plan does and writes it as a
// snapshot directory of YAML, as a user hands plan --snapshot.
func writeSnapshot(namespaces []string) string {
	live, err := plugin.ReadCluster(ctx, k8sClient, namespaces...)
	Expect(err).NotTo(HaveOccurred())
	var objs []runtime.Object
	for _, n := range live.Nodes {
		objs = append(objs, n)
	}
	for _, p := range live.Pods {
		objs = append(objs, p)
	}
	for _, n := range live.Namespaces {
		objs = append(objs, n)
	}
	for _, w := range live.Workloads {
		objs = append(objs, w)
	}
	for _, rs := range live.ReplicaSets {
		objs = append(objs, rs)
	}
	for _, b := range live.Budgets {
		objs = append(objs, b)
	}
	for _, pm := range live.Migrations {
		objs = append(objs, pm)
	}
	var out []byte
	for _, o := range objs {
		gvk, err := apiutil.GVKForObject(o, scheme)
		Expect(err).NotTo(HaveOccurred())
		o.GetObjectKind().SetGroupVersionKind(gvk)
		data, err := yaml.Marshal(o)
		Expect(err).NotTo(HaveOccurred())
		out = append(append(out, "---\n"...), data...)
	}
	dir := GinkgoT().TempDir()
	Expect(os.WriteFile(filepath.Join(dir, "cluster.yaml"), out, 0o644)).To(Succeed())
	return dir
}

// expectAlike asks plan, offline, on the snapshot, and expects the verdict
// the operator has recorded on the cluster to be the same: the outcome and
// its reason, the hazards, the plan. The operator's verdict is read until
// it agrees, for a while: a verdict taken before its feeds had every pod
// is taken again when they do. It returns the outcome and reason.
func expectAlike(g generatedCluster, snapshot *plugin.Cluster, seed int64) string {
	why := fmt.Sprintf("%s in %s (seed %d)", g.shape, g.fc.ns, seed)
	var v *plugin.VerdictReport
	Eventually(func(gm Gomega) {
		pm := g.decided()
		gm.Expect(pm).NotTo(BeNil())
		asked := pm.DeepCopy()
		asked.Status = pgv1.PlacementMigrationStatus{}
		report, err := plugin.Plan(snapshot, asked)
		gm.Expect(err).NotTo(HaveOccurred())
		v = report.Verdict
		gm.Expect(v).NotTo(BeNil(), "%s: plan gave no verdict", why)
		gm.Expect(v.Outcome).To(Equal(operatorOutcome(pm)), "%s: the outcome", why)
		if v.Outcome != "Proceeds" {
			ready := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionReady)
			gm.Expect(ready).NotTo(BeNil(), "%s: %s, with no Ready condition", why, v.Outcome)
			if v.Outcome == "Blocked" {
				gm.Expect(v.Reason).To(Equal(ready.Reason), "%s: the reason", why)
			}
			gm.Expect(v.Message).To(Equal(ready.Message), "%s: the words", why)
		}
		gm.Expect(orNil(v.Hazards)).To(Equal(orNil(pm.Status.Hazards)), "%s: the hazards", why)
		gm.Expect(orNil(v.Plan)).To(Equal(orNil(pm.Status.Plan)), "%s: the plan (pods recreated, predicted end state)", why)
	}).WithTimeout(5 * time.Second).Should(Succeed())
	return v.Outcome + "/" + v.Reason
}

// operatorOutcome is the plan's word for the phase the operator recorded.
func operatorOutcome(pm *pgv1.PlacementMigration) string {
	switch pm.Status.Phase {
	case pgv1.PhasePlanned:
		return "Proceeds"
	case pgv1.PhaseWaitingForCapacity:
		return "WaitingForCapacity"
	}
	return "Blocked"
}

var _ = Describe("One question", func() {
	It("gives the operator's verdict and plan's offline verdict alike on generated clusters", func() {
		seed := GinkgoRandomSeed()
		rng := rand.New(rand.NewPCG(uint64(seed), 35))
		clusters := make([]generatedCluster, differentialClusters(200))
		namespaces := make([]string, len(clusters))
		for i := range clusters {
			clusters[i] = generateCluster(rng, false)
			namespaces[i] = clusters[i].fc.ns
		}
		crowded := tooManyTargets()
		clusters, namespaces = append(clusters, crowded), append(namespaces, crowded.fc.ns)
		for _, g := range clusters {
			g.migrate()
		}
		for _, g := range clusters {
			Eventually(g.decided).ShouldNot(BeNil(), "%s: the operator decided nothing", g.shape)
		}
		snapshot, err := plugin.ReadClusterDir(writeSnapshot(namespaces))
		Expect(err).NotTo(HaveOccurred())
		outcomes := map[string]int{}
		for _, g := range clusters {
			outcomes[expectAlike(g, snapshot, seed)]++
		}
		GinkgoWriter.Printf("%d clusters, outcomes: %v\n", len(clusters), outcomes)
		// The generator must reach every outcome, or the agreement says
		// little.
		Expect(outcomes).To(HaveKey("Proceeds/"))
		Expect(outcomes).To(HaveKey("WaitingForCapacity/" + pgv1.ReasonInsufficientCapacity))
		Expect(outcomes).To(HaveKey("Blocked/" + pgv1.ReasonProtectedPodChanged))
		Expect(outcomes).To(HaveKey("Blocked/" + pgv1.ReasonTargetPodsPending))
		Expect(outcomes).To(HaveKey("Blocked/" + pgv1.ReasonTargetRolloutFailed))
		Expect(outcomes).To(HaveKey("Blocked/" + pgv1.ReasonTargetPodsMissing))
		Expect(outcomes).To(HaveKey("Blocked/" + pgv1.ReasonTooManyTargets))
		Expect(len(outcomes)).To(BeNumerically(">=", 5))
	})
})

// decidedAtHard is the operator's decision before the Hard stage, once it
// has one: the intent to write it, or a stop before it.
func (g generatedCluster) decidedAtHard() *pgv1.PlacementMigration {
	pm := g.fc.pm(g.name)
	if pm.Status.ObservedGeneration != pm.Generation {
		return nil
	}
	switch pm.Status.Phase {
	case pgv1.PhaseApplyingHard, pgv1.PhaseBlocked, pgv1.PhaseWaitingForCapacity:
		return pm
	}
	return nil
}

// landSoftStage plays the rollout of the Soft stage: the target's pods
// come back on random nodes, as a soft term lets the scheduler place
// them, and the spec waits for the soak.
func landSoftStage(g *generatedCluster, rng *rand.Rand) {
	placed := make([]string, g.replicas)
	for i := range placed {
		placed[i] = g.nodes[rng.IntN(len(g.nodes))]
	}
	g.fc.rollOut("app", placed...)
	g.shape += fmt.Sprintf(", Soft stage landed on %v", placed)
}

var _ = Describe("One question before the Hard stage", func() {
	It("gives the operator's decision and plan's alike once the Soft stage is verified", func() {
		seed := GinkgoRandomSeed()
		rng := rand.New(rand.NewPCG(uint64(seed), 36))
		clusters := make([]generatedCluster, differentialClusters(120))
		for i := range clusters {
			clusters[i] = generateCluster(rng, true)
		}
		for _, g := range clusters {
			g.migrate()
		}
		var soaking []generatedCluster
		for _, g := range clusters {
			Eventually(g.fc.phase(g.name)).Should(BeElementOf(pgv1.PhaseApplyingSoft, pgv1.PhaseBlocked, pgv1.PhaseWaitingForCapacity),
				"%s: the operator decided nothing about the Soft stage", g.shape)
			if g.fc.phase(g.name)() == pgv1.PhaseApplyingSoft {
				landSoftStage(&g, rng)
				soaking = append(soaking, g)
			}
		}
		namespaces := make([]string, len(soaking))
		for i, g := range soaking {
			namespaces[i] = g.fc.ns
		}
		atSoak := make([]*pgv1.PlacementMigration, len(soaking))
		for i, g := range soaking {
			Eventually(func() bool {
				pm := g.fc.pm(g.name)
				atSoak[i] = pm
				return pm.Status.ObservedGeneration == pm.Generation && pm.Status.Phase == pgv1.PhaseSoaking
			}).Should(BeTrue(), g.fc.explain(g.name))
		}
		snapshot, err := plugin.ReadClusterDir(writeSnapshot(namespaces))
		Expect(err).NotTo(HaveOccurred())
		testClock.Step(2 * time.Minute)
		outcomes := map[string]int{}
		for i, g := range soaking {
			poke(g.fc, g.name)
			outcomes[expectAlikeAtHard(g, snapshot, atSoak[i], seed)]++
		}
		GinkgoWriter.Printf("%d clusters, %d soaked at Soft, outcomes before the Hard stage: %v\n", len(clusters), len(soaking), outcomes)
		// The generator must reach each decision, or the agreement says
		// little.
		Expect(outcomes).To(HaveKey("Proceeds/"))
		preflightBlocked := 0
		for _, reason := range []string{pgv1.ReasonDrainBlockedByBudget, pgv1.ReasonEvictedPodUnplaceable, pgv1.ReasonZoneLossUnplaceable} {
			preflightBlocked += outcomes["Blocked/"+reason]
		}
		Expect(preflightBlocked).To(BeNumerically(">", 0), "no pre-flight blocked the Hard stage")
	})
})

// expectAlikeAtHard asks plan, offline, on the snapshot read during the
// soak, about the migration as it stood then, and expects the decision
// the operator recorded once the soak ended: the stage, the outcome, its
// reason and words, the hazards, the plan. It returns the outcome and
// reason.
func expectAlikeAtHard(g generatedCluster, snapshot *plugin.Cluster, atSoak *pgv1.PlacementMigration, seed int64) string {
	why := fmt.Sprintf("%s in %s (seed %d)", g.shape, g.fc.ns, seed)
	report, err := plugin.Plan(snapshot, atSoak)
	Expect(err).NotTo(HaveOccurred())
	v := report.Verdict
	Expect(v).NotTo(BeNil(), "%s: plan gave no verdict", why)
	Expect(v.Stage).To(Equal(pgv1.StageHard), "%s: plan's verdict is about the next stage", why)
	Eventually(func(gm Gomega) {
		pm := g.decidedAtHard()
		gm.Expect(pm).NotTo(BeNil(), "%s: the operator decided nothing about the Hard stage", why)
		outcome := operatorOutcome(pm)
		if pm.Status.Phase == pgv1.PhaseApplyingHard {
			outcome = "Proceeds"
		}
		gm.Expect(v.Outcome).To(Equal(outcome), "%s: the outcome (%s)", why, v.Message)
		if v.Outcome != "Proceeds" {
			ready := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionReady)
			gm.Expect(ready).NotTo(BeNil(), "%s: %s, with no Ready condition", why, v.Outcome)
			gm.Expect(v.Reason).To(Equal(ready.Reason), "%s: the reason", why)
			gm.Expect(v.Message).To(Equal(ready.Message), "%s: the words", why)
		}
		gm.Expect(orNil(v.Hazards)).To(Equal(orNil(pm.Status.Hazards)), "%s: the hazards", why)
		if v.Outcome != "Proceeds" {
			// A stage that proceeds has its plan replaced by the
			// intent to write it.
			gm.Expect(orNil(v.Plan)).To(Equal(orNil(pm.Status.Plan)), "%s: the plan (pods recreated, predicted end state)", why)
		}
	}).WithTimeout(5 * time.Second).Should(Succeed())
	return v.Outcome + "/" + v.Reason
}

// orNil makes an empty list nil: the API server drops an empty list.
func orNil[T any](items []T) []T {
	if len(items) == 0 {
		return nil
	}
	return items
}

// loadSeed creates a seed incident's snapshot directory in the API server,
// as the incident's cluster was: nodes Ready and untainted, claims and
// volumes bound, every pod Running and Ready on its node, owned by the
// objects created here, and workloads rolled out. It removes all of it
// when the spec ends.
func loadSeed(dir string) {
	seed, err := plugin.ReadClusterDir(dir)
	Expect(err).NotTo(HaveOccurred())
	var created []client.Object
	create := func(obj client.Object) {
		obj.SetUID("")
		obj.SetResourceVersion("")
		obj.SetCreationTimestamp(metav1.Time{})
		Expect(k8sClient.Create(ctx, obj)).To(Succeed(), "create %T %s", obj, obj.GetName())
		reach(obj.GetCreationTimestamp().Time)
		created = append(created, obj)
	}
	DeferCleanup(func() {
		for i := len(created) - 1; i >= 0; i-- {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, created[i], client.GracePeriodSeconds(0)))).To(Succeed())
		}
	})
	namespaces := map[string]bool{}
	for _, w := range seed.Workloads {
		namespaces[w.GetNamespace()] = true
	}
	for ns := range namespaces {
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for _, n := range seed.Nodes {
		status, taints := n.Status, n.Spec.Taints
		create(n)
		n.Status = status
		Expect(k8sClient.Status().Update(ctx, n)).To(Succeed())
		n.Spec.Taints = taints // the not-ready taint the API server adds is lifted, as the node is Ready
		Expect(k8sClient.Update(ctx, n)).To(Succeed())
	}
	for _, v := range seed.Volumes {
		create(v)
	}
	for _, c := range seed.Claims {
		status := c.Status
		create(c)
		c.Status = status
		Expect(k8sClient.Status().Update(ctx, c)).To(Succeed())
	}
	uids := map[string]types.UID{}
	owned := func(obj client.Object) {
		refs := obj.GetOwnerReferences()
		for i := range refs {
			refs[i].UID = uids[refs[i].Kind+"/"+obj.GetNamespace()+"/"+refs[i].Name]
		}
		obj.SetOwnerReferences(refs)
	}
	for _, w := range seed.Workloads {
		gvk, err := apiutil.GVKForObject(w, scheme)
		Expect(err).NotTo(HaveOccurred())
		// The seed's status, which a create drops: its revision names the
		// pods of the live template.
		seeded := w.DeepCopyObject().(client.Object)
		create(w)
		uids[gvk.Kind+"/"+w.GetNamespace()+"/"+w.GetName()] = w.GetUID()
		rolledOut(w, seeded)
	}
	for _, rs := range seed.ReplicaSets {
		owned(rs)
		create(rs)
		uids["ReplicaSet/"+rs.Namespace+"/"+rs.Name] = rs.UID
	}
	for _, p := range seed.Pods {
		owned(p)
		create(p)
		readyPod(p)
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
	}
}

// rolledOut reports a workload's rollout complete, as its controller does,
// at the revision the seed gave it.
func rolledOut(w, seeded client.Object) {
	switch w := w.(type) {
	case *appsv1.Deployment:
		n := *w.Spec.Replicas
		w.Status = appsv1.DeploymentStatus{ObservedGeneration: w.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	case *appsv1.StatefulSet:
		n := *w.Spec.Replicas
		revision := seeded.(*appsv1.StatefulSet).Status.UpdateRevision
		w.Status = appsv1.StatefulSetStatus{ObservedGeneration: w.Generation, Replicas: n, ReadyReplicas: n, CurrentReplicas: n, UpdatedReplicas: n, AvailableReplicas: n,
			CurrentRevision: revision, UpdateRevision: revision}
	}
	Expect(k8sClient.Status().Update(ctx, w)).To(Succeed())
}

var _ = Describe("One question on the seed incidents", func() {
	DescribeTable("gives the operator's verdict and plan's offline verdict alike",
		func(seed, outcome string) {
			dir := filepath.Join("..", "plugin", "testdata", seed)
			loadSeed(filepath.Join(dir, "cluster"))
			docs, err := os.ReadFile(filepath.Join(dir, "migration.yaml"))
			Expect(err).NotTo(HaveOccurred())
			pm := &pgv1.PlacementMigration{}
			Expect(yaml.UnmarshalStrict(docs, pm)).To(Succeed())
			pm.Spec.DryRun = true
			if pm.Spec.Guards == nil {
				pm.Spec.Guards = &pgv1.Guards{}
			}
			pm.Spec.Guards.MinPodAge = &metav1.Duration{}
			Expect(k8sClient.Create(ctx, pm)).To(Succeed())
			g := generatedCluster{fc: &fakeCluster{ns: pm.Namespace}, name: pm.Name, shape: "seed " + seed}
			Eventually(g.decided).ShouldNot(BeNil(), "the operator decided nothing on seed %s", seed)
			snapshot, err := plugin.ReadClusterDir(writeSnapshot([]string{pm.Namespace}))
			Expect(err).NotTo(HaveOccurred())
			expectAlike(g, snapshot, 0)
			Expect(operatorOutcome(g.decided())).To(Equal(outcome))
		},
		Entry("000: a required anti-affinity before the second node exists", "000", "WaitingForCapacity"),
		Entry("001: hard anti-affinity with replicas == nodes", "001", "Blocked"),
		Entry("002: a spread whose selector matches blue and green", "002", "Blocked"),
		Entry("004: a soft spread over single-replica controllers", "004", "Proceeds"),
	)
})

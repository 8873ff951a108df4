package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/faultproxy"
	"github.com/placement-guard/placement-guard/test/localcluster"
)

// writeClock records when a proxy last passed a committed operator write;
// until holdUntil it holds those writes back.
type writeClock struct {
	proxy     *faultproxy.Proxy
	mu        sync.Mutex
	last      time.Time
	holdUntil time.Time
}

func (w *writeClock) rule(req faultproxy.Request) faultproxy.Action {
	if !operatorWrite(req) {
		return faultproxy.Action{}
	}
	w.mu.Lock()
	hold := time.Until(w.holdUntil)
	w.mu.Unlock()
	if hold > 0 {
		return faultproxy.Action{Kind: faultproxy.Delay, Delay: hold}
	}
	return faultproxy.Action{Kind: faultproxy.AfterCommit, Then: func() {
		w.mu.Lock()
		w.last = time.Now()
		w.mu.Unlock()
	}}
}

// hold delays the replica's writes until t: they reach the API server no
// earlier.
func (w *writeClock) hold(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holdUntil = t
}

// writes counts the operator's writes the API server accepted.
func (w *writeClock) writes() int { return w.proxy.Committed(operatorWrite) }

func (w *writeClock) since(t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last.After(t)
}

// leaseHolder is the identity holding the operator's leader lease.
func leaseHolder(ctx context.Context) string {
	lease := &coordinationv1.Lease{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "system", Name: "placement-guard.placementguard.io"}, lease); err != nil {
		return ""
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// elected runs a replica of the operator with leader election, behind its
// own proxy, so that each replica's writes are told apart.
func elected(name string) (*manager, *writeClock) {
	proxy := startProxy()
	clock := &writeClock{proxy: proxy}
	proxy.SetRule(clock.rule)
	m := newManager(name, managerBinary, proxy.Kubeconfig, managerArgs("--leader-elect=true", "--leader-election-namespace=system")...)
	DeferCleanup(m.stop)
	return m, clock
}

var _ = Describe("F2: two replicas with leader election", Label("faults", "F2"), func() {
	It("hands over within the lease when the leader is killed or hung, applies no stage twice, and the resumed old leader writes nothing", func(ctx SpecContext) {
		a, aWrites := elected("f2-a")
		b, bWrites := elected("f2-b")
		a.start()

		By("the leader killed while the migration soaks")
		env := newEnv(ctx, "f2")
		s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, 10*time.Second)
		mon := s.watch(ctx)
		s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
		Expect(aWrites.writes()).To(BeNumerically(">", 0), "a leads")
		b.start()
		s.addCapacity(ctx)
		s.waitFor(ctx, pgv1.PhaseSoaking)
		aHolder := leaseHolder(ctx)
		killed := time.Now()
		a.kill()
		Eventually(leaseHolder, time.Minute, 100*time.Millisecond).WithContext(ctx).ShouldNot(Equal(aHolder), "b takes the lease")
		takeover := time.Since(killed)
		Eventually(func() bool { return bWrites.since(killed) }, time.Minute, 100*time.Millisecond).Should(BeTrue(), "b acts")
		s.waitFor(ctx, pgv1.PhaseSucceeded)
		mon.end(ctx, 2)
		Expect(s.workload(ctx).GetGeneration()-s.generation).To(Equal(int64(2)), "no stage applied twice")

		By("the leader hung for 30 s, then resumed, while the new leader's writes are still on their way")
		a.start()
		env2 := newEnv(ctx, "f2-hang")
		s2 := newScenario(ctx, env2, pgv1.KindDeployment, pgv1.StageHard, 5*time.Second)
		mon2 := s2.watch(ctx)
		s2.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
		s2.addCapacity(ctx)
		s2.waitFor(ctx, pgv1.PhaseSoaking)
		bHolder := leaseHolder(ctx)
		hung := time.Now()
		// The new leader's writes reach the API server only 5 s after the old
		// one thaws: whatever the old leader does when it thaws, it does on a
		// migration nobody changed meanwhile, so a stale write would land.
		aWrites.hold(hung.Add(35 * time.Second))
		b.hang()
		Eventually(leaseHolder, time.Minute, 100*time.Millisecond).WithContext(ctx).ShouldNot(Equal(bHolder), "a takes the lease")
		hungTakeover := time.Since(hung)
		time.Sleep(30*time.Second - time.Since(hung))
		resumedWrites := bWrites.writes()
		b.resume()
		s2.waitFor(ctx, pgv1.PhaseSucceeded)
		Consistently(bWrites.writes, "10s").Should(Equal(resumedWrites), "the resumed old leader writes nothing")
		Eventually(b.running, 30*time.Second).Should(BeFalse(), "the old leader steps down: it exits once it finds its lease gone")
		mon2.end(ctx, 2)
		AddReportEntry("F2", fmt.Sprintf("takeover after a kill: %s; after a hang: %s", takeover.Round(100*time.Millisecond), hungTakeover.Round(100*time.Millisecond)))
	}, NodeTimeout(5*time.Minute))
})

var _ = Describe("F4: kube-apiserver down for 60 s, and hung", Label("faults", "F4"), func() {
	It("goes on afterwards without a false rollback and without shortening the soak", func(ctx SpecContext) {
		_, proxy := operator("f4", nil)
		env := newEnv(ctx, "f4")
		// The soft stage's rollout of two kwok pods can be over within a
		// poll, so the hang is triggered by the stage's own write instead of
		// by watching the status: the first template write of web that the
		// API server commits.
		softWritten := make(chan struct{})
		var once sync.Once
		proxy.SetRule(func(req faultproxy.Request) faultproxy.Action {
			if req.Namespace != env.Namespace || !req.Write || req.Group != "apps" || req.Resource != "deployments" || req.Name != "web" {
				return faultproxy.Action{}
			}
			return faultproxy.Action{Kind: faultproxy.AfterCommit, Then: func() { once.Do(func() { close(softWritten) }) }}
		})
		s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, 75*time.Second)
		mon := s.watch(ctx)
		s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
		s.addCapacity(ctx)

		By("hanging kube-apiserver for 15 s as soon as the soft stage is written")
		Eventually(softWritten).WithContext(ctx).Should(BeClosed(), s.explain(ctx))
		Expect(cluster.HangComponent(localcluster.KubeAPIServer)).To(Succeed())
		time.Sleep(15 * time.Second)
		Expect(cluster.ResumeComponent(localcluster.KubeAPIServer)).To(Succeed())

		By("stopping kube-apiserver for 60 s while it soaks")
		s.waitFor(ctx, pgv1.PhaseSoaking)
		Expect(cluster.StopComponent(localcluster.KubeAPIServer)).To(Succeed())
		time.Sleep(60 * time.Second)
		Expect(cluster.RestartComponent(ctx, localcluster.KubeAPIServer)).To(Succeed())

		s.waitFor(ctx, pgv1.PhaseSucceeded)
		mon.end(ctx, 2)
		pm, err := s.migration(ctx)
		Expect(err).NotTo(HaveOccurred())
		for _, ts := range pm.Status.Targets {
			for _, st := range ts.Stages {
				Expect(st.Outcome).To(Equal(pgv1.OutcomeVerified), "no stage was rolled back")
			}
		}
	}, NodeTimeout(6*time.Minute))
})

// fuzzSpec draws a PlacementMigration spec from a seed: a valid spec of
// random shape, and for half of them one or two fields set to a hostile
// value.
func fuzzSpec(r *rand.Rand) map[string]any {
	pick := func(vals ...any) any { return vals[r.IntN(len(vals))] }
	selector := func() any {
		return pick(map[string]any{"matchLabels": map[string]any{"app": pick("web", "broker", "none")}},
			map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "In", "values": []any{pick("web", "broker")}}}},
			map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "Exists"}}})
	}
	spec := map[string]any{}
	if r.IntN(2) == 0 {
		spec["targets"] = []any{map[string]any{"kind": pick("Deployment", "StatefulSet"), "name": pick("web", "broker", "missing")}}
	} else {
		spec["targetSelector"] = map[string]any{"selector": selector(), "kinds": pick([]any{"Deployment"}, []any{"StatefulSet"}, []any{"Deployment", "StatefulSet"})}
	}
	if r.IntN(2) == 0 {
		spec["constraint"] = map[string]any{"podAntiAffinity": map[string]any{"topologyKey": pick("kubernetes.io/hostname", "topology.kubernetes.io/zone"), "labelSelector": selector()}}
	} else {
		spread := map[string]any{"topologyKey": pick("kubernetes.io/hostname", "topology.kubernetes.io/zone"), "maxSkew": pick(1, 2, 5)}
		if r.IntN(2) == 0 {
			spread["revisionScope"] = pick("AllRevisions", "NewRevision")
		}
		spec["constraint"] = map[string]any{"topologySpread": spread}
	}
	for k, v := range map[string]any{
		"finalStage": pick(nil, "Soft", "Hard"), "soakDuration": pick(nil, "0s", "1s"), "stageTimeout": pick(nil, "30s", "1h"),
		"paused": pick(nil, true, false), "dryRun": pick(nil, true, false), "onDelete": pick(nil, "Revert", "Retain"),
		"guards":   pick(nil, map[string]any{"maxRestarts": pick(0, 3), "minPodAge": "0s", "protectedPods": selector()}),
		"capacity": pick(nil, map[string]any{"nodeSelector": selector(), "minNodes": pick(1, 2, 1000)}),
	} {
		if v != nil {
			spec[k] = v
		}
	}
	if r.IntN(2) == 0 {
		return spec
	}
	hostile := []func(){
		func() {
			spec["targets"] = []any{map[string]any{"kind": "DaemonSet", "name": "web"}}
			delete(spec, "targetSelector")
		},
		func() {
			spec["targets"] = []any{map[string]any{"kind": "Deployment", "name": "Web_1"}}
			delete(spec, "targetSelector")
		},
		func() { delete(spec, "targets"); spec["targetSelector"] = map[string]any{"selector": map[string]any{}} },
		func() {
			spec["targetSelector"] = map[string]any{"selector": selector()}
			spec["targets"] = []any{map[string]any{"kind": "Deployment", "name": "web"}}
		},
		func() { spec["constraint"] = map[string]any{} },
		func() {
			spec["constraint"] = map[string]any{"topologySpread": map[string]any{"topologyKey": "zone with space", "maxSkew": 0}}
		},
		func() {
			spec["constraint"] = map[string]any{"podAntiAffinity": map[string]any{"topologyKey": "kubernetes.io/hostname",
				"labelSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "Is"}}}}}
		},
		func() { spec["soakDuration"] = pick("-1s", "48h", "soon") },
		func() { spec["stageTimeout"] = "1s" },
		func() { spec["finalStage"] = "Firm" },
		func() { spec["guards"] = map[string]any{"maxRestarts": -1} },
		func() { spec["capacity"] = map[string]any{"minNodes": 0} },
		func() {
			spec["guards"] = map[string]any{"protectedPods": map[string]any{"matchLabels": map[string]any{"app": strings.Repeat("x", 70)}}}
		},
	}
	for range 1 + r.IntN(2) {
		hostile[r.IntN(len(hostile))]()
	}
	return spec
}

var _ = Describe("F11: generated specs through the API server and the operator", Label("faults", "F11"), func() {
	It("either refuses a spec with a message or reconciles it without a panic or an error loop", func(ctx SpecContext) {
		env := newEnv(ctx, "f11")
		mgr, _ := operator("f11", nil)
		s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, time.Second)
		s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
		r := rand.New(rand.NewPCG(11, 11))
		accepted, refused := 0, 0
		for i := range 60 {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": pgv1.GroupVersion.String(), "kind": "PlacementMigration",
				"metadata": map[string]any{"namespace": env.Namespace, "name": fmt.Sprintf("fuzz-%d", i)},
				"spec":     fuzzSpec(r),
			}}
			err := k8sClient.Create(ctx, u)
			switch {
			case err == nil:
				accepted++
			case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
				refused++
				Expect(err.Error()).To(MatchRegexp(`spec|Invalid|invalid`), "a refusal says what is wrong")
			default:
				Fail(fmt.Sprintf("spec %d: unexpected error %v", i, err))
			}
		}
		AddReportEntry("F11", fmt.Sprintf("%d specs accepted, %d refused with a message", accepted, refused))
		Expect(accepted).To(BeNumerically(">", 5))
		Expect(refused).To(BeNumerically(">", 5))

		By("every accepted one reconciled, without a panic")
		Eventually(func(g Gomega) {
			var list pgv1.PlacementMigrationList
			g.Expect(k8sClient.List(ctx, &list)).To(Succeed())
			for _, pm := range list.Items {
				if pm.Namespace == env.Namespace && strings.HasPrefix(pm.Name, "fuzz-") {
					g.Expect(pm.Status.ObservedGeneration).To(Equal(pm.Generation), pm.Name)
				}
			}
		}).Should(Succeed())
		Expect(mgr.log(1 << 24)).NotTo(ContainSubstring("panic"))
		Expect(mgr.running()).To(BeTrue())

		By("and without an error loop")
		reconcileErrors := func() int { return errorsIn(mgr.log(1<<24), env.Namespace) }
		errors := reconcileErrors()
		Consistently(reconcileErrors, "10s").Should(BeNumerically("<=", errors+3))
	})
})

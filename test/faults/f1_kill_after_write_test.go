package faults

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/faultproxy"
	"github.com/placement-guard/placement-guard/test/utils"
)

// operatorWrite reports a write the operator makes for a migration: to a
// workload, a pod (eviction) or a migration; not its Events or leases.
func operatorWrite(req faultproxy.Request) bool {
	if !req.Write {
		return false
	}
	switch {
	case req.Group == "apps" && (req.Resource == "deployments" || req.Resource == "statefulsets"):
		return true
	case req.Group == "placementguard.io" && req.Resource == "placementmigrations":
		return true
	case req.Group == "" && req.Resource == "pods":
		return true
	}
	return false
}

// managerArgs run the operator with the flags of the fault specs: no
// metrics or probes to bind, a short grace for Pending pods.
func managerArgs(extra ...string) []string {
	return append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0", "--unschedulable-grace=5s", "--zap-log-level=info"}, extra...)
}

// startProxy starts a fault proxy for the operator's user, closed with the spec.
func startProxy() *faultproxy.Proxy {
	p, err := faultproxy.Start(cluster.Config, utils.OperatorUser(), workDir)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(p.Close)
	return p
}

// f1Variant is one shape of migration the kills are played on.
type f1Variant struct {
	name  string
	kind  pgv1.WorkloadKind
	final pgv1.Stage
	// stall cordons the node the hard stage's surge pod needs as the hard
	// stage is written, so that it rolls back.
	stall bool
	// writes bounds the writes of one migration of the variant: a copy is
	// killed after each write up to it.
	writes int
	// changes is how often the template changes without a crash.
	changes int64
}

// endState is what a user sees once a copy settles.
func endState(ctx context.Context, s *scenario) string {
	pm, err := s.migration(ctx)
	Expect(err).NotTo(HaveOccurred())
	var verified []string
	for _, ts := range pm.Status.Targets {
		if ts.Verified != nil {
			verified = append(verified, string(ts.Verified.Stage))
		}
	}
	_, carried := s.ours(templateOf(s.workload(ctx)))
	return fmt.Sprintf("phase=%s stage=%s verified=%v template=%s operation=%v changes=%d", pm.Status.Phase, pm.Status.Stage, verified, carried,
		pm.Status.Operation != nil, s.workload(ctx).GetGeneration()-s.generation)
}

var _ = Describe("F1: the operator killed right after the API server commits any of its writes", Label("faults", "F1"), func() {
	It("ends every migration as it ends without the kill, with one template change per stage and nothing fought over", func(ctx SpecContext) {
		variants := []f1Variant{
			{name: "dh", kind: pgv1.KindDeployment, final: pgv1.StageHard, writes: 10, changes: 2},
			{name: "ds", kind: pgv1.KindDeployment, final: pgv1.StageSoft, writes: 7, changes: 1},
			{name: "sh", kind: pgv1.KindStatefulSet, final: pgv1.StageHard, writes: 10, changes: 2},
			{name: "ss", kind: pgv1.KindStatefulSet, final: pgv1.StageSoft, writes: 7, changes: 1},
			{name: "dx", kind: pgv1.KindDeployment, final: pgv1.StageHard, stall: true, writes: 12, changes: 3},
		}
		proxy := startProxy()
		mgr := newManager("f1", managerBinary, proxy.Kubeconfig, managerArgs("--leader-elect=false")...)
		DeferCleanup(mgr.stop)

		type copyOf struct {
			v      f1Variant
			killAt int
			s      *scenario
		}
		var (
			mu      sync.Mutex
			copies  []*copyOf
			byNS    = map[string]*copyOf{}
			counts  = map[string]int{}
			kills   int
			stalled = map[string]bool{}
		)
		proxy.SetRule(func(req faultproxy.Request) faultproxy.Action {
			if !operatorWrite(req) {
				return faultproxy.Action{}
			}
			mu.Lock()
			c := byNS[req.Namespace]
			stall := c != nil && c.v.stall && !stalled[req.Namespace] && req.Resource == "deployments" && bytes.Contains(req.Body, []byte("requiredDuringScheduling"))
			if stall {
				stalled[req.Namespace] = true
			}
			mu.Unlock()
			if c == nil {
				return faultproxy.Action{}
			}
			if stall {
				// Hold the hard stage's write until the scheduler has
				// surely seen the node its surge pod needs cordoned.
				if node := c.s.freeDataNode(context.Background()); node != "" {
					_ = cluster.CordonNode(context.Background(), node)
					time.Sleep(time.Second)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			counts[req.Namespace]++
			if counts[req.Namespace] != c.killAt {
				return faultproxy.Action{}
			}
			kills++
			return faultproxy.Action{Kind: faultproxy.AfterCommit, Then: func() {
				mgr.kill()
				mgr.start()
			}}
		})

		By("setting up a copy of each variant per write to kill after, and one without a kill")
		sem := make(chan struct{}, 6)
		var wg sync.WaitGroup
		for _, v := range variants {
			for n := 0; n <= v.writes; n++ {
				wg.Add(1)
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					sem <- struct{}{}
					defer func() { <-sem }()
					env, err := utils.NewEnv(ctx, cluster, k8sClient, fmt.Sprintf("f1-%s-%d", v.name, n))
					Expect(err).NotTo(HaveOccurred())
					c := &copyOf{v: v, killAt: n}
					c.s = newScenario(ctx, env, v.kind, v.final, 3*time.Second)
					// Dozens of copies sampled four times a second each load
					// the API server more than the operator under test does;
					// the states the invariants judge last longer than a
					// second (a stage waits for its rollout and its soak).
					c.s.sampleEvery = time.Second
					c.s.watch(ctx)
					mu.Lock()
					copies = append(copies, c)
					byNS[env.Namespace] = c
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		for _, c := range copies {
			DeferCleanup(func(ctx SpecContext) { Expect(c.s.env.Cleanup(ctx)).To(Succeed()) })
		}
		mgr.start()
		for _, c := range copies {
			Eventually(c.s.phase(ctx)).Should(Equal(pgv1.PhaseWaitingForCapacity), c.s.explain(ctx))
		}
		By(fmt.Sprintf("adding the capacity of all %d copies", len(copies)))
		for _, c := range copies {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				c.s.addCapacity(ctx)
			}()
		}
		wg.Wait()

		By("waiting for every copy to settle")
		for _, c := range copies {
			want := pgv1.PhaseSucceeded
			if c.v.stall {
				want = pgv1.PhaseRolledBack
			}
			Eventually(c.s.phase(ctx), 6*time.Minute).Should(Equal(want), func() string { return c.s.explain(ctx)() + "\n" + mgr.log(3000) })
		}
		mu.Lock()
		AddReportEntry("F1", fmt.Sprintf("%d copies, %d kills, %d manager starts, %d operator writes", len(copies), kills, mgr.starts, proxy.Stats().Writes))
		mu.Unlock()

		By("comparing every copy with the one of its variant that was not killed")
		reference := map[string]string{}
		var perMigration []string
		for _, c := range copies {
			ns := c.s.env.Namespace
			events := proxy.Committed(func(r faultproxy.Request) bool { return r.Namespace == ns && r.Group == "events.k8s.io" })
			Expect(events).To(BeNumerically("<=", 40), "the Events of one migration stay bounded in %s", ns)
			if c.killAt == 0 {
				reference[c.v.name] = endState(ctx, c.s)
				writes := proxy.Committed(func(r faultproxy.Request) bool { return r.Namespace == ns && operatorWrite(r) })
				perMigration = append(perMigration, fmt.Sprintf("%s: %d writes (%d to the workload), %d Events", c.v.name, writes,
					proxy.Committed(func(r faultproxy.Request) bool { return r.Namespace == ns && r.Group == "apps" }), events))
			}
		}
		sort.Strings(perMigration)
		AddReportEntry("F1 writes per migration without a kill", strings.Join(perMigration, "; "))
		var differ []string
		for _, c := range copies {
			got := endState(ctx, c.s)
			if got != reference[c.v.name] || !strings.HasSuffix(got, fmt.Sprintf("changes=%d", c.v.changes)) {
				differ = append(differ, fmt.Sprintf("%s killed after write %d: %s, want %s with changes=%d", c.v.name, c.killAt, got, reference[c.v.name], c.v.changes))
			}
			stages := 2
			if c.v.final == pgv1.StageSoft {
				stages = 1
			}
			c.s.mon.end(ctx, stages)
		}
		sort.Strings(differ)
		Expect(differ).To(BeEmpty())

		By("writing nothing for a minute once settled")
		var namespaces []string
		for _, c := range copies {
			namespaces = append(namespaces, c.s.env.Namespace)
		}
		writesNow := writesIn(proxy, namespaces...)
		writes := len(writesNow())
		Consistently(func() int { return len(writesNow()) }, quiet, time.Second).Should(Equal(writes), func() string {
			return fmt.Sprintf("written since: %v", writesNow()[writes:])
		})
	}, NodeTimeout(12*time.Minute))
})

// quiet is how long settled migrations are watched for a write.
const quiet = 60 * time.Second

package faults

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/faultproxy"
	"github.com/placement-guard/placement-guard/test/utils"
)

// installPlaceholderPriorityClass creates the PriorityClass config/ ships
// for placeholder pods, under config/default's name prefix.
func installPlaceholderPriorityClass(ctx context.Context) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "manager", "priorityclass.yaml"))
	Expect(err).NotTo(HaveOccurred())
	pc := &schedulingv1.PriorityClass{}
	Expect(sigsyaml.Unmarshal(data, pc)).To(Succeed())
	pc.Name = "placement-guard-" + pc.Name
	Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, pc))).To(Succeed())
}

// requestKill names the writes of a capacity request's life after which
// the operator is killed: the request recorded, the placeholders created,
// the placeholders deleted, the record cleared.
type requestKill string

const (
	killRecorded requestKill = "recorded"
	killCreated  requestKill = "created"
	killDeleted  requestKill = "deleted"
	killCleared  requestKill = "cleared"
)

// requestWrite tells which step of the request's life a write is, "" for
// none.
func requestWrite(req faultproxy.Request, name string) requestKill {
	switch {
	case req.Group == "apps" && req.Resource == "deployments" && req.Name == name && req.Method == "DELETE":
		return killDeleted
	case req.Group == "apps" && req.Resource == "deployments" && req.Name == name,
		// A request is created, never applied: the name is in the body.
		req.Group == "apps" && req.Resource == "deployments" && req.Method == "POST" && bytes.Contains(req.Body, []byte(`"name":"`+name+`"`)):
		return killCreated
	case req.Group == "placementguard.io" && req.Subresource == "status" && bytes.Contains(req.Body, []byte(`"request":{`)):
		return killRecorded
	case req.Group == "placementguard.io" && req.Subresource == "status" && bytes.Contains(req.Body, []byte(`"request":null`)):
		return killCleared
	}
	return ""
}

var _ = Describe("F12: the operator killed at each step of a capacity request's life", Label("faults", "F12"), func() {
	It("keeps one placeholder Deployment of the recorded size while it waits, and none once the capacity qualifies", func(ctx SpecContext) {
		installPlaceholderPriorityClass(ctx)
		env := newEnv(ctx, "f12")
		Expect(utils.BindPlaceholderRole(ctx, k8sClient, env.Namespace)).To(Succeed())
		placeholders := "web-apart-capacity"
		mgr, proxy := operator("f12", nil)
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				AddReportEntry("the manager's log", mgr.log(20000))
			}
		})
		var mu sync.Mutex
		killed := map[requestKill]bool{}
		proxy.SetRule(func(req faultproxy.Request) faultproxy.Action {
			if req.Namespace != env.Namespace || !req.Write {
				return faultproxy.Action{}
			}
			step := requestWrite(req, placeholders)
			mu.Lock()
			defer mu.Unlock()
			if step == "" || killed[step] {
				return faultproxy.Action{}
			}
			killed[step] = true
			return faultproxy.Action{Kind: faultproxy.AfterCommit, Then: func() {
				mgr.kill()
				mgr.start()
			}}
		})
		s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, 2*time.Second)
		s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)

		By("asking for placeholders while it waits")
		pm, err := s.migration(ctx)
		Expect(err).NotTo(HaveOccurred())
		patch := client.MergeFrom(pm.DeepCopy())
		pm.Spec.Capacity.Provision = &pgv1.Provision{Mode: pgv1.ProvisionPlaceholderPods, MaxNodes: ptr.To[int32](2)}
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())

		// Watch the namespace's Deployments for the rest of the spec: never
		// more than one placeholder Deployment, never one of another name.
		var seenMu sync.Mutex
		var strays []string
		watchCtx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go func() {
			defer GinkgoRecover()
			for watchCtx.Err() == nil {
				var ds appsv1.DeploymentList
				if err := k8sClient.List(watchCtx, &ds, client.InNamespace(env.Namespace)); err == nil {
					for _, d := range ds.Items {
						if d.Name != "web" && d.Name != "broker" && d.Name != placeholders {
							seenMu.Lock()
							strays = append(strays, d.Name)
							seenMu.Unlock()
						}
					}
				}
				time.Sleep(250 * time.Millisecond)
			}
		}()

		Eventually(func(g Gomega) {
			pm, err := s.migration(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pm.Status.Capacity).NotTo(BeNil())
			g.Expect(pm.Status.Capacity.Request).NotTo(BeNil(), "the request is recorded")
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: pm.Status.Capacity.Request.Name}, d)).To(Succeed(), "the recorded request exists")
			g.Expect(ptr.Deref(d.Spec.Replicas, 0)).To(Equal(pm.Status.Capacity.Request.Replicas), "of the recorded size")
			// One placeholder for the missing data node, and one resident on
			// each data node the scheduler left without a pod of web: the
			// placeholders keep apart from web's pods and from each other.
			g.Expect(d.Spec.Replicas).To(Equal(ptr.To(1+s.dataNodesWithoutWeb(ctx))), "the one missing data node, and a resident one per free data node")
		}).Should(Succeed(), s.explain(ctx))
		mu.Lock()
		Expect(killed).To(HaveKey(killRecorded))
		Expect(killed).To(HaveKey(killCreated))
		mu.Unlock()

		By("the capacity arriving")
		s.addCapacity(ctx)
		s.waitFor(ctx, pgv1.PhaseSucceeded)
		Eventually(func() bool {
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: placeholders}, &appsv1.Deployment{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "the placeholders are deleted")
		pm, err = s.migration(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(pm.Status.Capacity.Request).To(BeNil(), "the record is cleared")
		Expect(s.workload(ctx).GetGeneration()-s.generation).To(Equal(int64(2)), "one template change per stage")
		mu.Lock()
		Expect(killed).To(HaveKey(killDeleted))
		kills := len(killed)
		mu.Unlock()
		seenMu.Lock()
		Expect(strays).To(BeEmpty(), "no placeholder Deployment of another name")
		seenMu.Unlock()
		AddReportEntry("F12", fmt.Sprintf("killed after %d of the request's writes: %v", kills, killed))
	}, NodeTimeout(5*time.Minute))
})

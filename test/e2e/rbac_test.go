package e2e

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/test/utils"
)

// The operator specs run the manager as the ServiceAccount config/rbac
// grants; this spec shows what that account may not do.
var _ = Describe("The operator's ServiceAccount", Label("operator", "rbac"), func() {
	DescribeTable("may do only what the migration needs",
		func(ctx SpecContext, group, resource, verb string, allowed bool) {
			cfg := rest.CopyConfig(cluster.Config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: utils.OperatorUser()}
			asOperator, err := client.New(cfg, client.Options{})
			Expect(err).NotTo(HaveOccurred())
			resource, subresource, _ := strings.Cut(resource, "/")
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: group, Resource: resource, Subresource: subresource, Verb: verb, Namespace: "default"},
			}}
			Expect(asOperator.Create(ctx, review)).To(Succeed())
			Expect(review.Status.Allowed).To(Equal(allowed), "%s %s.%s: %s", verb, resource, group, review.Status.Reason)
		},
		Entry("patch Deployments", "apps", "deployments", "patch", true),
		Entry("patch StatefulSets", "apps", "statefulsets", "patch", true),
		Entry("not update Deployments", "apps", "deployments", "update", false),
		Entry("not update StatefulSets", "apps", "statefulsets", "update", false),
		Entry("not read Secrets", "", "secrets", "get", false),
		Entry("not list Secrets", "", "secrets", "list", false),
		Entry("not create pods", "", "pods", "create", false),
		// Creating a Deployment is running any pod: placeholder pods need
		// the opt-in placeholders role, bound where a migration uses them.
		Entry("not create Deployments", "apps", "deployments", "create", false),
		Entry("not delete Deployments", "apps", "deployments", "delete", false),
		Entry("not create StatefulSets", "apps", "statefulsets", "create", false),
		Entry("not delete pods", "", "pods", "delete", false),
		// Deletion costs need the opt-in rebalance role, bound where a
		// migration keeps them.
		Entry("not patch pods", "", "pods", "patch", false),
		Entry("not patch nodes", "", "nodes", "patch", false),
		Entry("read pods", "", "pods", "list", true),
		Entry("read nodes", "", "nodes", "watch", true),
		Entry("record Events", "events.k8s.io", "events", "create", true),
		Entry("update migration status", "placementguard.io", "placementmigrations/status", "patch", true),
		Entry("not update migrations (it patches)", "placementguard.io", "placementmigrations", "update", false),
		Entry("not update migration status (it patches with a lock)", "placementguard.io", "placementmigrations/status", "update", false),
		Entry("not read controller revisions", "apps", "controllerrevisions", "list", false),
		// Evictions (guards.evictStuckPods, rebalance mode Evict) need the
		// opt-in evict role, bound where a migration uses them.
		Entry("not evict pods", "", "pods/eviction", "create", false),
	)
})

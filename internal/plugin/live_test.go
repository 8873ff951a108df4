package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// startAPIServer starts a real kube-apiserver and etcd with the CRD
// installed; they are stopped when the test ends.
func startAPIServer(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest (KUBEBUILDER_ASSETS=%q): %v", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}

// writeKubeconfig writes the admin's credentials to a kubeconfig whose
// context defaults to namespace.
func writeKubeconfig(t *testing.T, cfg *rest.Config, namespace string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: namespace}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// load creates the objects of a snapshot directory, giving each owner
// reference the UID the API server gave its owner.
func load(t *testing.T, c client.Client, dir string) {
	t.Helper()
	docs, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	uids := map[types.UID]types.UID{}
	for _, d := range docs {
		o := d.Object.(client.Object)
		if ns := o.GetNamespace(); ns != "" {
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		old := o.GetUID()
		o.SetUID("")
		o.SetCreationTimestamp(metav1.Time{})
		refs := o.GetOwnerReferences()
		for i := range refs {
			refs[i].UID = uids[refs[i].UID]
		}
		o.SetOwnerReferences(refs)
		status := o.DeepCopyObject().(client.Object)
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
		uids[old] = o.GetUID()
		// Create drops the status, and the API server taints a new node
		// not-ready until a node controller, which envtest lacks, clears it.
		if n, ok := status.(*corev1.Node); ok {
			n.ResourceVersion = o.GetResourceVersion()
			if err := c.Status().Update(ctx, n); err != nil {
				t.Fatalf("set the status of node %s: %v", n.Name, err)
			}
			n.Spec.Taints = nil
			if err := c.Update(ctx, n); err != nil {
				t.Fatalf("clear the taints of node %s: %v", n.Name, err)
			}
		}
	}
}

// plugin runs a command line against the API server as a user.
func plugin(t *testing.T, kubeconfig, as, stdin string, args ...string) (string, string, int) {
	t.Helper()
	full := append([]string{"--kubeconfig", kubeconfig}, args...)
	if as != "" {
		full = append(full, "--as", as)
	}
	return run(t, stdin, full...)
}

func bind(t *testing.T, c client.Client, role, namespace, sa string, cluster bool) {
	t.Helper()
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: namespace}}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
	var o client.Object = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role + "-" + sa, Namespace: namespace}, Subjects: subject, RoleRef: ref}
	if cluster {
		o = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role + "-" + sa}, Subjects: subject, RoleRef: ref}
	}
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// waitAllowed waits until the API server's authorizer, which learns of
// new bindings through its own watch, lets the user do verb on resource.
func waitAllowed(t *testing.T, c client.Client, user, verb, group, resource, namespace string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: namespace}}}
		if err := c.Create(ctx, review); err != nil {
			return false, err
		}
		return review.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("%s never allowed to %s %s in %s: %v", user, verb, resource, namespace, err)
	}
}

// The plugin plans against a live API server under a ServiceAccount that
// may only get and list, gives the answer it gives on the same objects
// offline, and writes only through the four verbs that steer a migration,
// which need the steer role.
func TestLiveClusterUnderLeastPrivilege(t *testing.T) {
	cfg, c := startAPIServer(t)
	ctx := context.Background()
	load(t, c, "testdata/001/cluster")
	roles, err := os.Open(filepath.Join("..", "..", "config", "plugin", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := ReadManifests("rbac.yaml", roles)
	roles.Close()
	if err != nil || len(docs) != 2 {
		t.Fatalf("read the plugin's roles: %v (%d objects)", err, len(docs))
	}
	for _, d := range docs {
		if err := c.Create(ctx, d.Object.(client.Object)); err != nil {
			t.Fatal(err)
		}
	}
	// The kubeconfig's namespace is not the migration's: the manifest's
	// namespace decides where its targets are read.
	kubeconfig := writeKubeconfig(t, cfg, "default")
	const sa = "system:serviceaccount:shop:planner"

	_, errOut, code := plugin(t, kubeconfig, sa, "", "plan", "-f", "testdata/001/migration.yaml")
	if code != ExitUsage || !strings.Contains(errOut, "forbidden") {
		t.Fatalf("without a role the plan must be refused: exit %d, %s", code, errOut)
	}

	bind(t, c, "placement-guard-plugin-reader", "shop", "planner", true)
	waitAllowed(t, c, sa, "list", "apps", "deployments", "shop")
	live, errOut, code := plugin(t, kubeconfig, sa, "", "plan", "-f", "testdata/001/migration.yaml", "-o", "json")
	if code != ExitHazards {
		t.Fatalf("plan under the reader role: exit %d, %s", code, errOut)
	}
	offline, _, _ := run(t, "", "plan", "-f", "testdata/001/migration.yaml", "--snapshot", "testdata/001/cluster", "-o", "json")
	var a, b Report
	if err := json.Unmarshal([]byte(live), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(offline), &b); err != nil {
		t.Fatal(err)
	}
	for i := range a.Stages {
		if hazardTypes(a.Stages[i]) != hazardTypes(b.Stages[i]) || strings.Join(a.Stages[i].Targets[0].Recreates, ",") != strings.Join(b.Stages[i].Targets[0].Recreates, ",") {
			t.Fatalf("the live plan differs from the offline one:\nlive:    %+v\noffline: %+v", a.Stages[i], b.Stages[i])
		}
	}
	if a.Stages[1].Hazards[0].Type != placement.HazardRolloutDeadlock {
		t.Fatalf("hazards %+v", a.Stages[1].Hazards)
	}

	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "web-apart", Namespace: "shop"}, Spec: pgv1.PlacementMigrationSpec{
		Targets:    []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}},
		Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}},
	}}
	if err := c.Create(ctx, pm); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := plugin(t, kubeconfig, sa, "", "status", "-n", "shop", "web-apart")
	if code != ExitOK || !strings.Contains(out, "PlacementMigration shop/web-apart") || !strings.Contains(out, "(not reconciled yet)") {
		t.Fatalf("status: exit %d %s %s", code, out, errOut)
	}
	out, errOut, code = plugin(t, kubeconfig, sa, "", "status", "-A")
	if code != ExitOK || !strings.Contains(out, "NAMESPACE") || !hasRow(out, "shop", "web-apart") {
		t.Fatalf("status -A: exit %d %s %s", code, out, errOut)
	}
	if out, _, _ = plugin(t, kubeconfig, sa, "", "status"); !strings.Contains(out, "No PlacementMigrations found.") {
		t.Fatalf("status in the kubeconfig's namespace (default) lists %s", out)
	}
	if _, errOut, code = plugin(t, kubeconfig, sa, "", "pause", "-n", "shop", "web-apart"); code != ExitUsage || !strings.Contains(errOut, "forbidden") {
		t.Fatalf("the reader role must not pause: exit %d, %s", code, errOut)
	}

	bind(t, c, "placement-guard-plugin-steer", "shop", "planner", false)
	waitAllowed(t, c, sa, "patch", pgv1.GroupVersion.Group, "placementmigrations", "shop")
	get := func() *pgv1.PlacementMigration {
		got := &pgv1.PlacementMigration{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pm), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if out, errOut, code = plugin(t, kubeconfig, sa, "", "pause", "-n", "shop", "web-apart"); code != ExitOK || !get().Spec.Paused {
		t.Fatalf("pause: exit %d %s %s", code, out, errOut)
	}
	if _, errOut, code = plugin(t, kubeconfig, sa, "", "resume", "-n", "shop", "web-apart"); code != ExitOK || get().Spec.Paused {
		t.Fatalf("resume: exit %d %s", code, errOut)
	}
	_, errOut, code = plugin(t, kubeconfig, sa, "", "retry", "-n", "shop", "web-apart")
	if code != ExitOK || get().Annotations[pgv1.RetryAnnotation] == "" || !strings.Contains(errOut, "not RolledBack or Failed") {
		t.Fatalf("retry: exit %d %s", code, errOut)
	}
	if _, _, code = plugin(t, kubeconfig, sa, "web-apart-typo\n", "abort", "-n", "shop", "web-apart"); code != ExitUsage || get().Spec.OnDelete == pgv1.DeletionRevert {
		t.Fatalf("an unconfirmed abort must change nothing: exit %d", code)
	}
	// No operator runs here: abort must leave the migration deleting with
	// the revert finalizer on and onDelete Revert, whatever it was, so that
	// the operator reverts whenever it comes; and, waiting, must say that
	// nothing was reverted yet rather than claim it.
	out, errOut, code = plugin(t, kubeconfig, sa, "web-apart\n", "abort", "-n", "shop", "web-apart", "--timeout", "2s")
	if code != ExitUsage || !strings.Contains(errOut, "still there after 2s") || !strings.Contains(errOut, "is it running?") || strings.Contains(out, "reverted") {
		t.Fatalf("abort with no operator must not claim a revert: exit %d\n%s%s", code, out, errOut)
	}
	aborted := get()
	if aborted.DeletionTimestamp.IsZero() || aborted.Spec.OnDelete != pgv1.DeletionRevert || !slices.Contains(aborted.Finalizers, pgv1.RevertFinalizer) {
		t.Fatalf("abort must delete a migration holding the revert finalizer with onDelete Revert: %+v %s", aborted.Finalizers, aborted.Spec.OnDelete)
	}
	out, errOut, code = plugin(t, kubeconfig, sa, "", "abort", "-n", "shop", "web-apart", "--yes", "--wait=false")
	if code != ExitOK || !strings.Contains(out, "the operator removes the constraint") {
		t.Fatalf("abort again, not waiting: exit %d %s %s", code, out, errOut)
	}
	patch := client.MergeFrom(aborted.DeepCopy())
	aborted.Finalizers = nil
	if err := c.Patch(ctx, aborted, patch); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pm), &pgv1.PlacementMigration{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the aborted migration still exists once its finalizer is gone: %v", err)
	}
}

func hazardTypes(s StageReport) string {
	var out []string
	for _, h := range s.Hazards {
		out = append(out, h.Type+"/"+h.Target)
	}
	return strings.Join(out, ",")
}

// hasRow reports whether a table has a row starting with these cells.
func hasRow(table string, cells ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(cells) && strings.Join(f[:len(cells)], " ") == strings.Join(cells, " ") {
			return true
		}
	}
	return false
}

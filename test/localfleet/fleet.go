// Package localfleet starts a fleet of local clusters on one machine for
// the fleet suite and `make demo-fleet`: each a localcluster with the
// operator running against it, incident 000's workloads on as many data
// nodes as asked, and one kubeconfig with a context per cluster.
package localfleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

// Namespace is where incident 000's workloads and migration live.
const Namespace = "db"

// Spec is one cluster of the fleet: its name (its kubeconfig context) and
// how many data nodes it has.
type Spec struct {
	Name      string
	DataNodes int
}

// Member is one running cluster with its operator.
type Member struct {
	Name    string
	Cluster *localcluster.Cluster
	Client  client.Client
	stop    func() error
}

// Fleet is the running clusters and a kubeconfig that reaches each by name.
type Fleet struct {
	Members    []*Member
	Kubeconfig string
	config     *clientcmdapi.Config
	dir        string
}

// Start starts a cluster and its operator per spec, one after another, and
// writes the fleet's kubeconfig. repoRoot locates the CRDs. On error
// nothing is left running.
func Start(ctx context.Context, repoRoot string, specs ...Spec) (_ *Fleet, err error) {
	dir, err := os.MkdirTemp("", "placement-guard-fleet-")
	if err != nil {
		return nil, err
	}
	f := &Fleet{dir: dir, config: clientcmdapi.NewConfig(), Kubeconfig: filepath.Join(dir, "kubeconfig")}
	defer func() {
		if err != nil {
			f.Stop()
		}
	}()
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), pgv1.AddToScheme(scheme)); err != nil {
		return nil, err
	}
	for _, spec := range specs {
		cluster, err := localcluster.Start(ctx, localcluster.Options{})
		if err != nil {
			return nil, fmt.Errorf("start cluster %s: %w", spec.Name, err)
		}
		m := &Member{Name: spec.Name, Cluster: cluster}
		f.Members = append(f.Members, m)
		if m.stop, err = utils.RunOperator(ctx, cluster.Config, utils.OperatorOptions{
			CRDDir: filepath.Join(repoRoot, "config", "crd", "bases"), UnschedulableGrace: 10 * time.Second}); err != nil {
			return nil, fmt.Errorf("run the operator on %s: %w", spec.Name, err)
		}
		if m.Client, err = client.New(cluster.Config, client.Options{Scheme: scheme}); err != nil {
			return nil, err
		}
		if err := f.addContext(spec.Name, cluster); err != nil {
			return nil, err
		}
		if err := seed(ctx, m, spec.DataNodes); err != nil {
			return nil, fmt.Errorf("seed %s: %w", spec.Name, err)
		}
	}
	return f, nil
}

// Stop stops every operator and cluster and removes the kubeconfig.
func (f *Fleet) Stop() {
	for _, m := range f.Members {
		if m.stop != nil {
			_ = m.stop()
		}
		m.Cluster.Stop()
	}
	_ = os.RemoveAll(f.dir)
}

// Member is the member of that name, nil for none.
func (f *Fleet) Member(name string) *Member {
	for _, m := range f.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// addContext adds a context for the cluster under name to the kubeconfig.
func (f *Fleet) addContext(name string, cluster *localcluster.Cluster) error {
	cfg := cluster.Config
	return f.AddContext(name, &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData},
		&clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData})
}

// AddContext adds a context to the fleet's kubeconfig and rewrites it: a
// test adds one that cannot answer.
func (f *Fleet) AddContext(name string, cluster *clientcmdapi.Cluster, user *clientcmdapi.AuthInfo) error {
	f.config.Clusters[name], f.config.AuthInfos[name] = cluster, user
	f.config.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: Namespace}
	if f.config.CurrentContext == "" {
		f.config.CurrentContext = name
	}
	return clientcmd.WriteToFile(*f.config, f.Kubeconfig)
}

// seed gives a cluster incident 000's nodes and workloads: dataNodes data
// nodes and one app node; the search engine and the graph DB on the data
// nodes, the broker on the app node; and waits for their pods to run.
func seed(ctx context.Context, m *Member, dataNodes int) error {
	if err := m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
		return err
	}
	for k := range dataNodes {
		if err := m.AddDataNode(ctx, fmt.Sprintf("data-%d", k+1)); err != nil {
			return err
		}
	}
	if _, err := m.Cluster.AddNode(ctx, localcluster.Node{Name: "app-1", Labels: map[string]string{"role": "app"}}); err != nil {
		return err
	}
	for _, w := range []struct{ name, role string }{{"search", "data"}, {"graphdb", "data"}, {"broker", "app"}} {
		if err := m.Client.Create(ctx, utils.RoleDeployment(Namespace, w.name, w.role)); err != nil {
			return err
		}
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := m.Client.List(ctx, &pods, client.InNamespace(Namespace)); err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running == 3, nil
	})
}

// AddDataNode adds a node with role=data.
func (m *Member) AddDataNode(ctx context.Context, name string) error {
	_, err := m.Cluster.AddNode(ctx, localcluster.Node{Name: name, Labels: map[string]string{"role": "data"}})
	return err
}

// Migration is incident 000's sample migration as the fleet applies it,
// with a short soak and pod age so that a stage completes in seconds.
func Migration(repoRoot string) (*pgv1.PlacementMigration, error) {
	path := filepath.Join(repoRoot, "config", "samples", "placementguard_v1alpha1_placementmigration_000_graphdb_apart.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pm := &pgv1.PlacementMigration{}
	if err := yaml.Unmarshal(data, pm); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	pm.Namespace = Namespace
	pm.Spec.SoakDuration = &metav1.Duration{Duration: 3 * time.Second}
	pm.Spec.StageTimeout = &metav1.Duration{Duration: 5 * time.Minute}
	if pm.Spec.Guards == nil {
		pm.Spec.Guards = &pgv1.Guards{}
	}
	pm.Spec.Guards.MinPodAge = &metav1.Duration{Duration: time.Second}
	return pm, nil
}

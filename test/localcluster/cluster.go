// Package localcluster starts a real Kubernetes control plane on loopback for
// tests and the demo: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, which plays the kubelets of fake nodes. Pods are
// really scheduled by the real scheduler and really rolled out by the real
// controllers; only the containers are simulated.
//
// Every process is started on free ports of 127.0.0.1, logs into the
// cluster's work directory and is stopped by Stop, and killed by the kernel
// should the parent die first.
package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configure a local cluster. The zero value is usable.
type Options struct {
	// BinDir holds the binaries `make cluster-binaries` builds; found with
	// FindBinaries when empty.
	BinDir string
	// WorkDir receives certificates, the kubeconfig, etcd's data and the
	// logs; a new temporary directory, removed by Stop, when empty.
	WorkDir string
	// StartTimeout bounds the start of the whole control plane; 2m when zero.
	StartTimeout time.Duration
	// ControllerManagerArgs are appended to kube-controller-manager's flags.
	ControllerManagerArgs []string
	// SchedulerExtenderURL, when set, registers a filter extender with the
	// scheduler (verb "filter", node names only). The scheduler sends it the
	// nodes that passed every filter plugin: a test can record them.
	SchedulerExtenderURL string
}

// Cluster is a running local control plane.
type Cluster struct {
	// Config reaches the API server as cluster-admin.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for Config, for kubectl.
	Kubeconfig string
	// Clientset is a client for Config.
	Clientset kubernetes.Interface
	// WorkDir holds the certificates, etcd's data and the component logs.
	WorkDir string
	// WebhookClientCA is the file of the authority that signs the
	// certificate the API server presents to admission webhooks, whose
	// common name is WebhookClientName.
	WebhookClientCA string

	ownWorkDir bool
	binDir     string
	procs      []*process
	stopOnce   sync.Once
}

// Start starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler
// and kwok and returns once the API server is ready and the controllers and
// the scheduler answer their health checks. On error nothing is left running.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = FindBinaries(); err != nil {
			return nil, err
		}
	} else if err := checkBinaries(binDir); err != nil {
		return nil, err
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	c := &Cluster{WorkDir: opts.WorkDir, binDir: binDir}
	if c.WorkDir == "" {
		if c.WorkDir, err = os.MkdirTemp("", "placement-guard-cluster-"); err != nil {
			return nil, fmt.Errorf("create work directory: %w", err)
		}
		c.ownWorkDir = true
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	certs, err := newPKI(c.WorkDir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(7)
	if err != nil {
		return nil, err
	}
	etcdPort, etcdPeerPort, apiPort, kcmPort, schedPort, kwokPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]
	// The seventh port is kwok's fake kubelet endpoint; nothing connects to it.
	nodePort := ports[6]
	apiURL := fmt.Sprintf("https://127.0.0.1:%d", apiPort)

	c.Config = &rest.Config{
		Host: apiURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   certs.caPEM,
			CertData: certs.adminCertPEM,
			KeyData:  certs.adminKeyPEM,
		},
		QPS:   200,
		Burst: 400,
	}
	if c.Clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	c.Kubeconfig = filepath.Join(c.WorkDir, "kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, apiURL, certs); err != nil {
		return nil, err
	}

	bin := func(name string) string { return filepath.Join(binDir, name) }
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort)
	if err := c.start("etcd", bin("etcd"), []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.WorkDir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		// The data is thrown away with the cluster; fsync only costs time.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}); err != nil {
		return nil, err
	}

	admissionConfig, err := writeAdmissionConfig(c.WorkDir, certs)
	if err != nil {
		return nil, err
	}
	c.WebhookClientCA = certs.WebhookClientCA
	if err := c.start("kube-apiserver", bin("kube-apiserver"), []string{
		"--admission-control-config-file=" + admissionConfig,
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + c.WorkDir,
		"--tls-cert-file=" + certs.ServerCert,
		"--tls-private-key-file=" + certs.ServerKey,
		"--client-ca-file=" + certs.CACert,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + certs.SAPub,
		"--service-account-signing-key-file=" + certs.SAKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		// A loopback address cannot be published in the kubernetes Service's
		// endpoints; nothing in the tests reaches the API through it.
		"--endpoint-reconciler-type=none",
		// Pods need no service account token: kwok runs no containers.
		"--disable-admission-plugins=ServiceAccount",
	}); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "the API server to be ready", c.procs, func(ctx context.Context) error {
		body, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("readyz: %w: %s", err, body)
		}
		return nil
	}); err != nil {
		return nil, err
	}

	kcmArgs := append([]string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		// Without the node lifecycle controller the not-ready taint is never
		// lifted from new nodes and nothing schedules; nodeipam needs a
		// cluster CIDR this cluster does not have.
		"--controllers=*,-nodeipam",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(kcmPort),
		"--service-account-private-key-file=" + certs.SAKey,
		"--root-ca-file=" + certs.CACert,
		"--use-service-account-credentials=false",
	}, opts.ControllerManagerArgs...)
	if err := c.start("kube-controller-manager", bin("kube-controller-manager"), kcmArgs); err != nil {
		return nil, err
	}
	schedArgs := schedulerServing(c.Kubeconfig, schedPort)
	if opts.SchedulerExtenderURL != "" {
		cfg, err := writeSchedulerConfig(c.WorkDir, c.Kubeconfig, opts.SchedulerExtenderURL)
		if err != nil {
			return nil, err
		}
		schedArgs = append(schedArgs, "--config="+cfg)
	} else {
		schedArgs = append(schedArgs, "--kubeconfig="+c.Kubeconfig, "--leader-elect=false")
	}
	if err := c.start("kube-scheduler", bin("kube-scheduler"), schedArgs); err != nil {
		return nil, err
	}
	if err := c.start("kwok", bin("kwok"), []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--config=" + bin("kwok-stages.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		"--server-address=127.0.0.1:" + strconv.Itoa(kwokPort),
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(nodePort),
		"--cidr=10.244.0.0/16",
	}); err != nil {
		return nil, err
	}

	for _, hc := range []struct {
		name string
		url  string
	}{
		{"kube-controller-manager", fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort)},
		{"kube-scheduler", fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort)},
		{"kwok", fmt.Sprintf("http://127.0.0.1:%d/healthz", kwokPort)},
	} {
		if err := waitFor(ctx, hc.name+" to be healthy", c.procs, func(ctx context.Context) error {
			return getOK(ctx, hc.url)
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) start(name, binary string, args []string) error {
	p, err := startProcess(name, binary, args, c.WorkDir)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// Stop stops every component, newest first, and removes the work directory
// if Start created it. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		for i := len(c.procs) - 1; i >= 0; i-- {
			c.procs[i].stop(10 * time.Second)
		}
		if c.ownWorkDir {
			_ = os.RemoveAll(c.WorkDir)
		}
	})
}

// Logs returns the last bytes of every component's log, for a failed test to
// print: those of the work directory, whichever process started them.
func (c *Cluster) Logs(perComponent int) string {
	var b strings.Builder
	for _, path := range componentLogs(c.WorkDir) {
		fmt.Fprintf(&b, "===== %s (%s)\n%s\n", logName(path), path, tail(path, perComponent))
	}
	return b.String()
}

// Check returns an error naming the first component that has exited.
func (c *Cluster) Check() error {
	var errs []error
	for _, p := range c.procs {
		if done, err := p.exited(); done && !p.stopped {
			errs = append(errs, fmt.Errorf("%s exited: %v", p.name, err))
		}
	}
	return errors.Join(errs...)
}

// getOK GETs url, trusting any certificate: the components serve their
// health checks with self-signed certificates made at start.
func getOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback health check of a component we started
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// schedulerServing are a kube-scheduler's flags for its health checks:
// served on 127.0.0.1 at port, the callers checked with kubeconfig.
func schedulerServing(kubeconfig string, port int) []string {
	return []string{
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
	}
}

// writeSchedulerConfig writes a KubeSchedulerConfiguration with a filter
// extender.
func writeSchedulerConfig(dir, kubeconfig, extenderURL string) (string, error) {
	return writeSchedulerFile(filepath.Join(dir, "kube-scheduler.yaml"), kubeconfig, fmt.Sprintf(`extenders:
  - urlPrefix: %q
    filterVerb: filter
    nodeCacheCapable: true
    ignorable: false
`, extenderURL))
}

// writeSchedulerFile writes a KubeSchedulerConfiguration of body (YAML at
// its top level) to path; the kubeconfig and leader election move into
// it, as flags are ignored for what a config file sets.
func writeSchedulerFile(path, kubeconfig, body string) (string, error) {
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
leaderElection:
  leaderElect: false
%s`, kubeconfig, body)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return "", fmt.Errorf("write scheduler configuration %s: %w", path, err)
	}
	return path, nil
}

// writeAdmissionConfig writes the API server's admission configuration:
// the webhook admission plugins present the webhook client certificate
// to every webhook ("*"), as docs/operations.md tells an administrator to,
// so that the admission check knows the API server's requests from
// anyone else's.
func writeAdmissionConfig(dir string, certs *pki) (string, error) {
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.AuthInfos["*"] = &clientcmdapi.AuthInfo{ClientCertificate: certs.WebhookClientCert, ClientKey: certs.WebhookClientKey}
	kubeconfigPath := filepath.Join(dir, "webhook-client.kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, kubeconfigPath); err != nil {
		return "", fmt.Errorf("write the webhooks' kubeconfig: %w", err)
	}
	cfg := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]q
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]q
`, kubeconfigPath)
	path := filepath.Join(dir, "admission.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return "", fmt.Errorf("write the admission configuration: %w", err)
	}
	return path, nil
}

func writeKubeconfig(path, server string, certs *pki) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: certs.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: certs.adminCertPEM, ClientKeyData: certs.adminKeyPEM}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

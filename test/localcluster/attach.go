package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Attach reaches a cluster another process started, from its work
// directory: the processes of a suite whose specs run in parallel share
// the one cluster the first of them started. The attached cluster runs no
// component of its own until it starts one (StartKarpenter); Stop stops
// only those, and never removes the work directory.
func Attach(workDir string) (*Cluster, error) {
	binDir, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(workDir, "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read the cluster's kubeconfig: %w", err)
	}
	// As Start's: a spec's bursts of writes are not throttled on the client.
	cfg.QPS, cfg.Burst = 200, 400
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return &Cluster{Config: cfg, Kubeconfig: kubeconfig, Clientset: clientset, WorkDir: workDir, binDir: binDir,
		WebhookClientCA: filepath.Join(workDir, "webhook-client-ca.crt")}, nil
}

// componentLogs are the log files of the work directory, by component:
// those of every process that started a component in it.
func componentLogs(workDir string) []string {
	logs, _ := filepath.Glob(filepath.Join(workDir, "*.log"))
	sort.Strings(logs)
	return logs
}

// logName is the component a log file is of.
func logName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".log")
}

// tail returns the last n bytes of a file from its first whole line.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Karpenter's kwok provider: `make karpenter` builds it into bin/ with the
// CRDs of its module (NodePools, NodeClaims, CapacityBuffers and the
// KWOKNodeClass) in bin/karpenter-crds.
const (
	karpenterBinary = "karpenter-kwok"
	karpenterCRDs   = "karpenter-crds"
	// Karpenter is the component name of the autoscaler.
	Karpenter = "karpenter"
)

// KarpenterNodeClass is the KWOKNodeClass that StartKarpenter creates, for
// NodePools to refer to.
const KarpenterNodeClass = "default"

// StartKarpenter installs Karpenter's CRDs and a KWOKNodeClass and runs
// Karpenter's kwok provider out of cluster against the cluster, with
// CapacityBuffers on. The nodes it launches carry kwok's annotation, so the
// cluster's kwok plays their kubelets. It stops with the cluster.
func (c *Cluster) StartKarpenter(ctx context.Context) error {
	binary := filepath.Join(c.binDir, karpenterBinary)
	crds := filepath.Join(c.binDir, karpenterCRDs)
	for _, p := range []string{binary, crds} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("karpenter is not built (make karpenter): %w", err)
		}
	}
	if err := c.kubectl(ctx, "apply", "--server-side", "-f", crds); err != nil {
		return fmt.Errorf("install karpenter's CRDs: %w", err)
	}
	if err := c.kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh", "crd/capacitybuffers.autoscaling.x-k8s.io", "crd/kwoknodeclasses.karpenter.kwok.sh"); err != nil {
		return err
	}
	nodeClass := filepath.Join(c.WorkDir, "kwoknodeclass.yaml")
	if err := os.WriteFile(nodeClass, []byte("apiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata:\n  name: "+KarpenterNodeClass+"\n"), 0o600); err != nil {
		return err
	}
	if err := c.kubectl(ctx, "apply", "--server-side", "-f", nodeClass); err != nil {
		return fmt.Errorf("create the KWOKNodeClass: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	if err := c.startEnv(Karpenter, binary, nil,
		"KUBECONFIG="+c.Kubeconfig,
		"DISABLE_LEADER_ELECTION=true",
		"FEATURE_GATES=CapacityBuffer=true",
		"METRICS_PORT="+strconv.Itoa(ports[0]),
		"HEALTH_PROBE_PORT="+strconv.Itoa(ports[1]),
		"SYSTEM_NAMESPACE=kube-system",
		// Provision within a second of a pod turning up Pending.
		"BATCH_IDLE_DURATION=500ms", "BATCH_MAX_DURATION=2s",
		"LOG_LEVEL=debug",
	); err != nil {
		return err
	}
	return waitFor(ctx, "karpenter to be healthy", c.procs, func(ctx context.Context) error {
		return getOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1]))
	})
}

func (c *Cluster) startEnv(name, binary string, args []string, env ...string) error {
	p, err := startProcess(name, binary, args, c.WorkDir, env...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// kubectl runs the cluster's kubectl against it.
func (c *Cluster) kubectl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// StartScheduler starts another kube-scheduler on the cluster, running the
// profiles of a KubeSchedulerConfiguration given as its `profiles:` list
// (YAML, at the top level), as a cluster that runs a second scheduler for
// some of its pods does. It returns once the scheduler answers its health
// check; stop ends it, and must be called (the process also dies with the
// test binary). name tells its log file apart.
func (c *Cluster) StartScheduler(ctx context.Context, name, profiles string) (stop func(), err error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	path, err := writeSchedulerFile(filepath.Join(c.WorkDir, "kube-scheduler-"+name+".yaml"), c.Kubeconfig, profiles)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--config=" + path}, schedulerServing(c.Kubeconfig, ports[0])...)
	p, err := startProcess("kube-scheduler-"+name, filepath.Join(c.binDir, "kube-scheduler"), args, c.WorkDir)
	if err != nil {
		return nil, err
	}
	stop = func() { p.stop(10 * time.Second) }
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	healthz := fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])
	if err := waitFor(ctx, "scheduler "+name+" to be healthy", []*process{p}, func(ctx context.Context) error {
		return getOK(ctx, healthz)
	}); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

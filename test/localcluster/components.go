package localcluster

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// Components, by the names Logs prints: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kwok                  = "kwok"
)

func (c *Cluster) component(name string) (int, *process, error) {
	for i, p := range c.procs {
		if p.name == name {
			return i, p, nil
		}
	}
	return 0, nil, fmt.Errorf("no component %q", name)
}

// StopComponent stops a component as a crash or an outage would: SIGKILL,
// no grace. RestartComponent starts it again.
func (c *Cluster) StopComponent(name string) error {
	_, p, err := c.component(name)
	if err != nil {
		return err
	}
	p.stopped = true
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return nil
}

// HangComponent freezes a component (SIGSTOP): it holds its connections
// and answers nothing, as a process stuck in a long GC or on a dead disk.
func (c *Cluster) HangComponent(name string) error {
	_, p, err := c.component(name)
	if err != nil {
		return err
	}
	return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP)
}

// ResumeComponent thaws a hung component (SIGCONT).
func (c *Cluster) ResumeComponent(name string) error {
	_, p, err := c.component(name)
	if err != nil {
		return err
	}
	return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
}

// RestartComponent starts a stopped component again with the same flags
// and ports, and, for the API server, waits until it is ready.
func (c *Cluster) RestartComponent(ctx context.Context, name string) error {
	i, p, err := c.component(name)
	if err != nil {
		return err
	}
	if done, _ := p.exited(); !done {
		return fmt.Errorf("%s is still running; stop it first", name)
	}
	np, err := startProcess(p.name, p.binary, p.args, p.workDir, p.env...)
	if err != nil {
		return err
	}
	c.procs[i] = np
	if name != KubeAPIServer {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return waitFor(ctx, "the API server to be ready again", []*process{np}, func(ctx context.Context) error {
		body, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("readyz: %w: %s", err, body)
		}
		return nil
	})
}

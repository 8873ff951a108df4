package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// recreation is what replacing the apps' pods cost the manager with every
// migration settled: a pod of the cluster deleted and one of its app
// created in its place, as a ReplicaSet replaces a pod, kwok marking the
// new one Running. Each replacement is several pod events (the deletion,
// the creation, kwok's status writes), the path of a pod through the
// manager's cluster view from end to end.
type recreation struct {
	pods       int
	seconds    float64
	cpu        float64
	podEvents  float64
	reconciles float64
	requests   float64
}

func (r recreation) markdown() string {
	if r.pods == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nRecreation: %d pods of the apps deleted and created again in %.0f s (%.0f a second), owners and labels kept, no migration selecting them.\n\n",
		r.pods, r.seconds, float64(r.pods)/r.seconds)
	fmt.Fprintf(&b, "| figure | during the recreation |\n|---|---|\n")
	fmt.Fprintf(&b, "| manager CPU | %.3f cores |\n", r.cpu/r.seconds)
	fmt.Fprintf(&b, "| manager CPU a recreated pod | %.3f ms |\n", r.cpu/float64(r.pods)*1e3)
	fmt.Fprintf(&b, "| manager CPU for 100 recreations a second | %.3f cores |\n", r.cpu/float64(r.pods)*100)
	fmt.Fprintf(&b, "| pod watch events a recreated pod | %.1f |\n", r.podEvents/float64(r.pods))
	if r.podEvents > 0 {
		fmt.Fprintf(&b, "| manager CPU a pod event | %.0f µs |\n", r.cpu/r.podEvents*1e6)
	}
	fmt.Fprintf(&b, "| reconciles, API requests | %.0f, %.0f |\n", r.reconciles, r.requests)
	return b.String()
}

// livePod is a pod of an app the recreation may replace.
type livePod struct {
	app   app
	index int
	anti  bool
}

// measureRecreation replaces the apps' pods at the recreation rate for
// recreateFor and reads what the manager spent.
func measureRecreation(ctx context.Context, o options, m *manager, cs kubernetes.Interface, apps []app) (recreation, error) {
	if o.recreateRate <= 0 || len(apps) == 0 {
		return recreation{}, nil
	}
	var pods int
	spent, err := whileRunning(ctx, m, o.recreateProfile, o.recreateFor, func() (err error) {
		if pods, err = recreatePods(ctx, cs, o, apps); err != nil {
			return err
		}
		// kwok's status writes for the last pods arrive after them.
		time.Sleep(2 * time.Second)
		return nil
	})
	if err != nil {
		return recreation{}, err
	}
	out := recreation{pods: pods, seconds: spent.seconds, cpu: spent.cpu, podEvents: spent.counts[podEventsMetric],
		reconciles: spent.counts[reconcilesMetric], requests: spent.counts[requestsMetric]}
	logf("recreation: %d pods, %.3f ms of the manager's CPU each, %.1f pod events each", pods, out.cpu/float64(max(pods, 1))*1e3, out.podEvents/float64(max(pods, 1)))
	return out, nil
}

// recreatePods deletes a random pod of the apps and creates one of its app
// in its place, bound to a random node, at the recreation rate. The pods
// are those the run created, o.pods of them in turn over the apps.
func recreatePods(ctx context.Context, cs kubernetes.Interface, o options, apps []app) (int, error) {
	live := make([]livePod, o.pods)
	for i := range live {
		live[i] = livePod{app: apps[i%len(apps)], index: i, anti: i%len(apps) == 0}
	}
	ticker := time.NewTicker(time.Second / time.Duration(o.recreateRate))
	defer ticker.Stop()
	deadline := time.Now().Add(o.recreateFor)
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		errs    []error
		limiter = make(chan struct{}, 32)
	)
	recreated := 0
	for next := o.pods; time.Now().Before(deadline); next++ {
		select {
		case <-ctx.Done():
			return recreated, ctx.Err()
		case <-ticker.C:
		}
		k := rand.IntN(len(live))
		old := live[k]
		fresh := livePod{app: old.app, index: next, anti: old.anti}
		live[k] = fresh
		recreated++
		limiter <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-limiter; wg.Done() }()
			if err := replacePod(ctx, cs, old, fresh, o.nodes); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return recreated, errors.Join(errs...)
}

func replacePod(ctx context.Context, cs kubernetes.Interface, old, fresh livePod, nodes int) error {
	gone := old.app.pod(old.index, "", old.anti)
	err := cs.CoreV1().Pods(gone.Namespace).Delete(ctx, gone.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s/%s: %w", gone.Namespace, gone.Name, err)
	}
	p := fresh.app.pod(fresh.index, nodeName(rand.IntN(nodes)), fresh.anti)
	if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

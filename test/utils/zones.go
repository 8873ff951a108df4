package utils

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Zones maps a zone to the names of the spec's nodes in it.
type Zones map[string][]string

// AddZones adds perZone nodes to each zone, named "<zone>-<i>", and returns
// them by zone.
func (e *Env) AddZones(ctx context.Context, zones []string, perZone int) (Zones, error) {
	out := Zones{}
	for _, z := range zones {
		for i := range perZone {
			name, err := e.AddNode(ctx, fmt.Sprintf("%s-%d", z, i), map[string]string{ZoneLabel: z})
			if err != nil {
				return nil, err
			}
			out[z] = append(out[z], name)
		}
	}
	return out, nil
}

// ZoneOf returns the zone of a node, "" for none of these.
func (z Zones) ZoneOf(node string) string {
	for zone, nodes := range z {
		for _, n := range nodes {
			if n == node {
				return zone
			}
		}
	}
	return ""
}

// Count counts pods per zone, every zone listed.
func (z Zones) Count(pods []corev1.Pod) map[string]int {
	out := map[string]int{}
	for zone := range z {
		out[zone] = 0
	}
	for _, p := range pods {
		if zone := z.ZoneOf(p.Spec.NodeName); zone != "" {
			out[zone]++
		}
	}
	return out
}

// PlaceReplicas scales a Deployment of the spec up zone by zone so that its
// pods start where counts says, whatever the scheduler would prefer: only
// one zone's nodes are schedulable while that zone's share is added. No
// template change, so no new revision. Every node is schedulable again
// afterwards.
func (e *Env) PlaceReplicas(ctx context.Context, d *appsv1.Deployment, zones Zones, counts map[string]int) error {
	order := make([]string, 0, len(zones))
	for z := range zones {
		order = append(order, z)
	}
	sort.Strings(order)
	total := int32(0)
	placed := map[string]int{}
	for _, z := range order {
		if counts[z] == 0 {
			continue
		}
		for _, other := range order {
			for _, n := range zones[other] {
				set := e.Cluster.CordonNode
				if other == z {
					set = e.Cluster.UncordonNode
				}
				if err := set(ctx, n); err != nil {
					return err
				}
			}
		}
		total += int32(counts[z])
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To(total)
		if err := e.Client.Patch(ctx, d, patch); err != nil {
			return fmt.Errorf("scale %s to %d: %w", d.Name, total, err)
		}
		placed[z] = counts[z]
		if err := e.settle(ctx, d.Spec.Selector.MatchLabels, zones, placed, int(total)); err != nil {
			return err
		}
	}
	for _, nodes := range zones {
		for _, n := range nodes {
			if err := e.Cluster.UncordonNode(ctx, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// settle waits for total running pods and deletes those the scheduler
// placed in a zone beyond its share, which happens when it schedules a pod
// before it has seen a node being cordoned; their replacements go where
// the cordons now say.
func (e *Env) settle(ctx context.Context, labels map[string]string, zones Zones, want map[string]int, total int) error {
	for range 10 {
		if err := e.WaitRunning(ctx, labels, total); err != nil {
			return err
		}
		pods, err := PodsOf(ctx, e.Client, e.Namespace, labels)
		if err != nil {
			return err
		}
		seen := map[string]int{}
		extra := false
		for i := range pods {
			z := zones.ZoneOf(pods[i].Spec.NodeName)
			if seen[z]++; seen[z] > want[z] {
				extra = true
				if err := e.Client.Delete(ctx, &pods[i]); client.IgnoreNotFound(err) != nil {
					return err
				}
			}
		}
		if !extra {
			return nil
		}
	}
	return fmt.Errorf("pods %v in %s do not settle at %v", labels, e.Namespace, want)
}

// WaitRunning waits until exactly n pods matching labels run, Ready.
func (e *Env) WaitRunning(ctx context.Context, labels map[string]string, n int) error {
	var last []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := PodsOf(ctx, e.Client, e.Namespace, labels)
		if err != nil {
			return false, err
		}
		last = pods
		if len(pods) != n {
			return false, nil
		}
		for _, p := range pods {
			if !Running(p) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %d running pods %v in %s (have %s): %w", n, labels, e.Namespace, Placement(last), err)
	}
	return nil
}

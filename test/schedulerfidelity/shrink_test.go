package schedulerfidelity

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// shrink removes existing pods and nodes from a failing scenario one at a
// time while the node sets still disagree, and prints what is left: the
// smallest scenario this greedy pass finds.
func shrink(s *scheduler, sc *scenario) string {
	disagrees := func(c *scenario) bool {
		cmp, err := compare(s, c)
		return err == nil && !cmp.sameNodes()
	}
	cur := *sc
	for changed := true; changed; {
		changed = false
		for i := range cur.existing {
			next := cur
			next.existing = append(append([]*corev1.Pod{}, cur.existing[:i]...), cur.existing[i+1:]...)
			if disagrees(&next) {
				cur, changed = next, true
				break
			}
		}
		if changed {
			continue
		}
		for i := range cur.nodes {
			if len(cur.nodes) == 1 {
				break
			}
			next := cur
			next.nodes = append(append([]*corev1.Node{}, cur.nodes[:i]...), cur.nodes[i+1:]...)
			next.existing = nil
			for _, p := range cur.existing {
				if p.Spec.NodeName != cur.nodes[i].Name {
					next.existing = append(next.existing, p)
				}
			}
			if disagrees(&next) {
				cur, changed = next, true
				break
			}
		}
	}
	cmp, _ := compare(s, &cur)
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %d nodes, %d existing pods: %s\n", sc.seed, len(cur.nodes), len(cur.existing), cmp)
	dump := func(kind string, o any) {
		out, _ := yaml.Marshal(o)
		fmt.Fprintf(&b, "--- %s\n%s", kind, out)
	}
	for _, n := range cur.nodes {
		dump("node", map[string]any{"name": n.Name, "labels": n.Labels, "spec": n.Spec, "allocatable": n.Status.Allocatable})
	}
	for _, p := range cur.existing {
		dump("existing pod", p)
	}
	dump("pending pod", cur.pending)
	for _, c := range cur.claims {
		dump("claim", c)
	}
	for _, v := range cur.volumes {
		dump("volume", v)
	}
	return b.String()
}

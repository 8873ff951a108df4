package v1alpha1_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

var objectSeq atomic.Int64

// migration returns a valid PlacementMigration as an unstructured object, so
// that a spec can break it in ways the Go types cannot express (an empty list,
// an unknown enum value, a field of the wrong shape).
func migration(spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": pgv1.GroupVersion.String(),
		"kind":       "PlacementMigration",
		"metadata": map[string]any{
			"name":      fmt.Sprintf("pm-%d", objectSeq.Add(1)),
			"namespace": "default",
		},
		"spec": spec,
	}}
	return u
}

// validSpec is the smallest spec the API accepts.
func validSpec() map[string]any {
	return map[string]any{
		"targets": []any{map[string]any{"kind": "Deployment", "name": "web"}},
		"constraint": map[string]any{
			"podAntiAffinity": map[string]any{"topologyKey": "kubernetes.io/hostname"},
		},
	}
}

func spreadSpec(spread map[string]any) map[string]any {
	s := validSpec()
	s["constraint"] = map[string]any{"topologySpread": spread}
	return s
}

func with(key string, value any) map[string]any {
	s := validSpec()
	s[key] = value
	return s
}

var _ = Describe("PlacementMigration validation", func() {
	It("accepts the smallest valid migration", func() {
		Expect(k8sClient.Create(ctx, migration(validSpec()))).To(Succeed())
	})

	It("asks for no capacity unless told, and needs no maxNodes for mode None", func() {
		u := migration(with("capacity", map[string]any{"provision": map[string]any{}}))
		Expect(k8sClient.Create(ctx, u)).To(Succeed())
		mode, _, _ := unstructured.NestedString(u.Object, "spec", "capacity", "provision", "mode")
		Expect(mode).To(Equal("None"))
		Expect(k8sClient.Create(ctx, migration(with("capacity", map[string]any{
			"provision": map[string]any{"mode": "CapacityBuffer", "maxNodes": 3}})))).To(Succeed())
	})

	It("accepts every sample in config/samples", func() {
		paths, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "placementguard_*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(paths).To(HaveLen(4), "one sample per incident: 000, 001, 002 and 004")
		for _, p := range paths {
			raw, err := os.ReadFile(p)
			Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(raw, &u.Object)).To(Succeed(), p)
			u.SetNamespace("default")
			Expect(k8sClient.Create(ctx, u)).To(Succeed(), p)
		}
	})

	DescribeTable("rejects a bad migration with a message a person understands",
		func(spec map[string]any, wantMessage string) {
			err := k8sClient.Create(ctx, migration(spec))
			Expect(err).To(HaveOccurred())
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			Expect(err.Error()).To(ContainSubstring(wantMessage))
		},
		Entry("both targets and targetSelector",
			with("targetSelector", map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}}}),
			"set exactly one of spec.targets (workloads by name) or spec.targetSelector (workloads by label)"),
		Entry("neither targets nor targetSelector",
			func() map[string]any { s := validSpec(); delete(s, "targets"); return s }(),
			"set exactly one of spec.targets (workloads by name) or spec.targetSelector (workloads by label)"),
		Entry("an empty target list",
			with("targets", []any{}),
			"spec.targets: Invalid value: 0: spec.targets in body should have at least 1 items"),
		Entry("more than 50 targets",
			with("targets", func() []any {
				var ts []any
				for i := range 51 {
					ts = append(ts, map[string]any{"kind": "Deployment", "name": fmt.Sprintf("w%d", i)})
				}
				return ts
			}()),
			"must have at most 50 items"),
		Entry("the same target twice",
			with("targets", []any{
				map[string]any{"kind": "Deployment", "name": "web"},
				map[string]any{"kind": "Deployment", "name": "web"},
			}),
			"Duplicate value"),
		Entry("a target of an unsupported kind",
			with("targets", []any{map[string]any{"kind": "DaemonSet", "name": "web"}}),
			`supported values: "Deployment", "StatefulSet"`),
		Entry("a target name that is not a DNS-1123 subdomain",
			with("targets", []any{map[string]any{"kind": "Deployment", "name": "Web_App"}}),
			"name must be a DNS-1123 subdomain"),
		Entry("both constraint kinds",
			with("constraint", map[string]any{
				"podAntiAffinity": map[string]any{"topologyKey": "kubernetes.io/hostname"},
				"topologySpread":  map[string]any{"topologyKey": "topology.kubernetes.io/zone"},
			}),
			"set exactly one of constraint.podAntiAffinity or constraint.topologySpread"),
		Entry("no constraint kind",
			with("constraint", map[string]any{}),
			"set exactly one of constraint.podAntiAffinity or constraint.topologySpread"),
		Entry("an empty anti-affinity topologyKey",
			with("constraint", map[string]any{"podAntiAffinity": map[string]any{"topologyKey": ""}}),
			"topologyKey must not be empty"),
		Entry("an empty spread topologyKey",
			spreadSpec(map[string]any{"topologyKey": ""}),
			"topologyKey must not be empty"),
		Entry("a topologyKey that is not a label key",
			spreadSpec(map[string]any{"topologyKey": "zone with spaces"}),
			"topologyKey must be a valid label key"),
		Entry("maxSkew 0",
			spreadSpec(map[string]any{"topologyKey": "topology.kubernetes.io/zone", "maxSkew": 0}),
			"maxSkew must be at least 1"),
		Entry("a capacity request without maxNodes",
			with("capacity", map[string]any{"provision": map[string]any{"mode": "CapacityBuffer"}}),
			"capacity.provision.maxNodes is required unless mode is None"),
		Entry("a capacity request of an unknown mode",
			with("capacity", map[string]any{"provision": map[string]any{"mode": "Cluster", "maxNodes": 1}}),
			`supported values: "None", "CapacityBuffer", "PlaceholderPods"`),
		Entry("maxNodes 0",
			with("capacity", map[string]any{"provision": map[string]any{"mode": "PlaceholderPods", "maxNodes": 0}}),
			"should be greater than or equal to 1"),
		Entry("maxNodes above 1000",
			with("capacity", map[string]any{"provision": map[string]any{"mode": "PlaceholderPods", "maxNodes": 1001}}),
			"should be less than or equal to 1000"),
		Entry("minDomains 0",
			spreadSpec(map[string]any{"topologyKey": "topology.kubernetes.io/zone", "minDomains": 0}),
			"minDomains must be at least 1"),
		Entry("minDomains with a soft final stage",
			func() map[string]any {
				s := spreadSpec(map[string]any{"topologyKey": "topology.kubernetes.io/zone", "minDomains": 3})
				s["finalStage"] = "Soft"
				return s
			}(),
			"constraint.topologySpread.minDomains needs finalStage Hard"),
		Entry("an anti-affinity namespace that is not a namespace name",
			func() map[string]any {
				s := validSpec()
				s["constraint"] = map[string]any{"podAntiAffinity": map[string]any{"topologyKey": "kubernetes.io/hostname", "namespaces": []any{"payments", "Search_Team"}}}
				return s
			}(),
			"namespaces items must be namespace names"),
		Entry("a spread matchLabelKeys item that is not a label key",
			spreadSpec(map[string]any{"topologyKey": "topology.kubernetes.io/zone", "matchLabelKeys": []any{"pod template hash"}}),
			"matchLabelKeys items must be valid label keys"),
		Entry("an anti-affinity matchLabelKeys item that is not a label key",
			func() map[string]any {
				s := validSpec()
				s["constraint"] = map[string]any{"podAntiAffinity": map[string]any{"topologyKey": "kubernetes.io/hostname", "matchLabelKeys": []any{"-bad"}}}
				return s
			}(),
			"matchLabelKeys items must be valid label keys"),
		Entry("a spread matchLabelKeys key also in the selector's labels",
			spreadSpec(map[string]any{"topologyKey": "topology.kubernetes.io/zone", "matchLabelKeys": []any{"app"},
				"labelSelector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}),
			"a key of matchLabelKeys may not also be in labelSelector"),
		Entry("an anti-affinity matchLabelKeys key also in the selector's expressions",
			func() map[string]any {
				s := validSpec()
				s["constraint"] = map[string]any{"podAntiAffinity": map[string]any{"topologyKey": "kubernetes.io/hostname", "matchLabelKeys": []any{"track"},
					"labelSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "track", "operator": "Exists"}}}}}
				return s
			}(),
			"a key of matchLabelKeys may not also be in labelSelector"),
		Entry("an unknown final stage",
			with("finalStage", "Firm"),
			`supported values: "Soft", "Hard"`),
		Entry("an unknown nodeTaintsPolicy",
			spreadSpec(map[string]any{"topologyKey": "topology.kubernetes.io/zone", "nodeTaintsPolicy": "Sometimes"}),
			`supported values: "Honor", "Ignore"`),
		Entry("a soak longer than a day",
			with("soakDuration", "25h"),
			"soakDuration must be between 0s and 24h"),
		Entry("a negative soak",
			with("soakDuration", "-1m"),
			"soakDuration must be between 0s and 24h"),
		Entry("a stage timeout too short for any rollout",
			with("stageTimeout", "5s"),
			"stageTimeout must be between 30s and 24h"),
		Entry("a minimum pod age longer than a day",
			with("guards", map[string]any{"minPodAge": "48h"}),
			"guards.minPodAge must be between 0s and 24h"),
		Entry("negative maxRestarts",
			with("guards", map[string]any{"maxRestarts": -1}),
			"should be greater than or equal to 0"),
		Entry("an unknown onDelete policy",
			with("onDelete", "Delete"),
			`supported values: "Retain", "Revert"`),
		Entry("capacity of zero nodes",
			with("capacity", map[string]any{"minNodes": 0}),
			"should be greater than or equal to 1"),
		Entry("a targetSelector without kinds",
			func() map[string]any {
				s := validSpec()
				delete(s, "targets")
				s["targetSelector"] = map[string]any{"kinds": []any{}, "selector": map[string]any{"matchLabels": map[string]any{"app": "x"}}}
				return s
			}(),
			"should have at least 1 items"),
		Entry("too many matchLabelKeys",
			spreadSpec(map[string]any{"topologyKey": "topology.kubernetes.io/zone", "matchLabelKeys": []any{
				"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k",
			}}),
			"must have at most 10 items"),
		Entry("both matchLabelKeys and revisionScope",
			spreadSpec(map[string]any{"topologyKey": "topology.kubernetes.io/zone", "matchLabelKeys": []any{"release"}, "revisionScope": "AllRevisions"}),
			"set either matchLabelKeys or revisionScope"),
		Entry("an unknown revisionScope",
			spreadSpec(map[string]any{"topologyKey": "topology.kubernetes.io/zone", "revisionScope": "Latest"}),
			`supported values: "NewRevision", "AllRevisions"`),
		Entry("an empty targetSelector.selector, which would select every workload",
			func() map[string]any {
				s := validSpec()
				delete(s, "targets")
				s["targetSelector"] = map[string]any{"selector": map[string]any{}}
				return s
			}(),
			"targetSelector.selector needs at least one matchLabels or matchExpressions entry"),
		Entry("a targetSelector with empty matchLabels",
			func() map[string]any {
				s := validSpec()
				delete(s, "targets")
				s["targetSelector"] = map[string]any{"selector": map[string]any{"matchLabels": map[string]any{}}}
				return s
			}(),
			"targetSelector.selector needs at least one matchLabels or matchExpressions entry"),
		Entry("a selector label key that is not a label key",
			spreadSpec(map[string]any{"topologyKey": "topology.kubernetes.io/zone", "labelSelector": map[string]any{"matchLabels": map[string]any{"app name": "web"}}}),
			"spec.constraint.topologySpread.labelSelector.matchLabels: Invalid value"),
		Entry("a selector label value that is not a label value",
			with("guards", map[string]any{"protectedPods": map[string]any{"matchLabels": map[string]any{"app": "not a value!"}}}),
			"spec.guards.protectedPods.matchLabels[app]: Invalid value"),
		Entry("an unknown selector operator",
			with("capacity", map[string]any{"nodeSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "role", "operator": "Is", "values": []any{"data"}}}}}),
			`spec.capacity.nodeSelector.matchExpressions[0].operator: Unsupported value: "Is"`),
		Entry("In without values",
			with("capacity", map[string]any{"nodeSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "role", "operator": "In"}}}}),
			"operators In and NotIn need values; Exists and DoesNotExist take none"),
		Entry("Exists with values",
			with("capacity", map[string]any{"nodeSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "role", "operator": "Exists", "values": []any{"x"}}}}}),
			"operators In and NotIn need values; Exists and DoesNotExist take none"),
		Entry("a selector requirement whose key is not a label key",
			with("capacity", map[string]any{"nodeSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "-role", "operator": "Exists"}}}}),
			"spec.capacity.nodeSelector.matchExpressions[0].key: Invalid value"),
		Entry("a target name longer than 253 characters",
			with("targets", []any{map[string]any{"kind": "Deployment", "name": strings.Repeat("a", 254)}}),
			"may not be more than 253 bytes"),
	)
})

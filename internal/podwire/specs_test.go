package podwire

import (
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

func marshal(t *testing.T, p *corev1.Pod) []byte {
	t.Helper()
	raw, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func decode(t *testing.T, raw []byte) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := DecodePod(raw, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// The pods of one template share the spec decoded for the first of them,
// each with its own node, though the API server gives each its own name
// for the service account token's volume, and its own environment; a pod
// whose spec differs, if only by a resized request, gets its own.
func TestPodsOfOneTemplateShareTheirSpec(t *testing.T) {
	a, b := realisticPod(1), realisticPod(2)
	a.Spec.Volumes[1].Name, b.Spec.Volumes[1].Name = "kube-api-access-x7k2p", "kube-api-access-q9fzt"
	b.Spec.Containers[0].Env[0].Value = "its own"
	b.Spec.NodeName = "another-node"
	pending := realisticPod(3)
	pending.Spec.NodeName = ""
	resized := realisticPod(4)
	resized.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("750m")

	da, db, dp, dr := decode(t, marshal(t, a)), decode(t, marshal(t, b)), decode(t, marshal(t, pending)), decode(t, marshal(t, resized))
	for _, c := range []struct {
		name string
		got  *corev1.Pod
		node string
	}{{"a", da, a.Spec.NodeName}, {"b", db, "another-node"}, {"pending", dp, ""}, {"resized", dr, resized.Spec.NodeName}} {
		if c.got.Spec.NodeName != c.node {
			t.Errorf("pod %s decoded on node %q, want %q", c.name, c.got.Spec.NodeName, c.node)
		}
	}
	if !sameContainers(da, db) || !sameContainers(da, dp) {
		t.Error("pods of one template decoded their containers each, want them shared")
	}
	if sameContainers(da, dr) {
		t.Fatal("a pod with a resized request shares the containers of its template")
	}
	if got := dr.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("750m")) != 0 {
		t.Errorf("the resized pod requests %s of CPU, want 750m", got.String())
	}
	for _, p := range []*corev1.Pod{a, b, pending, resized} {
		assertTrimsAsFull(t, marshal(t, p))
	}
}

func sameContainers(a, b *corev1.Pod) bool {
	return unsafe.SliceData(a.Spec.Containers) == unsafe.SliceData(b.Spec.Containers)
}

// A spec sent in two parts, or a node name given twice, is read as
// protobuf reads it: the parts merged, the last name.
func TestASpecInPartsIsMergedAsProtobufMergesIt(t *testing.T) {
	p := realisticPod(5)
	raw := marshal(t, p)
	extra, err := (&corev1.PodSpec{NodeName: "second", Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	twoParts := protowire.AppendBytes(protowire.AppendTag(append([]byte(nil), raw...), podSpecField, protowire.BytesType), extra)
	got := decode(t, twoParts)
	full := &corev1.Pod{}
	if err := full.Unmarshal(twoParts); err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "second" || !equality.Semantic.DeepEqual(got.Spec.Tolerations, full.Spec.Tolerations) {
		t.Errorf("a spec in two parts decoded on %q with tolerations %v, want %q and %v", got.Spec.NodeName, got.Spec.Tolerations, "second", full.Spec.Tolerations)
	}
	assertTrimsAsFull(t, twoParts)
}

// The cache holds at most its limit of wire bytes, and starts again empty
// past it; what it decodes is the same either way.
func TestTheSpecCacheIsBounded(t *testing.T) {
	c := newSpecCache(1000)
	spec := func(i int) []byte {
		raw, err := (&corev1.PodSpec{Containers: []corev1.Container{{Name: string(rune('a' + i)), Image: "image-with-a-long-name-" + string(rune('a'+i))}}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for i := range 20 {
		got, err := c.decode(spec(i))
		if err != nil {
			t.Fatal(err)
		}
		if got.Containers[0].Name != string(rune('a'+i)) {
			t.Fatalf("spec %d decoded as %v", i, got.Containers)
		}
		if c.bytes > c.limit {
			t.Fatalf("after %d specs the cache holds %d bytes, over its %d", i+1, c.bytes, c.limit)
		}
	}
	if len(c.decoded) == 0 || len(c.decoded) >= 20 {
		t.Fatalf("the cache holds %d specs of 20, want it started again once full", len(c.decoded))
	}
}

package podwire

import (
	"reflect"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// The pods of one template share the labels and owners decoded for the
// first of them, though each has its own name, uid and annotations; a
// pod with a label of its own (a StatefulSet's pod name) gets its own
// labels, and keeps its template's owners.
func TestPodsOfOneTemplateShareTheirLabelsAndOwners(t *testing.T) {
	a, b, own := realisticPod(11), realisticPod(12), realisticPod(13)
	b.UID, b.Annotations[corev1.PodDeletionCost] = "another-uid", "9"
	own.Labels = map[string]string{"app": "app", "pod-template-hash": "abc", "statefulset.kubernetes.io/pod-name": own.Name}

	da, db, down := decode(t, marshal(t, a)), decode(t, marshal(t, b)), decode(t, marshal(t, own))
	if reflect.ValueOf(da.Labels).UnsafePointer() != reflect.ValueOf(db.Labels).UnsafePointer() ||
		unsafe.SliceData(da.OwnerReferences) != unsafe.SliceData(db.OwnerReferences) {
		t.Error("pods of one template decoded their labels and owners each, want them shared")
	}
	if reflect.ValueOf(da.Labels).UnsafePointer() == reflect.ValueOf(down.Labels).UnsafePointer() {
		t.Fatal("a pod with a label of its own shares the labels of its template")
	}
	if down.Labels["statefulset.kubernetes.io/pod-name"] != own.Name || down.OwnerReferences[0].Name != "app-abc" {
		t.Errorf("the pod with a label of its own decoded as %v, owned by %v", down.Labels, down.OwnerReferences)
	}
	if db.UID != "another-uid" || db.Annotations[corev1.PodDeletionCost] != "9" || da.Annotations[corev1.PodDeletionCost] != "5" {
		t.Errorf("what is each pod's own came out shared: uid %s, deletion costs %s and %s", db.UID, da.Annotations[corev1.PodDeletionCost], db.Annotations[corev1.PodDeletionCost])
	}
	for _, p := range []*corev1.Pod{a, b, own} {
		assertTrimsAsFull(t, marshal(t, p))
	}
}

// Metadata sent in two parts is read as protobuf reads it: the labels of
// both, the owners of both.
func TestMetadataInPartsIsMergedAsProtobufMergesIt(t *testing.T) {
	raw := marshal(t, realisticPod(14))
	extra, err := (&metav1.ObjectMeta{Labels: map[string]string{"second": "part"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "node"}}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	twoParts := protowire.AppendBytes(protowire.AppendTag(append([]byte(nil), raw...), podMetaField, protowire.BytesType), extra)
	got := decode(t, twoParts)
	if got.Labels["second"] != "part" || got.Labels["app"] != "app" || len(got.OwnerReferences) != 2 {
		t.Errorf("metadata in two parts decoded with labels %v and owners %v", got.Labels, got.OwnerReferences)
	}
	assertTrimsAsFull(t, twoParts)
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
	c := newPartCache(1000, specs.unmarshal)
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

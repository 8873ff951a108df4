package podwire

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// TestStrippedNodesTrimAsFullOnes: whatever a node holds, its stripped
// decode equals TrimNode of its full decode, so the engine cannot tell
// the two apart.
func TestStrippedNodesTrimAsFullOnes(t *testing.T) {
	f := newFiller(2)
	for i := range 2000 {
		n := &corev1.Node{}
		f.Fill(n)
		// A Ready condition now and then, among others, as kubelets post.
		if len(n.Status.Conditions) > 0 && i%2 == 0 {
			n.Status.Conditions[i/2%len(n.Status.Conditions)].Type = corev1.NodeReady
		}
		raw, err := n.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		full := &corev1.Node{}
		if err := full.Unmarshal(raw); err != nil {
			t.Fatal(err)
		}
		TrimNode(full)
		stripped := &corev1.Node{}
		if err := DecodeNode(raw, stripped); err != nil {
			t.Fatalf("node %s: %v", full.Name, err)
		}
		if !equality.Semantic.DeepEqual(full, stripped) {
			t.Fatalf("node %s decodes otherwise stripped on the wire (-trimmed +stripped):\n%s", full.Name, cmp.Diff(full, stripped))
		}
	}
}

func kwokNode(name string) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "7", Labels: map[string]string{corev1.LabelHostname: name},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kwok", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)}}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Images:     []corev1.ContainerImage{{Names: []string{"registry.example.com/big:v1"}, SizeBytes: 1 << 30}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"},
		},
	}
	return n
}

// TestTheSerializerStripsNodes: nodes and node lists come stripped of what
// the engine never reads, their kind set; their images stay, which
// ImageLocality scores by.
func TestTheSerializerStripsNodes(t *testing.T) {
	d := decoderFor(t, runtime.ContentTypeProtobuf)
	obj, err := runtime.Decode(d, protobufOf(t, kwokNode("a")))
	if err != nil {
		t.Fatal(err)
	}
	n := obj.(*corev1.Node)
	if n.ManagedFields != nil || n.Status.NodeInfo.KubeletVersion != "" || n.Kind != "Node" {
		t.Errorf("node not decoded stripped: %+v", n)
	}
	if n.Spec.Taints[0].Key != "gpu" || n.Status.Conditions[0].Type != corev1.NodeReady || n.ResourceVersion != "7" ||
		len(n.Status.Images) != 1 || n.Status.Images[0].SizeBytes != 1<<30 {
		t.Errorf("node lost what the engine reads: %+v", n)
	}
	list := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}, Items: []corev1.Node{*kwokNode("a"), *kwokNode("b")}}
	obj, err = runtime.Decode(d, protobufOf(t, list))
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*corev1.NodeList)
	if got.ResourceVersion != "42" || len(got.Items) != 2 || got.Items[1].Name != "b" || len(got.Items[1].Status.Images) != 1 || got.Items[1].Status.NodeInfo.KubeletVersion != "" {
		t.Fatalf("list: got %+v", got)
	}
}

// TestAWatchStreamDecodesAsBefore reads a protobuf watch stream as
// client-go does (framer, stream decoder, rest/watch Decoder): events of
// pods, nodes and an error come out in order and whole, though each
// event's object is no longer copied out of its frame before decoding;
// a deleted pod comes out as what its deletion reads.
func TestAWatchStreamDecodesAsBefore(t *testing.T) {
	info, ok := runtime.SerializerInfoForMediaType(Serializer{NegotiatedSerializer: clientgoscheme.Codecs.WithoutConversion()}.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok || info.StreamSerializer == nil {
		t.Fatal("no protobuf stream serializer")
	}
	events := []struct {
		typ watch.EventType
		obj runtime.Object
	}{
		{watch.Added, realisticPod(1)},
		{watch.Modified, kwokNode("a")},
		{watch.Deleted, realisticPod(2)},
		{watch.Error, &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired, Code: 410}},
	}
	var wire bytes.Buffer
	w := info.StreamSerializer.NewFrameWriter(&wire)
	for _, e := range events {
		frame, err := (&metav1.WatchEvent{Type: string(e.typ), Object: runtime.RawExtension{Raw: protobufOf(t, e.obj)}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	frames := info.StreamSerializer.NewFrameReader(io.NopCloser(&wire))
	d := restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer), info.Serializer)
	var decoded []runtime.Object
	for i, want := range events {
		typ, obj, err := d.Decode()
		if err != nil || typ != want.typ {
			t.Fatalf("event %d: %s, %v; want %s", i, typ, err, want.typ)
		}
		decoded = append(decoded, obj)
	}
	// Read after the whole stream: an object holding on to its frame
	// would show the bytes of a later one.
	var names []string
	for _, obj := range decoded {
		switch o := obj.(type) {
		case *corev1.Pod:
			if o.Name == "app-abc-00002" {
				assertIdentityOnly(t, o, realisticPod(2))
			} else {
				assertStripped(t, o)
			}
			names = append(names, o.Name)
		case *corev1.Node:
			names = append(names, o.Name)
		case *metav1.Status:
			names = append(names, string(o.Reason))
		}
	}
	if want := []string{"app-abc-00001", "a", "app-abc-00002", "Expired"}; !cmp.Equal(names, want) {
		t.Fatalf("decoded %v, want %v", names, want)
	}
	if _, _, err := d.Decode(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last event: %v, want EOF", err)
	}
}

// assertIdentityOnly: a deleted pod decodes to what its deletion reads,
// its kind, name, namespace, uid, version and labels, and nothing else.
func assertIdentityOnly(t *testing.T, got, sent *corev1.Pod) {
	t.Helper()
	want := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: sent.Name, Namespace: sent.Namespace, UID: sent.UID,
			ResourceVersion: sent.ResourceVersion, Labels: sent.Labels},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deleted pod %s decoded beyond its identity (-want +got):\n%s", sent.Name, diff)
	}
}

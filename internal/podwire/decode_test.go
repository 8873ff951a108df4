package podwire

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// protobufOf is obj as the API server sends it: in its envelope, prefix
// included.
func protobufOf(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(clientgoscheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	var b bytes.Buffer
	if err := clientgoscheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func decoderFor(t *testing.T, mediaType string) runtime.Decoder {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(Serializer{NegotiatedSerializer: clientgoscheme.Codecs.WithoutConversion()}.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no %s serializer", mediaType)
	}
	return info.Serializer
}

func assertStripped(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if p.Spec.Containers[0].Env != nil || p.ManagedFields != nil || p.Labels["app"] != "app" {
		t.Errorf("pod not decoded stripped: %+v", p)
	}
	if p.APIVersion != "v1" || p.Kind != "Pod" {
		t.Errorf("kind: got %q %q, want v1 Pod", p.APIVersion, p.Kind)
	}
}

// TestTheSerializerStripsPodsAndHandsOnTheRest decodes what a list and a
// watch of pods receive: pods and pod lists come stripped, and anything
// else (the Status of a watch that expired) is decoded as before.
func TestTheSerializerStripsPodsAndHandsOnTheRest(t *testing.T) {
	d := decoderFor(t, runtime.ContentTypeProtobuf)

	obj, err := runtime.Decode(d, protobufOf(t, realisticPod(1)))
	if err != nil {
		t.Fatal(err)
	}
	assertStripped(t, obj.(*corev1.Pod))

	into := &corev1.Pod{Spec: corev1.PodSpec{Hostname: "stale"}}
	obj, _, err = d.Decode(protobufOf(t, realisticPod(2)), nil, into)
	if err != nil || obj != into || into.Spec.Hostname != "" {
		t.Errorf("decode into a pod: got %p (want %p), %v, hostname %q", obj, into, err, into.Spec.Hostname)
	}

	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}, Items: []corev1.Pod{*realisticPod(1), *realisticPod(2)}}
	obj, err = runtime.Decode(d, protobufOf(t, list))
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*corev1.PodList)
	if got.ResourceVersion != "42" || len(got.Items) != 2 || got.Items[1].Name != "app-abc-00002" {
		t.Fatalf("list: got %+v", got)
	}
	got.Items[0].SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	assertStripped(t, &got.Items[0])

	status := &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired, Code: 410}
	obj, err = runtime.Decode(d, protobufOf(t, status))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := obj.(*metav1.Status); !ok || s.Reason != metav1.StatusReasonExpired {
		t.Errorf("status: got %#v", obj)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}}
	obj, err = runtime.Decode(d, protobufOf(t, cm))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := obj.(*corev1.ConfigMap); !ok || c.Data["k"] != "v" {
		t.Errorf("config map: got %#v", obj)
	}

	if _, err := runtime.Decode(d, append(protobufPrefix, 0x0a, 0x05, 0x01)); err == nil {
		t.Error("a truncated envelope was decoded")
	}
}

// TestTheEndOfAStreamedListIsKept: the reflector knows that the first
// events of a streamed list are over from an annotation on a bookmark pod;
// without it the first list would never end.
func TestTheEndOfAStreamedListIsKept(t *testing.T) {
	bookmark := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true", "other": "x"}}}
	obj, err := runtime.Decode(decoderFor(t, runtime.ContentTypeProtobuf), protobufOf(t, bookmark))
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*corev1.Pod).Annotations; len(got) != 1 || got[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("bookmark annotations: got %v, want the end of the initial events alone", got)
	}
}

// TestJSONIsDecodedAsBefore: a server that answers in JSON gets full pods,
// which the feed trims afterwards.
func TestJSONIsDecodedAsBefore(t *testing.T) {
	obj, err := runtime.Decode(decoderFor(t, runtime.ContentTypeJSON), []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","env":[{"name":"A"}]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p := obj.(*corev1.Pod); len(p.Spec.Containers[0].Env) != 1 {
		t.Errorf("JSON pod: got %+v", p)
	}
}

package podwire

import (
	"bytes"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// buffers hold the stripped form of a pod while it is decoded; the
// generated decoder copies what it keeps, so a buffer is reused at once.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// DecodePod decodes the protobuf of a Pod (the message, without the
// envelope the API server wraps it in) into pod, skipping every field
// TrimPod drops. Its spec, labels and owners are decoded once for every
// pod that sends the same ones (decodeSharingParts): pods decoded from the
// same bytes share their slices, maps and pointers, which must not be
// changed.
func DecodePod(raw []byte, pod *corev1.Pod) error {
	*pod = corev1.Pod{}
	shared, err := decodeSharingParts(raw, pod)
	if !shared {
		err = decodeKept(raw, podRules, pod.Unmarshal)
	}
	if err != nil {
		return fmt.Errorf("decode pod: %w", err)
	}
	return nil
}

// DecodePodList decodes the protobuf of a PodList into list, each pod as
// DecodePod does.
func DecodePodList(raw []byte, list *corev1.PodList) error {
	*list = corev1.PodList{}
	err := eachItem(raw, &list.ListMeta, func(item []byte) error {
		list.Items = append(list.Items, corev1.Pod{})
		return DecodePod(item, &list.Items[len(list.Items)-1])
	})
	if err != nil {
		return fmt.Errorf("decode pod list: %w", err)
	}
	return nil
}

// decodeKept unmarshals what rules keep of raw.
func decodeKept(raw []byte, rules map[protowire.Number]rule, unmarshal func([]byte) error) error {
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	stripped, err := appendKept((*buf)[:0], raw, rules)
	if err != nil {
		return err
	}
	*buf = stripped
	return unmarshal(stripped)
}

// eachItem reads a list's protobuf: its metadata (1) into meta, and each
// of its items (2) to item.
func eachItem(raw []byte, meta *metav1.ListMeta, item func([]byte) error) error {
	return eachField(raw, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			if err := meta.Unmarshal(value); err != nil {
				return fmt.Errorf("list metadata: %w", err)
			}
		case 2:
			return item(value)
		}
		return nil
	})
}

// protobufPrefix starts every object the API server sends in protobuf,
// ahead of a runtime.Unknown that holds its kind and bytes.
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

var (
	podKind      = corev1.SchemeGroupVersion.WithKind("Pod")
	podListKind  = corev1.SchemeGroupVersion.WithKind("PodList")
	nodeKind     = corev1.SchemeGroupVersion.WithKind("Node")
	nodeListKind = corev1.SchemeGroupVersion.WithKind("NodeList")
)

// serializer is a protobuf serializer that decodes pods and nodes, and
// their lists, with DecodePod and DecodeNode, and hands every other object
// (a watch's error Status) to the serializer it wraps.
type serializer struct{ runtime.Serializer }

func (s serializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	gvk, raw, ok := envelope(data)
	if ok {
		var obj runtime.Object
		var err error
		switch gvk {
		case podKind:
			obj, err = decodeInto(into, raw, DecodePod)
		case podListKind:
			obj, err = decodeInto(into, raw, DecodePodList)
		case nodeKind:
			obj, err = decodeInto(into, raw, DecodeNode)
		case nodeListKind:
			obj, err = decodeInto(into, raw, DecodeNodeList)
		}
		if err != nil {
			return nil, &gvk, err
		}
		if obj != nil {
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			return obj, &gvk, nil
		}
	}
	return s.Serializer.Decode(data, defaults, into)
}

// decodeInto decodes raw with decode into into as a *T, or a new T when
// into is nil; it returns nil, and decodes nothing, when into is of
// another type, which the wrapped serializer then decodes.
func decodeInto[T any, PT interface {
	*T
	runtime.Object
}](into runtime.Object, raw []byte, decode func([]byte, PT) error) (runtime.Object, error) {
	obj, ok := orNew[T, PT](into)
	if !ok {
		return nil, nil
	}
	if err := decode(raw, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// orNew is into as a *T, or a new T when into is nil; ok is false when
// into is of another type, which the wrapped serializer then decodes.
func orNew[T any, PT interface {
	*T
	runtime.Object
}](into runtime.Object) (PT, bool) {
	if into == nil {
		return PT(new(T)), true
	}
	t, ok := into.(PT)
	return t, ok
}

// envelope reads the kind and bytes of an object in the API server's
// protobuf envelope: the prefix, then a runtime.Unknown with its typeMeta
// (1: apiVersion 1, kind 2), raw 2 and contentEncoding 3. ok is false for
// anything else, which the wrapped decoder then handles or refuses.
func envelope(data []byte) (gvk schema.GroupVersionKind, raw []byte, ok bool) {
	if !bytes.HasPrefix(data, protobufPrefix) {
		return gvk, nil, false
	}
	var apiVersion, kind string
	encoded := false
	err := eachField(data[len(protobufPrefix):], func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			return eachField(value, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
				switch {
				case typ != protowire.BytesType:
				case num == 1:
					apiVersion = string(value)
				case num == 2:
					kind = string(value)
				}
				return nil
			})
		case 2:
			raw = value
		case 3:
			encoded = len(value) > 0
		}
		return nil
	})
	if err != nil || encoded {
		return gvk, nil, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return gvk, nil, false
	}
	return gv.WithKind(kind), raw, true
}

// Serializer is a negotiated serializer whose protobuf decoder decodes pods
// with DecodePod and nodes with DecodeNode, and whose watch streams are
// decoded without copying each event's object (watchEvents). It is meant
// for a client that only lists and watches pods or nodes: what it returns
// holds what TrimPod and TrimNode keep and nothing more.
type Serializer struct{ runtime.NegotiatedSerializer }

// SupportedMediaTypes wraps the protobuf decoders of the serializer
// beneath.
func (s Serializer) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := s.NegotiatedSerializer.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, len(infos))
	copy(out, infos)
	for i := range out {
		if out[i].MediaType != runtime.ContentTypeProtobuf {
			continue
		}
		out[i].Serializer = serializer{Serializer: out[i].Serializer}
		if ss := out[i].StreamSerializer; ss != nil {
			wrapped := *ss
			wrapped.Serializer = watchEvents{Serializer: ss.Serializer}
			out[i].StreamSerializer = &wrapped
		}
	}
	return out
}

// watchEvents decodes the protobuf watch events of a stream (type 1,
// object 2, a RawExtension whose raw is 1) without copying the object
// each carries: its bytes stay in the frame the stream's decoder read
// them into, and are decoded at once (client-go's rest/watch Decoder),
// by decoders that copy what they keep, before that frame is reused.
// The generated decoder would copy every event's bytes first.
type watchEvents struct{ runtime.Serializer }

func (w watchEvents) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	event, ok := into.(*metav1.WatchEvent)
	if !ok {
		return w.Serializer.Decode(data, defaults, into)
	}
	var typ string
	var raw []byte
	err := eachField(data, func(num protowire.Number, wire protowire.Type, _, value []byte) error {
		switch {
		case wire != protowire.BytesType:
		case num == 1:
			typ = string(value)
		case num == 2:
			return eachField(value, func(num protowire.Number, wire protowire.Type, _, value []byte) error {
				if num == 1 && wire == protowire.BytesType {
					raw = value
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return w.Serializer.Decode(data, defaults, into)
	}
	if typ == string(watch.Deleted) {
		raw = deletedPodIdentity(raw)
	}
	*event = metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}
	return event, nil, nil
}

// deletedPodIdentity is the envelope of a deleted pod holding only what its
// deletion reads (deletedPodRules), in a buffer of its own; any other
// object as it is. A recreated pod is a deletion among a handful of
// events, and the whole pod it carries, the last state of one that is
// gone, would be decoded to be forgotten.
func deletedPodIdentity(obj []byte) []byte {
	if gvk, _, ok := envelope(obj); !ok || gvk != podKind {
		return obj
	}
	identity, err := appendKept(append(make([]byte, 0, 256), protobufPrefix...), obj[len(protobufPrefix):], deletedPodEnvelopeRules)
	if err != nil {
		// The whole object, whose decoding says what is wrong with it.
		return obj
	}
	return identity
}

package podwire

import (
	"bytes"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// buffers hold the stripped form of a pod while it is decoded; the
// generated decoder copies what it keeps, so a buffer is reused at once.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// DecodePod decodes the protobuf of a Pod (the message, without the
// envelope the API server wraps it in) into pod, skipping every field
// TrimPod drops.
func DecodePod(raw []byte, pod *corev1.Pod) error {
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	stripped, err := appendKept((*buf)[:0], raw, podRules)
	if err != nil {
		return fmt.Errorf("decode pod: %w", err)
	}
	*buf = stripped
	*pod = corev1.Pod{}
	if err := pod.Unmarshal(stripped); err != nil {
		return fmt.Errorf("decode pod: %w", err)
	}
	return nil
}

// DecodePodList decodes the protobuf of a PodList into list, each pod as
// DecodePod does.
func DecodePodList(raw []byte, list *corev1.PodList) error {
	*list = corev1.PodList{}
	err := eachField(raw, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			if err := list.ListMeta.Unmarshal(value); err != nil {
				return fmt.Errorf("list metadata: %w", err)
			}
		case 2:
			list.Items = append(list.Items, corev1.Pod{})
			return DecodePod(value, &list.Items[len(list.Items)-1])
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("decode pod list: %w", err)
	}
	return nil
}

// protobufPrefix starts every object the API server sends in protobuf,
// ahead of a runtime.Unknown that holds its kind and bytes.
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

var (
	podKind     = corev1.SchemeGroupVersion.WithKind("Pod")
	podListKind = corev1.SchemeGroupVersion.WithKind("PodList")
)

// serializer is a protobuf serializer that decodes pods and pod lists with
// DecodePod and hands every other object (a watch's error Status) to the
// serializer it wraps.
type serializer struct{ runtime.Serializer }

func (s serializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	gvk, raw, ok := envelope(data)
	if ok && gvk == podKind {
		if pod, ok := orNew[corev1.Pod](into); ok {
			if err := DecodePod(raw, pod); err != nil {
				return nil, &gvk, err
			}
			pod.SetGroupVersionKind(gvk)
			return pod, &gvk, nil
		}
	}
	if ok && gvk == podListKind {
		if list, ok := orNew[corev1.PodList](into); ok {
			if err := DecodePodList(raw, list); err != nil {
				return nil, &gvk, err
			}
			list.SetGroupVersionKind(gvk)
			return list, &gvk, nil
		}
	}
	return s.Serializer.Decode(data, defaults, into)
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
// with DecodePod. It is meant for a client that only lists and watches
// pods: the pods it returns hold what TrimPod keeps and nothing more.
type Serializer struct{ runtime.NegotiatedSerializer }

// SupportedMediaTypes wraps the protobuf decoder of the serializer beneath.
func (s Serializer) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := s.NegotiatedSerializer.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, len(infos))
	copy(out, infos)
	for i := range out {
		if out[i].MediaType == runtime.ContentTypeProtobuf {
			out[i].Serializer = serializer{Serializer: out[i].Serializer}
		}
	}
	return out
}

package podwire

import (
	"fmt"
	"maps"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
)

// Pod: spec 2; PodSpec: nodeName 10.
const (
	podSpecField  protowire.Number = 2
	nodeNameField protowire.Number = 10
)

// podRulesButSpec are podRules without the spec, which specs decodes;
// specRulesButNodeName the spec's rules without the node's name, which is
// the pod's own.
var (
	podRulesButSpec      = map[protowire.Number]rule{1: podRules[1], 3: podRules[3]}
	specRulesButNodeName = func() map[protowire.Number]rule {
		r := maps.Clone(specRules)
		delete(r, nodeNameField)
		return r
	}()
)

// specCacheBytes bounds the wire bytes the cache of specs holds as keys:
// thousands of templates. Past it the cache starts again empty.
const specCacheBytes = 1 << 20

// specs holds each pod spec decoded once, by what its wire form keeps
// (specRules) but the node's name: the pods of one template keep the same
// (what differs between them, such as the name of the service account
// token's volume, is dropped), and every event of every one of them
// (created, bound, running, deleted) sends it again. Decoding it was most
// of a pod event's cost. Pods decoded from the same kept bytes share the
// spec's slices, maps and pointers.
var specs = newSpecCache(specCacheBytes)

type specCache struct {
	mu      sync.Mutex
	decoded map[string]*corev1.PodSpec
	// bytes are the keys' bytes, at most limit.
	bytes, limit int
}

func newSpecCache(limit int) *specCache {
	return &specCache{decoded: map[string]*corev1.PodSpec{}, limit: limit}
}

// decode returns the spec whose kept wire form, without its node's name,
// is key: the one decoded before from the same bytes, or decoded now.
func (c *specCache) decode(key []byte) (*corev1.PodSpec, error) {
	c.mu.Lock()
	spec, ok := c.decoded[string(key)]
	c.mu.Unlock()
	if ok {
		return spec, nil
	}
	spec = &corev1.PodSpec{}
	if err := spec.Unmarshal(key); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes+len(key) > c.limit {
		clear(c.decoded)
		c.bytes = 0
	}
	c.decoded[string(key)] = spec
	c.bytes += len(key)
	return spec, nil
}

// decodeSharingSpec decodes a pod whose spec is one field of raw, its
// spec through specs; ok is false, and nothing decoded, for a pod the
// cache cannot take (no spec, a spec in several parts, a node name that is
// not a string), which DecodePod then decodes whole.
func decodeSharingSpec(raw []byte, pod *corev1.Pod) (ok bool, err error) {
	specRaw, ok := onlySpec(raw)
	if !ok {
		return false, nil
	}
	nodeName, ok := nodeNameOf(specRaw)
	if !ok {
		return false, nil
	}
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	key, err := appendKept((*buf)[:0], specRaw, specRulesButNodeName)
	if err != nil {
		return true, fmt.Errorf("spec: %w", err)
	}
	*buf = key
	spec, err := specs.decode(key)
	if err != nil {
		return true, fmt.Errorf("spec: %w", err)
	}
	if err := decodeKept(raw, podRulesButSpec, pod.Unmarshal); err != nil {
		return true, err
	}
	pod.Spec = *spec
	pod.Spec.NodeName = nodeName
	return true, nil
}

// onlySpec is the one spec field of a pod's wire form; ok is false when
// there is none, or more than one, which protobuf merges.
func onlySpec(raw []byte) (spec []byte, ok bool) {
	found := 0
	err := eachField(raw, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if num == podSpecField {
			found++
			spec = value
			if typ != protowire.BytesType {
				found++
			}
		}
		return nil
	})
	return spec, err == nil && found == 1
}

// nodeNameOf is the spec's node name, the last one as protobuf reads it;
// ok is false for one that is not a string, or a spec that does not parse.
func nodeNameOf(spec []byte) (nodeName string, ok bool) {
	ok = true
	err := eachField(spec, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if num == nodeNameField {
			ok = ok && typ == protowire.BytesType
			nodeName = string(value)
		}
		return nil
	})
	return nodeName, ok && err == nil
}

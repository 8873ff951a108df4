package podwire

import (
	"fmt"
	"maps"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod: metadata 1, spec 2; ObjectMeta: labels 11, ownerReferences 13;
// PodSpec: nodeName 10.
const (
	podMetaField  protowire.Number = 1
	podSpecField  protowire.Number = 2
	nodeNameField protowire.Number = 10
)

var (
	// sharedMetaRules are the parts of a pod's metadata its template
	// gives every pod of it: its labels and owners.
	sharedMetaRules = map[protowire.Number]rule{11: keep, 13: keep}
	// podRulesButParts are podRules without what parts decode: the spec,
	// and the labels and owners of the metadata.
	podRulesButParts = map[protowire.Number]rule{
		podMetaField: {nested: without(metaRules, sharedMetaRules)},
		3:            podRules[3],
	}
	// specRulesButNodeName are the spec's rules without the node's name,
	// which is the pod's own.
	specRulesButNodeName = without(specRules, map[protowire.Number]rule{nodeNameField: keep})
)

// without is rules without the fields of drop.
func without(rules, drop map[protowire.Number]rule) map[protowire.Number]rule {
	r := maps.Clone(rules)
	for num := range drop {
		delete(r, num)
	}
	return r
}

// partCacheBytes bounds the wire bytes each cache of parts holds as keys:
// thousands of templates. Past it the cache starts again empty.
const partCacheBytes = 1 << 20

// The parts of a pod its template gives every pod of it, each decoded
// once for every pod that sends the same wire form of it: the spec, by
// what its wire form keeps (specRules) but the node's name, and the
// labels and owners of the metadata. What differs between the pods of a
// template (the name of the service account token's volume, the
// environment) is dropped, and every event of every one of them
// (created, bound, running) sends the parts again; decoding the spec was
// most of a pod event's cost, and the labels and owners most of what was
// left. Pods decoded from the same bytes share the part's slices, maps
// and pointers.
var (
	specs = newPartCache(partCacheBytes, func(raw []byte) (*corev1.PodSpec, error) {
		spec := &corev1.PodSpec{}
		return spec, spec.Unmarshal(raw)
	})
	metas = newPartCache(partCacheBytes, func(raw []byte) (*metav1.ObjectMeta, error) {
		meta := &metav1.ObjectMeta{}
		return meta, meta.Unmarshal(raw)
	})
)

// partCache holds parts decoded by their wire form.
type partCache[T any] struct {
	mu      sync.Mutex
	decoded map[string]T
	// bytes are the keys' bytes, at most limit.
	bytes, limit int
	unmarshal    func([]byte) (T, error)
}

func newPartCache[T any](limit int, unmarshal func([]byte) (T, error)) *partCache[T] {
	return &partCache[T]{decoded: map[string]T{}, limit: limit, unmarshal: unmarshal}
}

// decode returns the part whose wire form is key: the one decoded before
// from the same bytes, or decoded now.
func (c *partCache[T]) decode(key []byte) (T, error) {
	c.mu.Lock()
	part, ok := c.decoded[string(key)]
	c.mu.Unlock()
	if ok {
		return part, nil
	}
	part, err := c.unmarshal(key)
	if err != nil {
		return part, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes+len(key) > c.limit {
		clear(c.decoded)
		c.bytes = 0
	}
	c.decoded[string(key)] = part
	c.bytes += len(key)
	return part, nil
}

// decodeKeptPart decodes what rules keep of raw through cache.
func decodeKeptPart[T any](cache *partCache[T], raw []byte, rules map[protowire.Number]rule) (T, error) {
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	key, err := appendKept((*buf)[:0], raw, rules)
	*buf = key
	if err != nil {
		var none T
		return none, err
	}
	return cache.decode(key)
}

// decodeSharingParts decodes a pod whose metadata and spec are one field
// each of raw, its spec and its labels and owners through their caches;
// ok is false, and nothing decoded, for a pod the caches cannot take (no
// spec or metadata, either in several parts, a node name that is not a
// string), which DecodePod then decodes whole.
func decodeSharingParts(raw []byte, pod *corev1.Pod) (ok bool, err error) {
	metaRaw, ok := onlyField(raw, podMetaField)
	if !ok {
		return false, nil
	}
	specRaw, ok := onlyField(raw, podSpecField)
	if !ok {
		return false, nil
	}
	nodeName, ok := nodeNameOf(specRaw)
	if !ok {
		return false, nil
	}
	spec, err := decodeKeptPart(specs, specRaw, specRulesButNodeName)
	if err != nil {
		return true, fmt.Errorf("spec: %w", err)
	}
	meta, err := decodeKeptPart(metas, metaRaw, sharedMetaRules)
	if err != nil {
		return true, fmt.Errorf("metadata: %w", err)
	}
	if err := decodeKept(raw, podRulesButParts, pod.Unmarshal); err != nil {
		return true, err
	}
	pod.Spec = *spec
	pod.Spec.NodeName = nodeName
	pod.Labels, pod.OwnerReferences = meta.Labels, meta.OwnerReferences
	return true, nil
}

// onlyField is the one field num of a message, a message itself; ok is
// false when there is none, or more than one, which protobuf merges.
func onlyField(raw []byte, num protowire.Number) (field []byte, ok bool) {
	found := 0
	err := eachField(raw, func(n protowire.Number, typ protowire.Type, _, value []byte) error {
		if n == num {
			found++
			field = value
			if typ != protowire.BytesType {
				found++
			}
		}
		return nil
	})
	return field, err == nil && found == 1
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

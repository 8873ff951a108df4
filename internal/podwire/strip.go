// Package podwire decodes pods and nodes from their protobuf wire form
// keeping only what placement-guard reads. A pod's environment, probes,
// images, managedFields and most of its status, and a node's managed
// fields, images, addresses and versions, are skipped on the wire, before
// anything is allocated for them, so that watching every pod and node of
// a large cluster costs the decoding of what placement.TrimPod and
// TrimNode keep and little more. The objects of a watch stream are
// decoded from the frame they arrive in, without a copy (watchEvents).
// It decodes only: it holds no pod and knows nothing of the engine's index.
//
// The fields kept here are the fields TrimPod reads, by their numbers in
// k8s.io/api's generated.proto. TestStrippedPodsTrimAsFullOnes holds the
// two in step: for pods with every field filled at random, TrimPod of the
// stripped decode must equal TrimPod of the full one.
package podwire

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errMalformed is returned for bytes that are not a protobuf message.
var errMalformed = errors.New("malformed protobuf")

// rule says what becomes of one field of a message on the wire.
type rule struct {
	// nested, when set, filters the field's message with its own rules.
	nested map[protowire.Number]rule
	// keepIf, when set, decides from the field's bytes whether it is kept
	// (filtered by nested, when that is set too).
	keepIf func(value []byte) (bool, error)
}

// keep keeps a field as it is.
var keep = rule{}

// Field numbers of k8s.io/api/core/v1 and k8s.io/apimachinery's meta/v1,
// as in their generated.proto. Fields not named in a message's rules are
// dropped.
var (
	// Pod: metadata 1, spec 2, status 3.
	podRules = map[protowire.Number]rule{
		1: {nested: metaRules},
		2: {nested: specRules},
		3: {nested: statusRules},
	}
	// ObjectMeta: name 1, namespace 3, uid 5, resourceVersion 6,
	// generation 7, creationTimestamp 8, deletionTimestamp 9, labels 11,
	// annotations 12 (those in keptAnnotations), ownerReferences 13.
	metaRules = map[protowire.Number]rule{
		1: keep, 3: keep, 5: keep, 6: keep, 7: keep, 8: keep, 9: keep, 11: keep, 13: keep,
		12: {keepIf: isKeptAnnotation},
	}
	// PodSpec: volumes 1, containers 2, nodeSelector 7, nodeName 10,
	// affinity 18, initContainers 20, tolerations 22, priority 25,
	// overhead 32, topologySpreadConstraints 33, schedulingGates 38,
	// resources 40.
	specRules = map[protowire.Number]rule{
		1: {keepIf: mayPinPod},
		2: {nested: containerRules}, 20: {nested: containerRules},
		7: keep, 10: keep, 18: keep, 22: keep, 25: keep, 32: keep, 33: keep, 38: keep, 40: keep,
	}
	// Container: name 1, ports 6, resources 8 (requests 2 of them),
	// restartPolicy 24.
	containerRules = map[protowire.Number]rule{
		1: keep, 6: keep, 24: keep,
		8: {nested: requestsRules},
	}
	// ResourceRequirements: requests 2.
	requestsRules = map[protowire.Number]rule{2: keep}
	// PodStatus: phase 1, conditions 2, containerStatuses 8,
	// initContainerStatuses 10.
	statusRules = map[protowire.Number]rule{
		1: keep, 2: keep,
		8: {nested: containerStatusRules}, 10: {nested: containerStatusRules},
	}
	// ContainerStatus: name 1, ready 4, restartCount 5,
	// allocatedResources 10, resources 11 (requests 2 of them).
	containerStatusRules = map[protowire.Number]rule{
		1: keep, 4: keep, 5: keep, 10: keep,
		11: {nested: requestsRules},
	}
)

// What a pod's deletion reads: the engine forgets the pod by its uid, and
// tells those who watch its namespace and labels.
var (
	// The envelope, a runtime.Unknown: typeMeta 1, raw 2 (the pod),
	// contentEncoding 3, contentType 4.
	deletedPodEnvelopeRules = map[protowire.Number]rule{1: keep, 2: {nested: deletedPodRules}, 3: keep, 4: keep}
	// Pod: metadata 1.
	deletedPodRules = map[protowire.Number]rule{1: {nested: deletedMetaRules}}
	// ObjectMeta: name 1, namespace 3, uid 5, resourceVersion 6, labels 11.
	deletedMetaRules = map[protowire.Number]rule{1: keep, 3: keep, 5: keep, 6: keep, 11: keep}
)

// Volume: name 1, volumeSource 2. VolumeSource: emptyDir 2, secret 6,
// downwardAPI 16, configMap 19, projected 26 are what most volumes are, and
// none of them can pin a pod to a node or count against a node's volume
// limits. A volume is dropped when it has no other source; any other
// source, including one added to the API later, keeps it whole. So is an
// emptyDir on the node's disk (EmptyDirVolumeSource: medium 1, anything
// but "Memory"): data a move would lose (placement.LocalData).
var nodeFreeSources = map[protowire.Number]bool{2: true, 6: true, 16: true, 19: true, 26: true}

const emptyDirSource = 2

// mayPinPod reports whether a Volume has a source other than the
// node-free ones, or keeps data on the node's disk.
func mayPinPod(volume []byte) (bool, error) {
	keep := false
	err := eachField(volume, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if num != 2 || typ != protowire.BytesType {
			return nil
		}
		return eachField(value, func(src protowire.Number, _ protowire.Type, _, source []byte) error {
			switch {
			case !nodeFreeSources[src]:
				keep = true
			case src == emptyDirSource:
				onDisk, err := emptyDirOnDisk(source)
				keep = keep || onDisk
				return err
			}
			return nil
		})
	})
	return keep, err
}

// emptyDirOnDisk reports an EmptyDirVolumeSource whose medium is not
// memory.
func emptyDirOnDisk(source []byte) (bool, error) {
	medium := ""
	err := eachField(source, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if num == 1 && typ == protowire.BytesType {
			medium = string(value)
		}
		return nil
	})
	return medium != string(corev1.StorageMediumMemory), err
}

// keptAnnotations are the annotations read of a pod: those the engine
// reads (placement.KeptAnnotations: the deletion cost, its mark, and those
// that keep a pod from being moved), and the mark on the bookmark that
// ends the first events of a streamed list, by the reflector. The engine's
// list is spelt here because the engine's tests decode pods with this
// package; a test holds the two equal.
var keptAnnotations = map[string]bool{
	corev1.PodDeletionCost:                               true,
	"placementguard.io/deletion-cost":                    true,
	"cluster-autoscaler.kubernetes.io/safe-to-evict":     true,
	"karpenter.sh/do-not-disrupt":                        true,
	"descheduler.alpha.kubernetes.io/prefer-no-eviction": true,
	metav1.InitialEventsAnnotationKey:                    true,
}

// isKeptAnnotation reports whether an annotations entry (key 1, value 2)
// is one of keptAnnotations.
func isKeptAnnotation(entry []byte) (bool, error) {
	found := false
	err := eachField(entry, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if num == 1 && typ == protowire.BytesType {
			// A map entry may repeat its key; the last one counts.
			found = keptAnnotations[string(value)]
		}
		return nil
	})
	return found, err
}

// eachField calls fn with each field of the message b: its number, wire
// type, whole encoding (tag included) and, for a length-delimited field,
// its bytes.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, field, value []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return errMalformed
		}
		field := b[:n+m]
		var value []byte
		if typ == protowire.BytesType {
			value, _ = protowire.ConsumeBytes(b[n:])
		}
		if err := fn(num, typ, field, value); err != nil {
			return err
		}
		b = b[n+m:]
	}
	return nil
}

// appendKept appends to dst the fields of the message src that rules keep,
// filtering nested messages by their own rules.
func appendKept(dst, src []byte, rules map[protowire.Number]rule) ([]byte, error) {
	err := eachField(src, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		r, ok := rules[num]
		switch {
		case !ok:
			return nil
		case (r.nested != nil || r.keepIf != nil) && typ != protowire.BytesType:
			return fmt.Errorf("field %d: wire type %d where a message belongs: %w", num, typ, errMalformed)
		case r.keepIf != nil:
			kept, err := r.keepIf(value)
			switch {
			case err != nil || !kept:
				return err
			case r.nested != nil:
				dst, err = appendNested(dst, num, value, r.nested)
				return err
			default:
				dst = append(dst, field...)
				return nil
			}
		case r.nested != nil:
			var err error
			dst, err = appendNested(dst, num, value, r.nested)
			return err
		default:
			dst = append(dst, field...)
			return nil
		}
	})
	return dst, err
}

// appendNested appends field num holding the message src filtered by
// rules. The message is filtered in place at the end of dst, then moved
// behind its length once that is known.
func appendNested(dst []byte, num protowire.Number, src []byte, rules map[protowire.Number]rule) ([]byte, error) {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	start := len(dst)
	dst, err := appendKept(dst, src, rules)
	if err != nil {
		return dst, err
	}
	size := len(dst) - start
	prefix := protowire.SizeVarint(uint64(size))
	dst = append(dst, make([]byte, prefix)...)
	copy(dst[start+prefix:], dst[start:start+size])
	protowire.AppendVarint(dst[start:start], uint64(size))
	return dst, nil
}

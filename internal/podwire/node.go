package podwire

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a node keeps on the wire: every field but its managed fields, and
// of its status what the engine reads (TrimNode). A thousand nodes send
// a heartbeat every few dozen seconds each; their conditions, addresses,
// versions and managed fields are much of each heartbeat's bytes.
var (
	// Node: metadata 1, spec 2, status 3.
	nodeRules = map[protowire.Number]rule{
		1: {nested: nodeMetaRules},
		2: keep,
		3: {nested: nodeStatusRules},
	}
	// ObjectMeta: every field up to finalizers 14; managedFields 17 are
	// dropped.
	nodeMetaRules = map[protowire.Number]rule{
		1: keep, 2: keep, 3: keep, 4: keep, 5: keep, 6: keep, 7: keep,
		8: keep, 9: keep, 10: keep, 11: keep, 12: keep, 13: keep, 14: keep,
	}
	// NodeStatus: allocatable 2, of conditions 4 the Ready one, and the
	// images 8 (ImageLocality scores a node by the pod's images it
	// holds).
	nodeStatusRules = map[protowire.Number]rule{2: keep, 4: {keepIf: isReadyCondition, nested: readyConditionRules}, 8: keep}
	// NodeCondition: type 1, status 2, lastTransitionTime 4, reason 5,
	// message 6; not lastHeartbeatTime 3, which every heartbeat changes
	// and nothing reads.
	readyConditionRules = map[protowire.Number]rule{1: keep, 2: keep, 4: keep, 5: keep, 6: keep}
)

// isReadyCondition reports whether a NodeCondition's type (1) is Ready.
func isReadyCondition(condition []byte) (bool, error) {
	ready := false
	err := eachField(condition, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if num == 1 && typ == protowire.BytesType {
			ready = string(value) == string(corev1.NodeReady)
		}
		return nil
	})
	return ready, err
}

// TrimNode drops of a node what the engine never reads: its managed
// fields, and of its status all but its allocatable resources, its Ready
// condition without its heartbeat's time, and its images. DecodeNode
// keeps exactly what TrimNode keeps.
func TrimNode(n *corev1.Node) {
	n.ManagedFields = nil
	// In place, writing nothing to a node trimmed already: the feed trims
	// every heartbeat, decoded stripped, sharing the slices of the node
	// before it (decodeRepeatedNode).
	ready := slices.DeleteFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type != corev1.NodeReady })
	if len(ready) == 0 {
		ready = nil
	}
	for i := range ready {
		if !ready[i].LastHeartbeatTime.IsZero() {
			ready[i].LastHeartbeatTime = metav1.Time{}
		}
	}
	n.Status = corev1.NodeStatus{Allocatable: n.Status.Allocatable, Conditions: ready, Images: n.Status.Images}
}

// DecodeNode decodes the protobuf of a Node into node, skipping on the
// wire what TrimNode drops. A node whose wire form repeats the last one
// of its name but for its resourceVersion (a heartbeat) is that node with
// the new version, sharing its maps and slices, which must not be changed.
func DecodeNode(raw []byte, node *corev1.Node) error {
	*node = corev1.Node{}
	decoded, err := decodeRepeatedNode(raw, node)
	if !decoded {
		err = decodeKept(raw, nodeRules, node.Unmarshal)
	}
	if err != nil {
		return fmt.Errorf("decode node: %w", err)
	}
	return nil
}

// DecodeNodeList decodes the protobuf of a NodeList into list, each node
// as DecodeNode does.
func DecodeNodeList(raw []byte, list *corev1.NodeList) error {
	*list = corev1.NodeList{}
	err := eachItem(raw, &list.ListMeta, func(item []byte) error {
		list.Items = append(list.Items, corev1.Node{})
		return DecodeNode(item, &list.Items[len(list.Items)-1])
	})
	if err != nil {
		return fmt.Errorf("decode node list: %w", err)
	}
	return nil
}

package podwire

import (
	"hash/maphash"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
)

// A node's heartbeat repeats the node: every few dozen seconds each node
// posts its status again, and of what the engine keeps only the
// resourceVersion differs from the node's last event (the heartbeat's
// time is not kept: readyConditionRules). Decoding it again would allocate
// its labels, allocatable resources and images anew for every heartbeat
// of every node; it is read instead as the node last decoded under its
// name, with its new resourceVersion.
//
// A node is recognised by a 128-bit fingerprint of what its wire form
// keeps but its resourceVersion, so the node given back is the one a
// decoding of the same bytes made: the memory holds no state of its own
// that could go stale, only what was decoded from those bytes before.

// Node: metadata 1; ObjectMeta: name 1, resourceVersion 6.
const (
	nodeMetaField    protowire.Number = 1
	metaNameField    protowire.Number = 1
	metaVersionField protowire.Number = 6
)

// nodeRulesButVersion are nodeRules without the resourceVersion, which a
// heartbeat changes and the fingerprint leaves out.
var nodeRulesButVersion = map[protowire.Number]rule{
	nodeMetaField: {nested: without(nodeMetaRules, map[protowire.Number]rule{metaVersionField: keep})},
	2:             nodeRules[2],
	3:             nodeRules[3],
}

// maxRememberedNodes bounds the nodes remembered, past any cluster's
// size; past it the memory starts again empty. The node feed forgets a
// deleted node (ForgetNode), so the bound matters only for nodes whose
// deletion was never seen.
const maxRememberedNodes = 1 << 14

type fingerprint [2]uint64

// lastNodes remembers the last node decoded under each name.
type lastNodes struct {
	mu     sync.Mutex
	seeds  [2]maphash.Seed
	byName map[string]rememberedNode
}

type rememberedNode struct {
	sum  fingerprint
	node *corev1.Node
}

var heartbeats = &lastNodes{
	seeds:  [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
	byName: map[string]rememberedNode{},
}

func (l *lastNodes) fingerprint(stripped []byte) fingerprint {
	return fingerprint{maphash.Bytes(l.seeds[0], stripped), maphash.Bytes(l.seeds[1], stripped)}
}

// repeated is the node last decoded under name when it had the same
// fingerprint, and is still that node (its holder never renamed it).
func (l *lastNodes) repeated(name []byte, sum fingerprint) (*corev1.Node, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.byName[string(name)]
	if !ok || last.sum != sum || last.node.Name != string(name) {
		return nil, false
	}
	return last.node, true
}

// remember keeps node as the last one decoded under its name.
func (l *lastNodes) remember(sum fingerprint, node *corev1.Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, known := l.byName[node.Name]; !known && len(l.byName) >= maxRememberedNodes {
		clear(l.byName)
	}
	l.byName[node.Name] = rememberedNode{sum: sum, node: node}
}

func (l *lastNodes) forget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byName, name)
}

// ForgetNode drops what is remembered of a node that was deleted.
func ForgetNode(name string) { heartbeats.forget(name) }

// decodeRepeatedNode decodes a node through the memory of the last node
// of each name; ok is false, and nothing decoded, for a node whose
// metadata is not one field holding a name, which DecodeNode then
// decodes whole. The node given back for a heartbeat shares the maps and
// slices of the one before it, which must not be changed.
func decodeRepeatedNode(raw []byte, node *corev1.Node) (ok bool, err error) {
	metaRaw, ok := onlyField(raw, nodeMetaField)
	if !ok {
		return false, nil
	}
	name, version, ok := nameAndVersion(metaRaw)
	if !ok {
		return false, nil
	}
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	stripped, err := appendKept((*buf)[:0], raw, nodeRulesButVersion)
	*buf = stripped
	if err != nil {
		return true, err
	}
	sum := heartbeats.fingerprint(stripped)
	if last, ok := heartbeats.repeated(name, sum); ok {
		*node = *last
	} else if err := node.Unmarshal(stripped); err != nil {
		return true, err
	}
	node.ResourceVersion = string(version)
	heartbeats.remember(sum, node)
	return true, nil
}

// nameAndVersion are the name and resourceVersion of an ObjectMeta, the
// last of each as protobuf reads them; ok is false when either is not a
// string, or there is no name.
func nameAndVersion(meta []byte) (name, version []byte, ok bool) {
	ok = true
	err := eachField(meta, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		switch num {
		case metaNameField:
			ok = ok && typ == protowire.BytesType
			name = value
		case metaVersionField:
			ok = ok && typ == protowire.BytesType
			version = value
		}
		return nil
	})
	return name, version, ok && err == nil && len(name) > 0
}

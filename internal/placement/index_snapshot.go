package placement

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
)

// nodeID and podID index the snapshot's slices; -1 means none.
type (
	nodeID int32
	podID  int32
)

const noNode nodeID = -1

// Snapshot is the cluster as the engine sees it, indexed so that each
// question is cheap: nodes with the resources their pods request, pods with
// a label index per namespace, and the storage objects that pin pods.
//
// A Snapshot is not safe for concurrent use: questions fill caches of node
// order and topology domains that node events drop. Callers serialise
// access (the operator holds a mutex around event handling and questions).
type Snapshot struct {
	nodes      []*nodeInfo
	nodeByName map[string]nodeID
	freeNodes  []nodeID

	pods     []*podInfo
	podByUID map[types.UID]podID
	freePods []podID

	// labels indexes the live pods by namespace and label.
	labels labelIndex
	// withAntiAffinity holds the pods that carry required anti-affinity
	// terms: the scheduler checks every incoming pod against them.
	withAntiAffinity map[podID]struct{}
	// withScoringTerms holds the pods whose terms weigh in InterPodAffinity's
	// score of an incoming pod.
	withScoringTerms map[podID]struct{}
	// unboundByNode holds the pods bound to a node the snapshot has not
	// seen yet (events arrive in any order); they bind when it arrives.
	unboundByNode map[string]map[podID]struct{}

	// order and topologies cache the live nodes in name order and their
	// interned topology domains; any node change drops them.
	order []nodeID
	// positions maps a nodeID to its place in order, -1 for none.
	positions []int32
	// filters are templates' node filters over order, by what they read
	// of the template.
	filters map[string]*nodeFilters
	// existingAnti are existing pods' anti-affinity counts per incoming
	// labels; nil once a pod with required anti-affinity terms is bound
	// or removed, or a node changes. Only such pods are counted: any
	// other pod event leaves the counts as they are.
	existingAnti map[string]existingAntiCounts
	// spares are count arrays simulations gave back, by length (index_spares.go).
	spares     spares
	topologies map[string]*topology
	// loadMemos are nodes' resource scores per pod shape
	// (index_loadmemo.go); a node's are forgotten when its pods or its
	// allocatable change, all of them when the nodes do.
	loadMemos []*loadMemo
	// preferNoSchedule is whether a live node carries a PreferNoSchedule
	// taint, nil until asked and once a node's taints change.
	preferNoSchedule *bool

	namespaces     map[string]*corev1.Namespace
	claims         map[types.NamespacedName]*corev1.PersistentVolumeClaim
	volumes        map[string]*corev1.PersistentVolume
	storageClasses map[string]*storagev1.StorageClass
	// csiNodes and attachments are what NodeVolumeLimits reads: each node's
	// per-driver volume limits and the volumes attached to it.
	csiNodes    map[string]*storagev1.CSINode
	attachments attachmentIndex
	// csiDrivers and capacities are what VolumeBinding's storage capacity
	// check reads: the drivers that opt into it, and the capacity each
	// reports per class and topology.
	csiDrivers map[string]*storagev1.CSIDriver
	capacities map[types.NamespacedName]*storagev1.CSIStorageCapacity

	// now is when the ReplicaSet controller is taken to look (SetNow).
	now time.Time
	// omitTies leaves the steps of a simulated rollout without the nodes
	// tied with their choice (OmitTies).
	omitTies bool

	// trimmer makes the pods' records, one copy of what pods of one
	// template share; byController indexes them by their controller's UID.
	trimmer      *PodTrimmer
	byController map[types.UID]map[podID]struct{}

	// owners are the selectors the system default spread reads.
	owners owners
	// profiles are the scheduler profiles the engine predicts with, each
	// pod with the one it names.
	profiles *Profiles
	// images are the nodes' images as ImageLocality reads them; nil once
	// the nodes or their images change.
	images *imageIndex
	// done is the context of the question being asked, which stops it
	// when closed (Within); nil outside Within.
	done <-chan struct{}
}

// nodeInfo is one node and what its pods request.
type nodeInfo struct {
	node        *corev1.Node
	allocatable resources
	allowedPods int64
	requested   resources
	// nonZeroCPU and nonZeroMemory sum its pods' non-zero requests, what
	// the scheduler's scoring counts as requested.
	nonZeroCPU, nonZeroMemory int64
	pods                      map[podID]struct{}
	// podCount is len(pods), kept in the record: a sweep over every node
	// (capacity, fit) then reads one record per node, not its map as well,
	// which at thousands of nodes is the sweep's cost.
	podCount int64
}

// Objects are the inputs of a snapshot.
type Objects struct {
	Nodes          []*corev1.Node
	Pods           []*corev1.Pod
	Namespaces     []*corev1.Namespace
	Claims         []*corev1.PersistentVolumeClaim
	Volumes        []*corev1.PersistentVolume
	StorageClasses []*storagev1.StorageClass
	CSINodes       []*storagev1.CSINode
	Attachments    []*storagev1.VolumeAttachment
	CSIDrivers     []*storagev1.CSIDriver
	Capacities     []*storagev1.CSIStorageCapacity
	// Services, ReplicaSets, StatefulSets and ReplicationControllers are
	// what PodTopologySpread's system default constraints spread a pod by.
	Services               []*corev1.Service
	ReplicaSets            []*appsv1.ReplicaSet
	StatefulSets           []*appsv1.StatefulSet
	ReplicationControllers []*corev1.ReplicationController
}

// NewSnapshot indexes the objects. The objects are referenced, not copied:
// the caller must not mutate them afterwards (an informer cache's objects
// are never mutated, they are replaced).
func NewSnapshot(objs Objects) (*Snapshot, error) {
	s := &Snapshot{
		nodes:            make([]*nodeInfo, 0, len(objs.Nodes)),
		nodeByName:       make(map[string]nodeID, len(objs.Nodes)),
		pods:             make([]*podInfo, 0, len(objs.Pods)),
		podByUID:         make(map[types.UID]podID, len(objs.Pods)),
		labels:           newLabelIndex(),
		withAntiAffinity: map[podID]struct{}{},
		withScoringTerms: map[podID]struct{}{},
		unboundByNode:    map[string]map[podID]struct{}{},
		namespaces:       make(map[string]*corev1.Namespace, len(objs.Namespaces)),
		claims:           make(map[types.NamespacedName]*corev1.PersistentVolumeClaim, len(objs.Claims)),
		volumes:          make(map[string]*corev1.PersistentVolume, len(objs.Volumes)),
		storageClasses:   make(map[string]*storagev1.StorageClass, len(objs.StorageClasses)),
		csiNodes:         make(map[string]*storagev1.CSINode, len(objs.CSINodes)),
		attachments:      newAttachmentIndex(),
		csiDrivers:       make(map[string]*storagev1.CSIDriver, len(objs.CSIDrivers)),
		capacities:       make(map[types.NamespacedName]*storagev1.CSIStorageCapacity, len(objs.Capacities)),
		trimmer:          NewPodTrimmer(DefaultSharedParts),
		byController:     map[types.UID]map[podID]struct{}{},
		owners:           newOwners(),
		profiles:         DefaultProfiles(),
	}
	// In ObjectKinds' order: a pod is indexed on its node.
	for _, k := range ObjectKinds {
		if err := k.upsertAll(s, &objs); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// NodeCount is the number of nodes in the snapshot.
func (s *Snapshot) NodeCount() int { return len(s.nodeByName) }

// PodCount is the number of pods in the snapshot.
func (s *Snapshot) PodCount() int { return len(s.podByUID) }

// UpsertPod adds a pod or replaces it. Pods that have finished (Succeeded or
// Failed) hold no resources and are removed, as the scheduler ignores them;
// so are placeholder pods, which hold capacity only until a real pod
// preempts them.
func (s *Snapshot) UpsertPod(p *corev1.Pod) error {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || IsPlaceholder(p) {
		s.DeletePod(p.UID)
		return nil
	}
	pi, err := s.trimmer.record(p)
	if err != nil {
		return fmt.Errorf("index pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	s.upsertRecord(pi)
	return nil
}

// upsertRecord adds a pod's record or replaces the record of the same UID.
func (s *Snapshot) upsertRecord(pi *podInfo) {
	pi.node = noNode
	if old, ok := s.podByUID[pi.uid]; ok {
		if s.replaceInPlace(old, pi) {
			return
		}
		s.removePod(old)
		s.pods[old] = pi
		s.addPod(old)
		return
	}
	id := store(&s.pods, &s.freePods, pi)
	s.podByUID[pi.uid] = id
	s.addPod(id)
}

// DeletePod removes a pod.
func (s *Snapshot) DeletePod(uid types.UID) {
	id, ok := s.podByUID[uid]
	if !ok {
		return
	}
	s.removePod(id)
	s.pods[id] = nil
	delete(s.podByUID, uid)
	s.freePods = append(s.freePods, id)
}

// store puts v in a free slot of items, or a new one, and returns its index.
// Slots of deleted items are reused so that ids stay small and slices dense.
func store[T any, ID ~int32](items *[]T, free *[]ID, v T) ID {
	if k := len(*free); k > 0 {
		id := (*free)[k-1]
		*free = (*free)[:k-1]
		(*items)[id] = v
		return id
	}
	*items = append(*items, v)
	return ID(len(*items) - 1)
}

func (s *Snapshot) addPod(id podID) {
	pi := s.pods[id]
	s.labels.add(pi.namespace(), pi.labels(), id)
	if owner := controllerOf(pi.common()); owner != "" {
		addTo(s.byController, owner, id)
	}
	if len(pi.antiTerms()) > 0 {
		s.withAntiAffinity[id] = struct{}{}
	}
	if pi.scoring() != nil {
		s.withScoringTerms[id] = struct{}{}
	}
	if name := pi.nodeName; name != "" {
		if nid, ok := s.nodeByName[name]; ok {
			// One copy of the node's name, not one per pod.
			pi.nodeName = s.nodes[nid].node.Name
			s.bind(id, nid)
		} else {
			addTo(s.unboundByNode, name, id)
		}
	}
}

func (s *Snapshot) bind(id podID, nid nodeID) {
	pi, ni := s.pods[id], s.nodes[nid]
	pi.node = nid
	ni.pods[id] = struct{}{}
	ni.podCount = int64(len(ni.pods))
	ni.requested.add(pi.requests)
	ni.nonZeroCPU += pi.nonZeroCPU
	ni.nonZeroMemory += pi.nonZeroMemory
	s.forgetAntiCountsOf(pi)
	s.forgetLoad(nid)
}

// forgetAntiCountsOf drops the kept anti-affinity counts when pi is
// counted in them: a pod with required anti-affinity terms.
func (s *Snapshot) forgetAntiCountsOf(pi *podInfo) {
	if len(pi.antiTerms()) > 0 {
		s.existingAnti = nil
	}
}

func (s *Snapshot) removePod(id podID) {
	pi := s.pods[id]
	s.labels.remove(pi.namespace(), pi.labels(), id)
	if owner := controllerOf(pi.common()); owner != "" {
		removeFrom(s.byController, owner, id)
	}
	delete(s.withAntiAffinity, id)
	delete(s.withScoringTerms, id)
	if name := pi.nodeName; name != "" {
		removeFrom(s.unboundByNode, name, id)
	}
	if pi.node != noNode {
		ni := s.nodes[pi.node]
		delete(ni.pods, id)
		ni.podCount = int64(len(ni.pods))
		ni.requested.sub(pi.requests)
		ni.nonZeroCPU -= pi.nonZeroCPU
		ni.nonZeroMemory -= pi.nonZeroMemory
		s.forgetAntiCountsOf(pi)
		s.forgetLoad(pi.node)
		pi.node = noNode
	}
}

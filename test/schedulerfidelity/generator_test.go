package schedulerfidelity

import (
	"fmt"
	"math/rand/v2"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// scenario is one small cluster and the pod to place in it.
type scenario struct {
	seed           uint64
	namespaces     []*corev1.Namespace
	nodes          []*corev1.Node
	existing       []*corev1.Pod
	pending        *corev1.Pod
	claims         []*corev1.PersistentVolumeClaim
	volumes        []*corev1.PersistentVolume
	storageClasses []*storagev1.StorageClass
	csiNodes       []*storagev1.CSINode
	attachments    []*storagev1.VolumeAttachment
	csiDrivers     []*storagev1.CSIDriver
	capacities     []*storagev1.CSIStorageCapacity
	// services, replicaSets and statefulSets are what the system default
	// spread reads (scoring scenarios only).
	services     []*corev1.Service
	replicaSets  []*appsv1.ReplicaSet
	statefulSets []*appsv1.StatefulSet
}

// apiObjects are what the scheduler's plugins read through informers.
func (sc *scenario) apiObjects() []runtime.Object {
	var out []runtime.Object
	for _, o := range sc.namespaces {
		out = append(out, o)
	}
	for _, o := range sc.claims {
		out = append(out, o)
	}
	for _, o := range sc.volumes {
		out = append(out, o)
	}
	for _, o := range sc.storageClasses {
		out = append(out, o)
	}
	for _, o := range sc.csiNodes {
		out = append(out, o)
	}
	for _, o := range sc.attachments {
		out = append(out, o)
	}
	for _, o := range sc.csiDrivers {
		out = append(out, o)
	}
	for _, o := range sc.capacities {
		out = append(out, o)
	}
	for _, o := range sc.services {
		out = append(out, o)
	}
	for _, o := range sc.replicaSets {
		out = append(out, o)
	}
	for _, o := range sc.statefulSets {
		out = append(out, o)
	}
	return out
}

// snapshot is the engine's index of the scenario, every object in it.
func (sc *scenario) snapshot() (*placement.Snapshot, error) {
	return placement.NewSnapshot(placement.Objects{
		Nodes: sc.nodes, Pods: sc.existing, Namespaces: sc.namespaces,
		Claims: sc.claims, Volumes: sc.volumes, StorageClasses: sc.storageClasses,
		CSINodes: sc.csiNodes, Attachments: sc.attachments, CSIDrivers: sc.csiDrivers, Capacities: sc.capacities,
		Services: sc.services, ReplicaSets: sc.replicaSets, StatefulSets: sc.statefulSets,
	})
}

// boundPods are the existing pods, all bound to a node.
func (sc *scenario) boundPods() []*corev1.Pod { return sc.existing }

const (
	legacyZone   = "failure-domain.beta.kubernetes.io/zone"
	legacyRegion = "failure-domain.beta.kubernetes.io/region"
	// The classes a claim may name.
	classLocal     = "local"    // kubernetes.io/no-provisioner, WaitForFirstConsumer
	classZonal     = "zonal"    // a provisioner limited to zones a and b, WaitForFirstConsumer
	classImmediate = "standard" // a provisioner, Immediate
	// The CSI drivers whose volumes nodes limit.
	csiDriver = "csi.example.com"
	ebsDriver = "ebs.csi.aws.com"
)

var (
	zones = []string{"zone-a", "zone-b", "zone-c"}
	apps  = []string{"web", "db", "cache"}
	keys  = []string{corev1.LabelHostname, corev1.LabelTopologyZone}
)

// gen draws one scenario's parts from its seed.
type gen struct {
	r  *rand.Rand
	sc *scenario
}

// generate makes a scenario from a seed: 2 to 8 nodes over up to three
// zones (some cordoned, tainted, small, without a zone, or labelled the
// legacy way too); up to 12 pods bound to them, some with required
// anti-affinity, spreads, host ports, claims, a resize in flight or a
// deletion under way; and one pending pod with any mix of the rules the
// scheduler's default filters apply.
func generate(seed uint64) *scenario {
	g := &gen{r: rand.New(rand.NewPCG(seed, 1337)), sc: &scenario{seed: seed}}
	r := g.r
	g.sc.namespaces = []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "ns-a", Labels: map[string]string{"tier": "front"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ns-b", Labels: map[string]string{"tier": "back"}}},
	}
	g.storage()
	for i := range 2 + r.IntN(7) {
		g.sc.nodes = append(g.sc.nodes, g.node(i))
	}
	for i := range r.IntN(13) {
		p := g.pod(fmt.Sprintf("existing-%d", i), true)
		p.Spec.NodeName = g.sc.nodes[r.IntN(len(g.sc.nodes))].Name
		p.Status.Phase = corev1.PodRunning
		if r.IntN(10) == 0 {
			// Bound but not started yet: it holds its node's room all the same.
			p.Status.Phase = corev1.PodPending
		}
		if r.IntN(12) == 0 {
			p.DeletionTimestamp = ptr.To(metav1.Now())
		}
		g.sc.existing = append(g.sc.existing, p)
	}
	g.sc.pending = g.pod("pending", false)
	g.volumeAttachments()
	g.storageCapacity(seed)
	for _, p := range append(g.sc.existing, g.sc.pending) {
		admit(p)
	}
	return g.sc
}

// admit merges matchLabelKeys and mismatchLabelKeys into the label
// selectors, as the API server does when it admits a pod: the scheduler
// reads the merged selectors.
func admit(p *corev1.Pod) {
	merge := func(sel *metav1.LabelSelector, keys []string, op metav1.LabelSelectorOperator) {
		for _, k := range keys {
			if v, ok := p.Labels[k]; ok && sel != nil {
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: op, Values: []string{v}})
			}
		}
	}
	if a := p.Spec.Affinity; a != nil {
		var terms []corev1.PodAffinityTerm
		if a.PodAffinity != nil {
			terms = a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		if a.PodAntiAffinity != nil {
			terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		}
		for i := range terms {
			merge(terms[i].LabelSelector, terms[i].MatchLabelKeys, metav1.LabelSelectorOpIn)
			merge(terms[i].LabelSelector, terms[i].MismatchLabelKeys, metav1.LabelSelectorOpNotIn)
		}
	}
	for i := range p.Spec.TopologySpreadConstraints {
		c := &p.Spec.TopologySpreadConstraints[i]
		merge(c.LabelSelector, c.MatchLabelKeys, metav1.LabelSelectorOpIn)
	}
}

func (g *gen) storage() {
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	g.sc.storageClasses = []*storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: classLocal}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc},
		{ObjectMeta: metav1.ObjectMeta{Name: classZonal}, Provisioner: csiDriver, VolumeBindingMode: &wffc,
			AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
				{Key: corev1.LabelTopologyZone, Values: []string{"zone-a", "zone-b"}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: classImmediate}, Provisioner: csiDriver, VolumeBindingMode: &immediate},
	}
}

// storageCapacity has the zonal class's CSI driver report storage capacity
// in half of the scenarios (in half of those it only says it does not),
// with up to three CSIStorageCapacity objects of that class: per zone, or
// without a topology; a capacity of 1, 5 or 20 GiB against the claims' 5,
// and sometimes a maximum volume size. It draws from a stream of its own,
// so that the rest of each scenario stays what the seed made it before.
func (g *gen) storageCapacity(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 4242))
	if r.IntN(2) == 0 {
		return
	}
	g.sc.csiDrivers = []*storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: csiDriver},
		Spec: storagev1.CSIDriverSpec{StorageCapacity: ptr.To(r.IntN(4) > 0)}}}
	sizes := []string{"1Gi", "5Gi", "20Gi"}
	for i := range r.IntN(4) {
		c := &storagev1.CSIStorageCapacity{
			ObjectMeta:       metav1.ObjectMeta{Namespace: "kube-system", Name: fmt.Sprintf("capacity-%d", i)},
			StorageClassName: classZonal,
			Capacity:         ptr.To(resource.MustParse(sizes[r.IntN(len(sizes))])),
		}
		if r.IntN(8) > 0 {
			c.NodeTopology = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelTopologyZone: zones[r.IntN(len(zones))]}}
		}
		if r.IntN(3) == 0 {
			c.MaximumVolumeSize = ptr.To(resource.MustParse([]string{"4Gi", "10Gi"}[r.IntN(2)]))
		}
		g.sc.capacities = append(g.sc.capacities, c)
	}
}

func (g *gen) node(i int) *corev1.Node {
	r := g.r
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), UID: types.UID(fmt.Sprintf("node-%d", i)),
		Labels: map[string]string{corev1.LabelHostname: fmt.Sprintf("n%d", i)}}}
	if r.IntN(6) > 0 {
		z := zones[r.IntN(len(zones))]
		n.Labels[corev1.LabelTopologyZone] = z
		n.Labels[corev1.LabelTopologyRegion] = "region-1"
		if r.IntN(4) == 0 {
			n.Labels[legacyZone] = z
			n.Labels[legacyRegion] = "region-1"
		}
	}
	if r.IntN(3) == 0 {
		n.Labels["role"] = "data"
	}
	if r.IntN(8) == 0 {
		n.Spec.Unschedulable = true
	}
	if r.IntN(7) == 0 {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute}[r.IntN(2)]}}
	}
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	if r.IntN(4) == 0 {
		n.Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(fmt.Sprint(1 + r.IntN(2))),
			corev1.ResourceMemory: resource.MustParse("4Gi"),
			corev1.ResourcePods:   resource.MustParse(fmt.Sprint(2 + r.IntN(4))),
		}
	}
	n.Status.Capacity = n.Status.Allocatable
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	// A static local volume on some nodes, for WaitForFirstConsumer claims
	// of the local class to find.
	if r.IntN(3) == 0 {
		g.sc.volumes = append(g.sc.volumes, g.localVolume(n))
	}
	if r.IntN(3) == 0 {
		g.sc.csiNodes = append(g.sc.csiNodes, g.csiNode(n))
	}
	return n
}

// csiNode limits the volumes a node attaches: of the example driver (as few
// as none), sometimes of the AWS EBS driver that in-tree disks migrate to,
// sometimes a driver that reports no limit.
func (g *gen) csiNode(n *corev1.Node) *storagev1.CSINode {
	r := g.r
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
	driver := func(name string, limit *int32) {
		d := storagev1.CSINodeDriver{Name: name, NodeID: n.Name}
		if limit != nil {
			d.Allocatable = &storagev1.VolumeNodeResources{Count: limit}
		}
		cn.Spec.Drivers = append(cn.Spec.Drivers, d)
	}
	if r.IntN(4) > 0 {
		driver(csiDriver, ptr.To(int32(r.IntN(4))))
	}
	if r.IntN(2) == 0 {
		driver(ebsDriver, ptr.To(int32(r.IntN(3))))
	}
	if r.IntN(4) == 0 {
		driver("no-limit.example.com", nil)
	}
	return cn
}

// volumeAttachments attaches some bound CSI volumes to a node, as the
// attach-detach controller records it, whether or not a pod there uses them.
func (g *gen) volumeAttachments() {
	for _, pv := range g.sc.volumes {
		if pv.Spec.CSI == nil || g.r.IntN(5) > 0 {
			continue
		}
		g.sc.attachments = append(g.sc.attachments, &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: "va-" + pv.Name},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: pv.Spec.CSI.Driver, NodeName: g.sc.nodes[g.r.IntN(len(g.sc.nodes))].Name,
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv.Name)}},
		})
	}
}

// localVolume is an Available static volume of the local class, pinned
// to node by its hostname.
func (g *gen) localVolume(n *corev1.Node) *corev1.PersistentVolume {
	size := []string{"1Gi", "10Gi"}[g.r.IntN(2)]
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "local-" + n.Name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:       classLocal,
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disk"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{n.Name}}},
			}}}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
}

func (g *gen) pod(name string, bound bool) *corev1.Pod {
	r := g.r
	ns := g.sc.namespaces[r.IntN(len(g.sc.namespaces))].Name
	app := apps[r.IntN(len(apps))]
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
			Labels: map[string]string{"app": app, "rel": []string{"blue", "green"}[r.IntN(2)]}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/x:1"}}},
	}
	if r.IntN(3) == 0 {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(fmt.Sprintf("%dm", 250*(1+r.IntN(4)))),
			corev1.ResourceMemory: resource.MustParse("256Mi"),
		}
	}
	if r.IntN(8) == 0 {
		g.initContainers(p)
	}
	if r.IntN(10) == 0 {
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	}
	if r.IntN(12) == 0 {
		// Pod-level resources: the pod's requests, whatever its containers'.
		p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 1000*(1+r.IntN(3))))}}
	}
	if r.IntN(5) == 0 {
		p.Spec.NodeSelector = map[string]string{"role": "data"}
	}
	if bound || r.IntN(5) == 0 {
		// A bound pod tolerates its node's taint, as it would to be there.
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "x"}}
	}
	if r.IntN(8) == 0 {
		port := corev1.ContainerPort{ContainerPort: 8080, HostPort: []int32{8080, 9090}[r.IntN(2)], Protocol: []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}[r.IntN(2)]}
		if r.IntN(3) == 0 {
			port.HostIP = "10.0.0.1"
		}
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{port}
	}
	if r.IntN(4) == 0 {
		g.claim(p, bound)
	}
	if r.IntN(8) == 0 {
		// An in-tree disk written inline, which counts as the EBS driver's.
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "disk", VolumeSource: corev1.VolumeSource{
			AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: fmt.Sprintf("vol-%d", r.IntN(3))}}})
	}
	g.affinity(p)
	g.spread(p, app)
	if bound && r.IntN(10) == 0 {
		g.resizeInFlight(p)
	}
	if !bound && r.IntN(40) == 0 {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	}
	return p
}

// initContainers adds an init container and, sometimes, a sidecar (an
// init container that keeps running), whose requests count differently.
func (g *gen) initContainers(p *corev1.Pod) {
	initC := corev1.Container{Name: "init", Image: "registry.invalid/x:1", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 500*(1+g.r.IntN(6))))}}}
	p.Spec.InitContainers = append(p.Spec.InitContainers, initC)
	if g.r.IntN(2) == 0 {
		sidecar := corev1.Container{Name: "sidecar", Image: "registry.invalid/x:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}
		p.Spec.InitContainers = append(p.Spec.InitContainers, sidecar)
	}
}

// resizeInFlight reports a running pod whose in-place resize to its spec
// is under way: the kubelet still has the old, larger requests allocated.
func (g *gen) resizeInFlight(p *corev1.Pod) {
	c := &p.Spec.Containers[0]
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	allocated := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 1000*(1+g.r.IntN(3))))}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, AllocatedResources: allocated,
		Resources: &corev1.ResourceRequirements{Requests: allocated}}}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue})
	if g.r.IntN(3) == 0 {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}
	}
	// The kubelet reports its init containers' resources too: allocated as
	// their spec asks, which an Infeasible resize counts in place of the spec.
	for _, c := range p.Spec.InitContainers {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name,
			AllocatedResources: c.Resources.Requests, Resources: &corev1.ResourceRequirements{Requests: c.Resources.Requests}})
	}
}

// claim gives the pod a claim of one of the shapes VolumeBinding,
// VolumeZone and VolumeRestrictions judge differently.
func (g *gen) claim(p *corev1.Pod, bound bool) {
	r := g.r
	name := p.Name + "-data"
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
		},
	}
	shape := r.IntN(7)
	if bound && shape >= 3 {
		shape = r.IntN(3)
	}
	switch shape {
	case 0, 1:
		// Bound to a zonal volume, labelled the GA or the legacy way,
		// sometimes in two zones.
		pv := g.zonalVolume(c.Namespace+"-"+name, shape == 1)
		c.Spec.StorageClassName = ptr.To(classImmediate)
		c.Spec.VolumeName = pv.Name
		c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
		if !bound && r.IntN(5) == 0 {
			// Named but not yet bind-completed: still unbound to the scheduler.
			delete(c.Annotations, "pv.kubernetes.io/bind-completed")
		}
		c.Status.Phase = corev1.ClaimBound
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: c.Namespace, Name: c.Name}
		pv.Status.Phase = corev1.VolumeBound
		g.sc.volumes = append(g.sc.volumes, pv)
	case 2:
		// ReadWriteOncePod, shared with another pod of the namespace.
		c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
		c.Name = "shared-rwop"
		name = c.Name
		pv := g.zonalVolume(c.Namespace+"-"+name, false)
		c.Spec.StorageClassName = ptr.To(classImmediate)
		c.Spec.VolumeName = pv.Name
		c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
		c.Status.Phase = corev1.ClaimBound
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: c.Namespace, Name: c.Name}
		pv.Status.Phase = corev1.VolumeBound
		if !g.hasClaim(c.Namespace, c.Name) {
			g.sc.volumes = append(g.sc.volumes, pv)
		}
	case 3:
		// WaitForFirstConsumer with static local volumes only.
		c.Spec.StorageClassName = ptr.To(classLocal)
	case 4:
		// WaitForFirstConsumer, provisioned in zones a and b only.
		c.Spec.StorageClassName = ptr.To(classZonal)
		if r.IntN(3) == 0 {
			c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": g.sc.nodes[r.IntN(len(g.sc.nodes))].Name}
		}
	case 5:
		// Immediate and not bound yet.
		c.Spec.StorageClassName = ptr.To(classImmediate)
	case 6:
		// A claim that does not exist.
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "missing"}}})
		return
	}
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	if !g.hasClaim(c.Namespace, c.Name) {
		g.sc.claims = append(g.sc.claims, c)
	}
}

func (g *gen) hasClaim(ns, name string) bool {
	for _, c := range g.sc.claims {
		if c.Namespace == ns && c.Name == name {
			return true
		}
	}
	return false
}

// zonalVolume is a volume pinned to zones by labels (GA or legacy, one
// zone or two joined by "__") or by node affinity.
func (g *gen) zonalVolume(name string, legacy bool) *corev1.PersistentVolume {
	r := g.r
	zone := zones[r.IntN(len(zones))]
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name, Labels: map[string]string{}},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:       classImmediate,
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: csiDriver, VolumeHandle: "h-" + name}},
		},
	}
	switch {
	case legacy:
		if r.IntN(2) == 0 {
			zone += "__" + zones[r.IntN(len(zones))]
		}
		pv.Labels[legacyZone] = zone
		if r.IntN(2) == 0 {
			pv.Labels[legacyRegion] = "region-1"
		}
	case r.IntN(2) == 0:
		pv.Labels[corev1.LabelTopologyZone] = zone
	default:
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
		}}}}
	}
	return pv
}

func (g *gen) affinity(p *corev1.Pod) {
	r := g.r
	term := func() corev1.PodAffinityTerm {
		t := corev1.PodAffinityTerm{TopologyKey: keys[r.IntN(len(keys))],
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": apps[r.IntN(len(apps))]}}}
		switch r.IntN(5) {
		case 0:
			t.Namespaces = []string{"ns-a", "ns-b"}
		case 1:
			t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "back"}}
		}
		switch r.IntN(6) {
		case 0:
			t.MatchLabelKeys = []string{"rel"}
		case 1:
			t.MismatchLabelKeys = []string{"rel"}
		}
		return t
	}
	if r.IntN(3) == 0 {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term()}}}
	}
	if r.IntN(7) == 0 {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term()}}
	}
}

// spreadOptions are the fields of a DoNotSchedule spread the generator
// sets, each on about one constraint in three or four: minDomains above the
// number of domains is where the global minimum becomes 0.
var spreadOptions = []struct {
	oneIn int
	set   func(r *rand.Rand, c *corev1.TopologySpreadConstraint)
}{
	{3, func(r *rand.Rand, c *corev1.TopologySpreadConstraint) { c.MinDomains = ptr.To(int32(2 + r.IntN(4))) }},
	{4, func(_ *rand.Rand, c *corev1.TopologySpreadConstraint) {
		c.NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore)
	}},
	{4, func(_ *rand.Rand, c *corev1.TopologySpreadConstraint) {
		c.NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor)
	}},
	{4, func(_ *rand.Rand, c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"rel"} }},
}

func (g *gen) spread(p *corev1.Pod, app string) {
	r := g.r
	if r.IntN(2) != 0 {
		return
	}
	c := corev1.TopologySpreadConstraint{
		MaxSkew: int32(1 + r.IntN(2)), TopologyKey: keys[r.IntN(len(keys))], WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
	}
	for _, o := range spreadOptions {
		if r.IntN(o.oneIn) == 0 {
			o.set(r, &c)
		}
	}
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{c}
}

package controller

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	clientretry "k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// The envtest specs have an API server but no workload controllers and no
// scheduler: a fakeCluster plays both, creating the ReplicaSets and pods a
// Deployment would have, on the nodes the spec names, and reporting the
// rollouts the spec declares complete. Each spec gets a namespace and its
// own nodes, labelled pool=<namespace>, which its workloads select, so that
// specs never see each other's capacity.

const (
	hostnameKey = corev1.LabelHostname
	poolKey     = "pool"
	setupOwner  = "spec-setup"
)

type fakeCluster struct {
	ns string
}

// newFakeCluster creates the spec's namespace and removes it, and the
// spec's nodes, when the spec ends.
func newFakeCluster() *fakeCluster {
	fc := &fakeCluster{ns: "pm-" + rand.String(6)}
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fc.ns}})).To(Succeed())
	DeferCleanup(func() {
		Expect(k8sClient.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{poolKey: fc.ns})).To(Succeed())
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fc.ns}}))).To(Succeed())
	})
	return fc
}

// node creates a schedulable node of the spec's pool with room for pods.
func (fc *fakeCluster) node(name string, labels map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fc.ns + "-" + name, Labels: map[string]string{poolKey: fc.ns}}}
	n.Labels[hostnameKey] = n.Name
	for k, v := range labels {
		n.Labels[k] = v
	}
	Expect(k8sClient.Create(ctx, n)).To(Succeed())
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	n.Status.Capacity = n.Status.Allocatable
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	Expect(k8sClient.Status().Update(ctx, n)).To(Succeed())
	// The API server's TaintNodesByCondition admission taints a new node
	// not-ready; the node lifecycle controller lifts it once the node
	// reports Ready. Play that controller.
	n.Spec.Taints = nil
	Expect(k8sClient.Update(ctx, n)).To(Succeed())
	return n
}

// cordon marks the node unschedulable, as kubectl cordon does.
func (fc *fakeCluster) cordon(name string) {
	n := &corev1.Node{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: fc.ns + "-" + name}, n)).To(Succeed())
	n.Spec.Unschedulable = true
	Expect(k8sClient.Update(ctx, n)).To(Succeed())
}

// deployment creates a Deployment of app=name confined to the spec's pool.
func (fc *fakeCluster) deployment(name string, replicas int32, mutate ...func(*appsv1.Deployment)) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: fc.ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{poolKey: fc.ns},
					Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					}}},
				},
			},
		},
	}
	for _, f := range mutate {
		f(d)
	}
	Expect(k8sClient.Create(ctx, d, client.FieldOwner(setupOwner))).To(Succeed())
	return d
}

// rollOut plays the Deployment controller and the scheduler: the current
// template's pods run, Ready, on the given nodes (one pod per node name),
// the pods of older templates are gone, and the Deployment reports the
// rollout complete.
func (fc *fakeCluster) rollOut(name string, nodes ...string) []*corev1.Pod {
	// A phase is reported when a write is recorded, a moment before it is
	// made: roll out only a generation the controller has not seen.
	Eventually(func() bool {
		d := fc.get(name)
		return d.Generation > d.Status.ObservedGeneration
	}).Should(BeTrue(), "nothing new to roll out in %s", name)
	d := fc.get(name)
	rs := fc.replicaSet(d)
	var old corev1.PodList
	Expect(k8sClient.List(ctx, &old, client.InNamespace(fc.ns), client.MatchingLabels(d.Spec.Selector.MatchLabels))).To(Succeed())
	for i := range old.Items {
		if ref := metav1.GetControllerOf(&old.Items[i]); ref == nil || ref.UID != rs.UID {
			Expect(k8sClient.Delete(ctx, &old.Items[i], client.GracePeriodSeconds(0))).To(Succeed())
		}
	}
	pods := make([]*corev1.Pod, 0, len(nodes))
	for _, n := range nodes {
		pods = append(pods, fc.pod(rs, fc.ns+"-"+n, readyPod))
	}
	fc.reportRolledOut(name)
	return pods
}

// pinnedStatefulSet creates a StatefulSet whose pods run on node, each
// with a claim bound to a volume that only nodes of zone can reach.
func (fc *fakeCluster) pinnedStatefulSet(name string, replicas int32, zone, node string) {
	labels := map[string]string{"app": name}
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: fc.ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector: map[string]string{poolKey: fc.ns},
				Containers:   []corev1.Container{{Name: "db", Image: "registry.example/db:1", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}}},
		},
	}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	revision := name + "-1"
	for i := range replicas {
		claim := fmt.Sprintf("data-%s-%d", name, i)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fc.ns + "-" + claim},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "disk.csi.example", VolumeHandle: claim}},
				ClaimRef:               &corev1.ObjectReference{Namespace: fc.ns, Name: claim},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
				}}}},
			},
		}
		Expect(k8sClient.Create(ctx, pv)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, pv))).To(Succeed()) })
		pvc := &corev1.PersistentVolumeClaim{
			// Bound as the PV controller leaves a claim (envtest runs none).
			ObjectMeta: metav1.ObjectMeta{Namespace: fc.ns, Name: claim, Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: pv.Name, StorageClassName: ptr.To(""),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		Expect(k8sClient.Create(ctx, pvc)).To(Succeed())
		pvc.Status.Phase = corev1.ClaimBound
		Expect(k8sClient.Status().Update(ctx, pvc)).To(Succeed())
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fc.ns, Name: fmt.Sprintf("%s-%d", name, i),
				Labels:          map[string]string{"app": name, appsv1.ControllerRevisionHashLabelKey: revision},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}},
			Spec: *s.Spec.Template.Spec.DeepCopy(),
		}
		p.Spec.NodeName = node
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		reach(p.CreationTimestamp.Time)
		readyPod(p)
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
	}
	// Rolled out, as its controller reports it.
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: replicas, ReadyReplicas: replicas, CurrentReplicas: replicas,
		UpdatedReplicas: replicas, AvailableReplicas: replicas, CurrentRevision: revision, UpdateRevision: revision}
	Expect(k8sClient.Status().Update(ctx, s)).To(Succeed())
}

// pendingPod adds a pod of the Deployment's current template that the
// scheduler could not place, with the scheduler's message.
func (fc *fakeCluster) pendingPod(name, message string) *corev1.Pod {
	return fc.pod(fc.replicaSet(fc.get(name)), "", unschedulableWith(message))
}

// unschedulableWith leaves a pod as the scheduler does when no node fits.
func unschedulableWith(message string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: message, LastTransitionTime: now()}}
	}
}

func readyPod(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now()},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now()},
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example/app:1", ImageID: "registry.example/app@sha256:1"}}
}

// replicaSet returns the ReplicaSet of the Deployment's current template,
// creating it as the Deployment controller would.
func (fc *fakeCluster) replicaSet(d *appsv1.Deployment) *appsv1.ReplicaSet {
	// One ReplicaSet per generation: every change a spec makes is to the template.
	hash := fmt.Sprintf("g%d", d.Generation)
	rs := &appsv1.ReplicaSet{}
	key := client.ObjectKey{Namespace: fc.ns, Name: d.Name + "-" + hash}
	if err := k8sClient.Get(ctx, key, rs); err == nil {
		return rs
	}
	tpl := d.Spec.Template.DeepCopy()
	tpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	selector := map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash}
	for k, v := range d.Spec.Selector.MatchLabels {
		selector[k] = v
	}
	rs = &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: fc.ns, Name: key.Name, Labels: tpl.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Template: *tpl,
			Selector: &metav1.LabelSelector{MatchLabels: selector}},
	}
	Expect(k8sClient.Create(ctx, rs)).To(Succeed())
	return rs
}

// pod creates a pod of the ReplicaSet on node ("" for unbound), its spec
// changed by mutate first, then its status set by state.
func (fc *fakeCluster) pod(rs *appsv1.ReplicaSet, node string, state func(*corev1.Pod), mutate ...func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: fc.ns, Name: rs.Name + "-" + rand.String(5), Labels: rs.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec: *rs.Spec.Template.Spec.DeepCopy(),
	}
	p.Spec.NodeName = node
	for _, m := range mutate {
		m(&p.Spec)
	}
	Expect(k8sClient.Create(ctx, p)).To(Succeed())
	reach(p.CreationTimestamp.Time)
	// The operator may write the new pod meanwhile (a deletion cost): set
	// the status on the pod as it is now.
	Expect(clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		state(p)
		return k8sClient.Status().Update(ctx, p)
	})).To(Succeed())
	return p
}

// bind places a pod on node as the scheduler does, through the binding
// subresource, and reports it running.
func (fc *fakeCluster) bind(p *corev1.Pod, node string) {
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		Target: corev1.ObjectReference{Kind: "Node", Name: fc.ns + "-" + node}}
	Expect(k8sClient.SubResource("binding").Create(ctx, p, binding)).To(Succeed())
	Expect(clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		readyPod(p)
		return k8sClient.Status().Update(ctx, p)
	})).To(Succeed())
}

// reportRolledOut sets the Deployment's status as its controller does once
// the current generation is rolled out.
func (fc *fakeCluster) reportRolledOut(name string) {
	d := fc.get(name)
	n := *d.Spec.Replicas
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
}

func (fc *fakeCluster) get(name string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: name}, d)).To(Succeed())
	return d
}

// migration creates a PlacementMigration of the spec's namespace with
// timers at zero, so only the behaviour under test sets the pace.
func (fc *fakeCluster) migration(name string, spec pgv1.PlacementMigrationSpec) *pgv1.PlacementMigration {
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: fc.ns, Name: name}, Spec: spec}
	if pm.Spec.StageTimeout == nil {
		pm.Spec.StageTimeout = &metav1.Duration{Duration: 15 * time.Minute}
	}
	if pm.Spec.Guards == nil {
		pm.Spec.Guards = &pgv1.Guards{}
	}
	if pm.Spec.Guards.MinPodAge == nil {
		pm.Spec.Guards.MinPodAge = &metav1.Duration{}
	}
	if pm.Spec.SoakDuration == nil {
		pm.Spec.SoakDuration = &metav1.Duration{}
	}
	Expect(k8sClient.Create(ctx, pm)).To(Succeed())
	return pm
}

func (fc *fakeCluster) pm(name string) *pgv1.PlacementMigration {
	pm := &pgv1.PlacementMigration{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: name}, pm)).To(Succeed())
	return pm
}

// phase is for Eventually: the migration's phase, once its status
// describes the current generation.
func (fc *fakeCluster) phase(name string) func() pgv1.Phase {
	return func() pgv1.Phase {
		pm := fc.pm(name)
		if pm.Status.ObservedGeneration != pm.Generation {
			return ""
		}
		// A stage's phase is shown from when its intent is recorded; the
		// write follows in the next reconcile. A spec that waits for the
		// phase goes on to look at the workload, so wait for the write too.
		// An intent held through a soak is written when the soak ends.
		if op := pm.Status.Operation; op != nil && !op.Held() {
			for _, t := range op.Targets {
				if t.AppliedGeneration == 0 {
					return pm.Status.Phase + " (write pending)"
				}
			}
		}
		return pm.Status.Phase
	}
}

// explain describes the migration for a failed expectation.
func (fc *fakeCluster) explain(name string) func() string {
	return func() string {
		pm := fc.pm(name)
		out := fmt.Sprintf("phase %s (generation %d, observed %d)", pm.Status.Phase, pm.Generation, pm.Status.ObservedGeneration)
		for _, c := range pm.Status.Conditions {
			out += fmt.Sprintf("\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
		return out
	}
}

// condition returns the migration's condition of a type, or an empty one.
func (fc *fakeCluster) condition(name, conditionType string) metav1.Condition {
	if c := meta.FindStatusCondition(fc.pm(name).Status.Conditions, conditionType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// kstatus is the verdict kubectl wait, Flux and Helm's watcher reach on
// the migration, computed by the library they use.
func (fc *fakeCluster) kstatus(name string) status.Status {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(fc.pm(name))
	Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(&unstructured.Unstructured{Object: raw})
	Expect(err).NotTo(HaveOccurred())
	return res.Status
}

// eventReasons lists the reasons of the Events recorded on the migration,
// oldest first.
func (fc *fakeCluster) eventReasons(name string) func() []string {
	return func() []string {
		var list eventsv1.EventList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(fc.ns))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "PlacementMigration" && e.Regarding.Name == name {
				out = append(out, e.Reason)
			}
		}
		return out
	}
}

// antiAffinityOf returns the pod anti-affinity of the Deployment's template.
func (fc *fakeCluster) antiAffinityOf(name string) *corev1.PodAntiAffinity {
	d := fc.get(name)
	if d.Spec.Template.Spec.Affinity == nil {
		return nil
	}
	return d.Spec.Template.Spec.Affinity.PodAntiAffinity
}

// managersOf maps each field manager of the Deployment (not its status)
// to the fields it owns, as managedFields records them.
func (fc *fakeCluster) managersOf(name string) map[string]string {
	out := map[string]string{}
	for _, mf := range fc.get(name).ManagedFields {
		if mf.Subresource == "" && mf.FieldsV1 != nil {
			out[mf.Manager] = mf.FieldsV1.GetRawString()
		}
	}
	return out
}

func hostnameAntiAffinity(selector map[string]string) pgv1.Constraint {
	c := pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: hostnameKey}}
	if selector != nil {
		c.PodAntiAffinity.LabelSelector = pgv1.Labels(selector)
	}
	return c
}

func targetsNamed(names ...string) []pgv1.TargetRef {
	out := make([]pgv1.TargetRef, len(names))
	for i, n := range names {
		out[i] = pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: n}
	}
	return out
}

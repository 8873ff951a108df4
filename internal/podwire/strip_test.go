package podwire

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// randomPod is a pod with every field filled at random, dressed so that
// each branch of TrimPod is taken now and then: a deletion cost, the
// conditions it keeps, statuses named after their containers, and volumes
// of one source each, as real volumes are.
func randomPod(f *randfill.Filler, seed int) *corev1.Pod {
	p := &corev1.Pod{}
	f.Fill(p)
	if seed%2 == 0 {
		metav1.SetMetaDataAnnotation(&p.ObjectMeta, corev1.PodDeletionCost, fmt.Sprint(seed))
	}
	if seed%3 == 0 {
		metav1.SetMetaDataAnnotation(&p.ObjectMeta, placement.DeletionCostMark, fmt.Sprint(seed))
	}
	for i, t := range []corev1.PodConditionType{corev1.PodReady, corev1.PodScheduled, corev1.PodResizePending} {
		if seed&(1<<i) != 0 {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: "r", Message: "m"})
		}
	}
	for i := range p.Status.ContainerStatuses {
		if i < len(p.Spec.Containers) {
			p.Status.ContainerStatuses[i].Name = p.Spec.Containers[i].Name
		}
	}
	return p
}

func newFiller(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.2).NumElements(1, 3).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(100000), resource.DecimalSI)
		},
		func(s *corev1.VolumeSource, c randfill.Continue) {
			// One source, of any kind, as the API server allows.
			v := reflect.ValueOf(s).Elem()
			field := v.Field(c.Intn(v.NumField()))
			ptr := reflect.New(field.Type().Elem())
			c.Fill(ptr.Interface())
			field.Set(ptr)
		},
	)
}

// TestStrippedPodsTrimAsFullOnes is the property the stripping rests on:
// whatever a pod holds, TrimPod of its stripped decode equals TrimPod of
// its full decode, so the engine cannot tell the two apart.
func TestStrippedPodsTrimAsFullOnes(t *testing.T) {
	f := newFiller(1)
	for seed := range 3000 {
		raw, err := randomPod(f, seed).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		assertTrimsAsFull(t, raw)
	}
}

func assertTrimsAsFull(t *testing.T, raw []byte) {
	t.Helper()
	full := &corev1.Pod{}
	if err := full.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	stripped := &corev1.Pod{}
	if err := DecodePod(raw, stripped); err != nil {
		t.Fatalf("pod %s: %v", full.Name, err)
	}
	want, got := placement.TrimPod(full), placement.TrimPod(stripped)
	if !equality.Semantic.DeepEqual(want, got) {
		t.Fatalf("pod %s trims otherwise when stripped on the wire (-full +stripped):\n%s", full.Name, cmp.Diff(want, got))
	}
}

// realisticPod is a pod as a Deployment makes it, with what the operator
// never reads: managedFields, a large annotation, images, environment,
// probes, a projected token and a config volume.
func realisticPod(i int) *corev1.Pod {
	c := corev1.Container{
		Name: "app", Image: "registry.example.com/team/service:v1.2.3",
		Command:        []string{"/bin/service", "--config=/etc/service/config.yaml"},
		Ports:          []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}, Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready"}}},
		LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/live"}}},
		VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/service"}, {Name: "token", MountPath: "/var/run/secrets"}},
	}
	for k := range 20 {
		c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", k), Value: "some-value"})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("app-abc-%05d", i), Namespace: "team", UID: "8c1f5a2e-0c4b-4e7a-9d55-000000000001", ResourceVersion: "1000",
			Labels:          map[string]string{"app": "app", "pod-template-hash": "abc"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": strings.Repeat("x", 300), corev1.PodDeletionCost: "5", placement.DeletionCostMark: "5"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app-abc", UID: "rs", Controller: ptrTo(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsV1: metav1.NewFieldsV1(strings.Repeat(`{"f:metadata":{}}`, 60))}},
		},
		Spec: corev1.PodSpec{
			NodeName: "n1", Containers: []corev1.Container{c}, ServiceAccountName: "app",
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.1", HostIP: "192.168.0.1", QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: 2, Image: c.Image, ImageID: strings.Repeat("f", 71),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// The engine's annotations are spelt twice (this package cannot import the
// engine's tests' package): every one the engine reads must be kept, or
// the engine never sees it.
func TestTheEnginesAnnotationsAreKept(t *testing.T) {
	for _, k := range placement.KeptAnnotations {
		if !keptAnnotations[k] {
			t.Errorf("the engine reads %q, which the pod wire drops", k)
		}
	}
}

// TestRealisticPodsLoseWhatIsNeverRead checks that the stripping does
// strip: a real pod decoded from the wire carries no environment, probes,
// managedFields or config volumes, and keeps what the engine reads.
func TestRealisticPodsLoseWhatIsNeverRead(t *testing.T) {
	raw, err := realisticPod(1).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	assertTrimsAsFull(t, raw)
	p := &corev1.Pod{}
	if err := DecodePod(raw, p); err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers[0]
	switch {
	case p.ManagedFields != nil, c.Env != nil, c.ReadinessProbe != nil, c.Image != "", c.Resources.Limits != nil, p.Status.PodIP != "":
		t.Errorf("fields the engine never reads were decoded: %+v", p)
	case len(p.Annotations) != 2 || p.Annotations[corev1.PodDeletionCost] != "5" || p.Annotations[placement.DeletionCostMark] != "5":
		t.Errorf("annotations: got %v, want the deletion cost and its mark alone", p.Annotations)
	case len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].Name != "data":
		t.Errorf("volumes: got %+v, want the claim alone", p.Spec.Volumes)
	case p.Labels["app"] != "app" || c.Resources.Requests.Cpu().MilliValue() != 100 || p.Status.ContainerStatuses[0].RestartCount != 2:
		t.Errorf("what the engine reads was lost: %+v", p)
	}
}

// TestMalformedPodsAreRefused feeds truncated and corrupted pods: each is
// refused or decoded, never a panic, and decoded alike where both
// decoders take it.
func TestMalformedPodsAreRefused(t *testing.T) {
	raw, err := realisticPod(1).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for cut := range len(raw) {
		decodeBoth(t, raw[:cut])
	}
	for i := range raw {
		corrupt := append([]byte(nil), raw...)
		corrupt[i] ^= 0xff
		decodeBoth(t, corrupt)
	}
	if err := DecodePod([]byte{0x12, 0x05, 0x01}, &corev1.Pod{}); err == nil {
		t.Error("a spec longer than the message was decoded")
	}
}

// decodeBoth decodes raw fully and stripped. Where both take it, they
// must trim alike. The stripped decoder may refuse what the full one
// takes only when it is not how a pod is encoded (protobuf groups, field
// numbers out of range); the pod as the full decoder read it, encoded
// again, must be taken and trim alike.
func decodeBoth(t *testing.T, raw []byte) {
	t.Helper()
	full := &corev1.Pod{}
	if full.Unmarshal(raw) != nil {
		_ = DecodePod(raw, &corev1.Pod{})
		return
	}
	stripped := &corev1.Pod{}
	if DecodePod(raw, stripped) == nil {
		if want, got := placement.TrimPod(full), placement.TrimPod(stripped); !equality.Semantic.DeepEqual(want, got) {
			t.Fatalf("pod %s trims otherwise when stripped on the wire (-full +stripped):\n%s", full.Name, cmp.Diff(want, got))
		}
	}
	canonical, err := full.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	assertTrimsAsFull(t, canonical)
}

func FuzzDecodePod(f *testing.F) {
	for i := range 4 {
		raw, err := realisticPod(i).Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	filler := newFiller(2)
	for seed := range 4 {
		raw, err := randomPod(filler, seed).Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(decodeBoth)
}

// BenchmarkDecodePod compares the full decode of a realistic pod with the
// stripped one.
func BenchmarkDecodePod(b *testing.B) {
	raw, err := realisticPod(1).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			p := &corev1.Pod{}
			if err := p.Unmarshal(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stripped", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if err := DecodePod(raw, &corev1.Pod{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

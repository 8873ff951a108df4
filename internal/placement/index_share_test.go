package placement

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// same reports whether two maps or slices are one in memory.
func same(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Kind() == vb.Kind() && !va.IsNil() && va.UnsafePointer() == vb.UnsafePointer()
}

func TestPodsOfOneTemplateShareWhatTheyHaveInCommon(t *testing.T) {
	trimmer := NewPodTrimmer(DefaultSharedParts)
	template := func(name string, opts ...podOpt) *corev1.Pod {
		opts = append([]podOpt{on("n1"), withLabels("app", "web", "pod-template-hash", "abc"), requests("100m", "128Mi"),
			spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "web"}), antiAffinity(term(corev1.LabelHostname, map[string]string{"app": "web"}))}, opts...)
		p := realistic(mkPod("ns", name, opts...))
		p.UID = types.UID("uid-" + name)
		p.Spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
		return p
	}
	a, b := trimmer.Trim(template("a")), trimmer.Trim(template("b"))
	if a.Name != "a" || b.Name != "b" || a.UID == b.UID {
		t.Fatal("each pod keeps its own identity")
	}
	for name, parts := range map[string][2]any{
		"labels":                    {a.Labels, b.Labels},
		"tolerations":               {a.Spec.Tolerations, b.Spec.Tolerations},
		"topologySpreadConstraints": {a.Spec.TopologySpreadConstraints, b.Spec.TopologySpreadConstraints},
		"containers":                {a.Spec.Containers, b.Spec.Containers},
		"containerStatuses":         {a.Status.ContainerStatuses, b.Status.ContainerStatuses},
	} {
		if !same(parts[0], parts[1]) {
			t.Errorf("%s are not shared", name)
		}
	}
	if a.Spec.Affinity != b.Spec.Affinity {
		t.Error("the affinity is not shared")
	}

	bigger := trimmer.Trim(template("c", requests("200m", "128Mi")))
	if same(bigger.Spec.Containers, a.Spec.Containers) || bigger.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 200 {
		t.Error("a pod with other requests shares the containers of the template")
	}
	if !same(bigger.Labels, a.Labels) {
		t.Error("a pod with the same labels does not share them")
	}

	resizing := template("d")
	resizing.Status.ContainerStatuses[0].AllocatedResources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}
	r := trimmer.Trim(resizing)
	if same(r.Status.ContainerStatuses, a.Status.ContainerStatuses) || r.Status.ContainerStatuses[0].AllocatedResources == nil {
		t.Error("a container status with a resize in flight is shared")
	}
	restarted := template("e")
	restarted.Status.ContainerStatuses[0].RestartCount = 7
	if e := trimmer.Trim(restarted); same(e.Status.ContainerStatuses, a.Status.ContainerStatuses) || e.Status.ContainerStatuses[0].RestartCount != 7 {
		t.Error("a restarted container shares the statuses of one that did not restart")
	}
}

// A trimmer keeps at most its bound of parts, whatever pods it sees.
func TestTheSharedPartsAreBounded(t *testing.T) {
	trimmer := NewPodTrimmer(10)
	for i := range 100 {
		p := mkPod("ns", "p", withLabels("app", string(rune('a'+i%26))+string(rune('a'+i/26))), requests("100m", "128Mi"))
		trimmer.Trim(p)
		if n := len(trimmer.shared); n > 10 {
			t.Fatalf("after %d distinct pods the trimmer keeps %d parts", i+1, n)
		}
	}
}

package webhook

import (
	"bytes"
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/adoption"
)

// decodedFields is what the fast path reads, decoded whole by the API
// machinery's case-sensitive decoder: the reference readPlacement's scan
// must agree with.
type decodedFields struct {
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Replicas       json.RawMessage `json:"replicas"`
		Strategy       json.RawMessage `json:"strategy"`
		UpdateStrategy json.RawMessage `json:"updateStrategy"`
		Template       struct {
			Metadata struct {
				Labels json.RawMessage `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Affinity struct {
					PodAntiAffinity struct {
						Required  json.RawMessage `json:"requiredDuringSchedulingIgnoredDuringExecution"`
						Preferred json.RawMessage `json:"preferredDuringSchedulingIgnoredDuringExecution"`
					} `json:"podAntiAffinity"`
					NodeAffinity json.RawMessage `json:"nodeAffinity"`
					PodAffinity  json.RawMessage `json:"podAffinity"`
				} `json:"affinity"`
				NodeName          json.RawMessage    `json:"nodeName"`
				RuntimeClassName  json.RawMessage    `json:"runtimeClassName"`
				SchedulingGates   json.RawMessage    `json:"schedulingGates"`
				HostNetwork       json.RawMessage    `json:"hostNetwork"`
				Volumes           json.RawMessage    `json:"volumes"`
				Spreads           json.RawMessage    `json:"topologySpreadConstraints"`
				NodeSelector      json.RawMessage    `json:"nodeSelector"`
				Tolerations       json.RawMessage    `json:"tolerations"`
				PriorityClassName json.RawMessage    `json:"priorityClassName"`
				Overhead          json.RawMessage    `json:"overhead"`
				Containers        []decodedContainer `json:"containers"`
				InitContainers    []decodedContainer `json:"initContainers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// agree fails when the scan and the decoder read raw differently; inputs
// the decoder refuses only must not panic the scan.
func agree(t *testing.T, raw []byte) {
	t.Helper()
	got, err := readPlacement(raw)
	var want decodedFields
	if kjson.UnmarshalCaseSensitivePreserveInts(raw, &want) != nil {
		return
	}
	if err != nil {
		t.Fatalf("the scan refused what the decoder reads: %v\n%s", err, raw)
	}
	spec := want.Spec.Template.Spec
	for _, c := range []struct {
		name      string
		got, want []byte
	}{
		{"replicas", got.replicas, want.Spec.Replicas},
		{"strategy", got.strategy, want.Spec.Strategy},
		{"updateStrategy", got.updateStrategy, want.Spec.UpdateStrategy},
		{"required", got.required, spec.Affinity.PodAntiAffinity.Required},
		{"preferred", got.preferred, spec.Affinity.PodAntiAffinity.Preferred},
		{"spreads", got.spreads, spec.Spreads},
		{"template labels", got.stranding.labels, want.Spec.Template.Metadata.Labels},
		{"nodeSelector", got.stranding.nodeSelector, spec.NodeSelector},
		{"nodeAffinity", got.stranding.nodeAffinity, spec.Affinity.NodeAffinity},
		{"tolerations", got.stranding.tolerations, spec.Tolerations},
		{"priorityClassName", got.stranding.priorityClassName, spec.PriorityClassName},
		{"overhead", got.stranding.overhead, spec.Overhead},
		{"podAffinity", got.stranding.podAffinity, spec.Affinity.PodAffinity},
		{"nodeName", got.stranding.nodeName, spec.NodeName},
		{"runtimeClassName", got.stranding.runtimeClassName, spec.RuntimeClassName},
		{"schedulingGates", got.stranding.schedulingGates, spec.SchedulingGates},
		{"hostNetwork", got.stranding.hostNetwork, spec.HostNetwork},
		{"volumes", got.stranding.volumes, spec.Volumes},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Fatalf("%s: scanned %q, decoded %q\n%s", c.name, c.got, c.want, raw)
		}
	}
	for _, list := range []struct {
		name string
		got  [][]byte
		want []json.RawMessage
	}{
		{"containers' resources", got.stranding.requests, resourcesOfDecoded(spec.Containers)},
		{"init containers' resources", got.stranding.initRequests, resourcesOfDecoded(spec.InitContainers)},
		{"containers' ports", got.stranding.ports, portsOfDecoded(spec.Containers)},
		{"init containers' ports", got.stranding.initPorts, portsOfDecoded(spec.InitContainers)},
	} {
		if len(list.got) != len(list.want) {
			t.Fatalf("%s: scanned %d, decoded %d\n%s", list.name, len(list.got), len(list.want), raw)
		}
		for i := range list.got {
			if !bytes.Equal(list.got[i], list.want[i]) {
				t.Fatalf("%s %d: scanned %q, decoded %q\n%s", list.name, i, list.got[i], list.want[i], raw)
			}
		}
	}
	if got.admissionLabel != want.Metadata.Labels[pgv1.AdmissionLabel] || got.adopted != want.Metadata.Annotations[adoption.Annotation] {
		t.Fatalf("metadata: scanned %q/%q, decoded %q/%q\n%s", got.admissionLabel, got.adopted,
			want.Metadata.Labels[pgv1.AdmissionLabel], want.Metadata.Annotations[adoption.Annotation], raw)
	}
}

// decodedContainer is what the fast path reads of a container.
type decodedContainer struct {
	Resources json.RawMessage `json:"resources"`
	Ports     json.RawMessage `json:"ports"`
}

func portsOfDecoded(cs []decodedContainer) []json.RawMessage {
	var out []json.RawMessage
	for _, c := range cs {
		out = append(out, c.Ports)
	}
	return out
}

func resourcesOfDecoded(cs []decodedContainer) []json.RawMessage {
	var out []json.RawMessage
	for _, c := range cs {
		out = append(out, c.Resources)
	}
	return out
}

// servedDeployment is a Deployment as the API server sends it to the
// check: with managed fields, status and kubectl's last-applied
// annotation, which the fast path must skip.
func servedDeployment(tb testing.TB) []byte {
	d := web(apart)
	d.Labels = map[string]string{"app": "web", pgv1.AdmissionLabel: "Warn"}
	d.Annotations = map[string]string{
		"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"x:1"}]}}}}` + "\n",
		adoption.Annotation: `[{"name":"web-adopted","author":"kubectl \"apply\""}]`,
	}
	d.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:template":{"f:spec":{"f:affinity":{".":{},"f:podAntiAffinity":{}},"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`)},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Subresource: "status",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:availableReplicas":{},"f:conditions":{},"f:readyReplicas":{},"f:replicas":{}}}`)},
	}
	d.Status = appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, Conditions: []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "web-7d4b9c" has successfully progressed.`},
	}}
	raw, err := json.Marshal(d)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

func TestReadPlacementAgreesWithTheDecoder(t *testing.T) {
	served := servedDeployment(t)
	got, err := readPlacement(served)
	if err != nil {
		t.Fatal(err)
	}
	if !got.mayBeHard() || got.admissionLabel != "Warn" || got.adopted == "" || string(got.replicas) != "2" {
		t.Fatalf("read %+v", got)
	}
	for _, raw := range []string{
		string(served),
		`{}`, `null`, `{"metadata":null,"spec":null}`,
		` { "spec" : { "replicas" : 3 , "template" : { "spec" : { "affinity" : { "podAntiAffinity" : { "requiredDuringSchedulingIgnoredDuringExecution" : [ {"topologyKey":"x"} ] } } } } } } `,
		// Keys the API server never writes but JSON allows: escapes, and a
		// key repeated (the last one counts, maps merge).
		`{"spe\u0063":{"replicas":4}}`,
		`{"spec":{"replicas":1},"spec":{"strategy":{"type":"Recreate"}}}`,
		`{"metadata":{"labels":{"placementguard.io/admission":"Off"}},"metadata":{"labels":{"app":"x"}}}`,
		`{"metadata":{"labels":{"placementguard.io/admission":"O\u0066f"}}}`,
		`{"metadata":{"labels":{"placementguard.io/admission":null}}}`,
		// Case differs: the API server's decoder matches keys exactly.
		`{"Spec":{"Replicas":5}}`,
		`{"spec":{"template":{"spec":{"topologySpreadConstraints":[{"whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"a":"]}\"{["}}}]}}}}`,
		`{"spec":{"replicas":"x\\"y"}}`,
		`{"spec":{"template":{"metadata":{"labels":{"tier":"db"}},"spec":{"nodeSelector":{"pool":"b"},"tolerations":[{"key":"k","operator":"Exists"}],"priorityClassName":"high","affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{}},"podAntiAffinity":{}},"containers":[{"name":"a","resources":{"requests":{"cpu":"2"}}},{"name":"b"},null],"initContainers":[{"resources":{"limits":{"memory":"1Gi"}}}],"overhead":{"cpu":"10m"}}}}}`,
		`{"spec":{"template":{"spec":{"containers":[{"resources":{"requests":{"cpu":"1"}}}],"containers":[]}}}}`,
		`{"spec":{"template":{"spec":{"containers":null,"initContainers":[]}}}}`,
		`{"spec":{"template":{"spec":{"nodeName":"n1","runtimeClassName":"gvisor","schedulingGates":[{"name":"g"}],"hostNetwork":true,"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"d"}}],"affinity":{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[]}},"containers":[{"ports":[{"containerPort":80,"hostPort":80}]},{"ports":null}],"initContainers":[{"ports":[]}]}}}}`,
	} {
		agree(t, []byte(raw))
	}
}

func TestReadPlacementRefusesWhatIsNotAnObject(t *testing.T) {
	for _, raw := range []string{``, `[]`, `"spec"`, `{"spec":`, `{"spec":{"replicas":1}`, `{"spec" 1}`, `{"spec":"x}`, `{spec:1}`, `{"metadata":{"labels":[]}}`} {
		if _, err := readPlacement([]byte(raw)); err == nil {
			t.Errorf("%q read without an error", raw)
		}
	}
}

// FuzzReadPlacement holds the scan to the decoder on any input the decoder
// reads, and to not panicking on the rest.
func FuzzReadPlacement(f *testing.F) {
	f.Add(servedDeployment(f))
	f.Add([]byte(`{"spec":{"template":{"spec":{"affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[]}}}}}}`))
	f.Add([]byte(`{"metadata":{"annotations":{"placementguard.io/adopted":"[]"}},"spec":{"updateStrategy":{"type":"OnDelete"}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		agree(t, raw)
	})
}

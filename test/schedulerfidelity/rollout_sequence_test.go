package schedulerfidelity

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// rolloutName is the Deployment of the rollout sequences: its pods are
// named rolloutName-<hash>-<n>.
const rolloutName = "rollout"

// TestEngineRolloutsLandAsScheduler plays the engine's simulated rollout of
// a Deployment of the pending pod's template (2 to 4 replicas, none
// running yet) on a tenth of the scoring scenarios (2,000 by default), half
// of the template's pods of the namespace made terminating: the pods the
// Deployment's last rollout leaves. Step by step, kube-scheduler is given
// the cluster as the engine holds it then (the terminating pods while the
// first pods are created, the replicas placed before) and must find the
// node the engine placed the step's pod on among its best set, the same
// best set, or no node where the engine leaves the pod Pending.
func TestEngineRolloutsLandAsScheduler(t *testing.T) {
	cases, first := settings(t)
	cases = max(cases/10, 1)
	sp := scoringProfiles()[0]
	s, err := newProfileScheduler(t.Context().Done(), sp)
	if err != nil {
		t.Fatal(err)
	}
	ran, steps, beside, agreed, shown := 0, 0, 0, 0, 0
	for k := range cases {
		seed := uint64(first + k)
		sc := generateScoring(seed)
		w, leaving, ok := rolloutOf(sc, seed)
		if !ok {
			continue
		}
		es, err := sc.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		es.SetProfiles(sp.engine)
		r, err := es.SimulateRollout(w)
		if err != nil {
			t.Fatalf("seed %d: the engine: %v", seed, err)
		}
		ran++
		template := sc.pending
		firstWave := true
		for _, st := range r.Steps {
			if st.Action != placement.StepCreate && firstWave {
				// The controller goes on once its first pods run: the
				// pods being deleted are gone by then.
				firstWave = false
				sc.existing = slices.DeleteFunc(sc.existing, func(p *corev1.Pod) bool { return leaving[p.UID] })
			}
			if st.Action == placement.StepDelete {
				continue
			}
			pod, rs := rolloutPod(template, st.Pod)
			sc.pending = pod
			sc.replicaSets = appendOnce(sc.replicaSets, rs)
			v, err := s.land(sc)
			if err != nil {
				t.Fatalf("seed %d step %s: kube-scheduler: %v", seed, st.Pod, err)
			}
			steps++
			if firstWave && len(leaving) > 0 {
				beside++
			}
			engine := append([]string{}, st.Tied...)
			if st.Node != "" {
				engine = append(engine, st.Node)
			}
			slices.Sort(engine)
			if slices.Equal(v.best, engine) {
				agreed++
			} else if shown++; shown <= 8 {
				t.Logf("seed %d step %s %s (terminating pods present: %v): kube-scheduler's best %v, the engine's %v", seed, st.Action, st.Pod, firstWave && len(leaving) > 0, v.best, engine)
			}
			if st.Node != "" {
				bound := pod.DeepCopy()
				bound.Spec.NodeName = st.Node
				bound.Status.Phase = corev1.PodRunning
				sc.existing = append(sc.existing, bound)
			}
		}
	}
	t.Logf("%d rollouts, %d steps (%d of them beside the workload's terminating pods): best sets agreed on %d", ran, steps, beside, agreed)
	if beside == 0 {
		t.Error("no step was placed beside terminating pods: the sequences do not test them")
	}
	if agreed != steps {
		t.Errorf("best sets agreed on %d of %d steps", agreed, steps)
	}
}

// rolloutOf is the Deployment of the scenario's pending pod and the pods
// its last rollout leaves terminating: about half of the existing pods of
// its app in its namespace. Scenarios the sequence cannot replay as the
// engine does (claims, gates, a pod without an app) are left out.
func rolloutOf(sc *scenario, seed uint64) (*placement.Workload, map[types.UID]bool, bool) {
	p := sc.pending
	app, ok := p.Labels["app"]
	if !ok || len(sc.claims) > 0 || len(p.Spec.SchedulingGates) > 0 || len(p.Spec.ResourceClaims) > 0 {
		return nil, nil, false
	}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return nil, nil, false
		}
	}
	r := rand.New(rand.NewPCG(seed, 4242))
	selector := map[string]string{"app": app}
	leaving := map[types.UID]bool{}
	for _, e := range sc.existing {
		if e.Namespace != p.Namespace || !labels.SelectorFromSet(selector).Matches(labels.Set(e.Labels)) {
			continue
		}
		if e.DeletionTimestamp == nil && r.IntN(2) == 0 {
			e.DeletionTimestamp = ptr.To(metav1.Now())
		}
		if e.DeletionTimestamp != nil {
			leaving[e.UID] = true
		}
	}
	w := &placement.Workload{Kind: pgv1.KindDeployment, Namespace: p.Namespace, Name: rolloutName, Replicas: int32(2 + r.IntN(3)),
		Selector: &metav1.LabelSelector{MatchLabels: selector},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels}, Spec: p.Spec}}
	return w, leaving, true
}

// rolloutPod is the rollout's pod named name as the ReplicaSet controller
// makes it: the template's, with the new revision's pod-template-hash and
// owned by that revision's ReplicaSet, which the system default spread
// reads; admitted as the API server admits it.
func rolloutPod(template *corev1.Pod, name string) (*corev1.Pod, *appsv1.ReplicaSet) {
	hash, _, _ := strings.Cut(strings.TrimPrefix(name, rolloutName+"-"), "-")
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: template.Namespace, Name: rolloutName + "-" + hash, UID: types.UID(template.Namespace + "-" + rolloutName + "-" + hash)},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": template.Labels["app"], appsv1.DefaultDeploymentUniqueLabelKey: hash}}}}
	p := template.DeepCopy()
	p.Name, p.UID = name, types.UID(fmt.Sprintf("%s/%s", template.Namespace, name))
	p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	admit(p)
	return p, rs
}

// appendOnce adds rs unless a ReplicaSet of its name is there.
func appendOnce(sets []*appsv1.ReplicaSet, rs *appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	for _, s := range sets {
		if s.Namespace == rs.Namespace && s.Name == rs.Name {
			return sets
		}
	}
	return append(sets, rs)
}

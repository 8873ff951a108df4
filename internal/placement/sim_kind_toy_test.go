package placement

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A kind is its files. The toy kind below is written here and nowhere
// else: its controller deletes every old pod before it creates a new one
// (a replace-all), its pods carry no revision label, and its rollout has
// no end state to search. Registered, it goes through the engine's whole
// question (rollout, hazards, capacity, the constraint written into its
// template) with nothing else in the engine told of it.
const toyKind = pgv1.WorkloadKind("ToyReplaceAll")

type toyRollouts struct{}

func (toyRollouts) simulate(s *Snapshot, w *Workload, old, leaving []podID) (Rollout, error) {
	template := newRevisionPod(w, w.Name+"-next")
	pl, err := s.newPlacer(w, template)
	if err != nil {
		return Rollout{}, err
	}
	defer pl.release()
	var r Rollout
	pl.forget(leaving)
	for _, id := range old {
		r.Recreates = append(r.Recreates, s.pods[id].name)
		pl.remove(id)
		r.Steps = append(r.Steps, Step{Action: StepDelete, Pod: s.pods[id].name})
	}
	for k := range int(w.Replicas) {
		name := w.Name + "-next-" + string(rune('a'+k))
		i := pl.place(template)
		if i < 0 {
			v := pl.e.verdict()
			r.Steps = append(r.Steps, Step{Action: StepCreate, Pod: name})
			r.Blocked, r.BlockedPod = &v, name
			return r, nil
		}
		r.Steps = append(r.Steps, pl.step(StepCreate, name, i))
	}
	r.Completes = true
	return r, nil
}

func (toyRollouts) rolledPod(_ *Snapshot, w *Workload, name string) (*corev1.Pod, error) {
	return newRevisionPod(w, name), nil
}
func (toyRollouts) newRevision() (string, string) { return "", "" }
func (toyRollouts) searchTemplate(_ *Snapshot, w *Workload) *corev1.Pod {
	return newRevisionPod(w, w.Name+"-next")
}
func (toyRollouts) searched(*Workload) bool                       { return false }
func (toyRollouts) startSearch(*explorer) error                   { return nil }
func (toyRollouts) search(*explorer)                              {}
func (toyRollouts) scopesSpreadToRevision() bool                  { return false }
func (toyRollouts) surgeLimits(*Workload) (int, int, bool, error) { return 0, 0, false, nil }
func (toyRollouts) replaced() string                              { return "every pod, all at once" }
func (toyRollouts) spreadFix(Constraint) string                   { return softSpreadFix }
func (toyRollouts) overlapFix() string                            { return releaseLabelFix }

// withToyKind registers the toy kind for one test.
func withToyKind(t *testing.T) {
	t.Helper()
	kinds[toyKind] = toyRollouts{}
	t.Cleanup(func() { delete(kinds, toyKind) })
}

// Seed 001's deadlock is a Deployment's: hard hostname anti-affinity with
// replicas == nodes never lets a surge pod in. The same pods under a kind
// that replaces all of them at once roll out, each new pod on a node of
// its own; the kind's controller, known only to its file, decides.
func TestAKindIsItsFiles(t *testing.T) {
	withToyKind(t)
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("n1"), mkNode("n2"), mkNode("n3")},
		Pods: []*corev1.Pod{
			mkPod("ns", "web-1", on("n1"), withLabels("app", "web")),
			mkPod("ns", "web-2", on("n2"), withLabels("app", "web")),
			mkPod("ns", "web-3", on("n3"), withLabels("app", "web")),
		},
	}
	apart := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}
	ask := func(kind pgv1.WorkloadKind) Answer {
		w := withSelector(deployment(objs, "web", 3, appsv1.DeploymentStrategy{}))
		w.Kind = kind
		return analyze(t, objs, Question{Workloads: []*Workload{w}, Constraint: apart, Stage: pgv1.StageHard})
	}

	if a := ask(pgv1.KindDeployment); a.FirstBlocking() == nil || a.FirstBlocking().Type != HazardRolloutDeadlock {
		t.Fatalf("the Deployment deadlocks (seed 001), got %+v", a.Hazards)
	}

	a := ask(toyKind)
	if b := a.Blocking(); len(b) > 0 {
		t.Fatalf("the replace-all kind rolls out, got %+v", b)
	}
	ref := pgv1.TargetRef{Kind: toyKind, Name: "web"}
	r, ok := a.Rollouts[ref]
	if !ok || !r.Completes {
		t.Fatalf("rollout of the toy kind: %+v (all: %v)", r, a.Rollouts)
	}
	var nodes []string
	for _, st := range r.Steps {
		if st.Action == StepCreate {
			nodes = append(nodes, st.Node)
		}
	}
	slices.Sort(nodes)
	if !slices.Equal(nodes, []string{"n1", "n2", "n3"}) {
		t.Errorf("each new pod on a node of its own, got %v (%+v)", nodes, r.Steps)
	}
	if tmpl := a.Templates[ref]; tmpl == nil || tmpl.Affinity == nil || tmpl.Affinity.PodAntiAffinity == nil {
		t.Errorf("the constraint is written into the toy kind's template: %+v", tmpl)
	}
	for _, p := range []*corev1.Pod{newRevisionPod(&Workload{Kind: toyKind, Name: "web"}, "p")} {
		if _, has := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; has {
			t.Errorf("the toy kind's pods carry no revision label: %v", p.Labels)
		}
	}
}

package schedulerfidelity

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestEngineScoresSequencesAsScheduler places 2 to 5 replicas of the
// pending pod of a tenth of the scoring scenarios (2,000 by default) one
// after another, as a rollout or a scale-up does: each step compares the two best sets, then binds the
// replica on both sides to the first node of kube-scheduler's best set,
// so that the next step sees it. Every step counts, and must agree.
func TestEngineScoresSequencesAsScheduler(t *testing.T) {
	cases, first := settings(t)
	cases = max(cases/10, 1)
	for _, sp := range scoringProfiles() {
		t.Run(sp.name, func(t *testing.T) {
			s, err := newProfileScheduler(t.Context().Done(), sp)
			if err != nil {
				t.Fatal(err)
			}
			steps, agreed, shown := 0, 0, 0
			for k := range cases {
				seed := uint64(first + k)
				sc := generateScoring(seed)
				template := sc.pending
				for step := range 2 + int(seed%4) {
					v, err := s.land(sc)
					if err != nil {
						t.Fatalf("seed %d step %d: kube-scheduler: %v", seed, step, err)
					}
					if len(v.best) == 0 {
						break
					}
					got, err := engineLanding(sc, sp.engine)
					if err != nil {
						t.Fatalf("seed %d step %d: the engine: %v", seed, step, err)
					}
					steps++
					if slices.Equal(v.best, got) {
						agreed++
					} else if shown++; shown <= 8 {
						t.Logf("seed %d step %d: kube-scheduler's best %v, the engine's %v", seed, step, v.best, got)
					}
					sc.existing = append(sc.existing, replica(template, step, v.best[0]))
					sc.pending = template
				}
			}
			t.Logf("profile %s: %d scenarios, %d steps: best sets agreed on %d (%.2f %%)", sp.name, cases, steps, agreed, 100*float64(agreed)/float64(max(steps, 1)))
			if agreed != steps {
				t.Errorf("profile %s: best sets agreed on %d of %d steps", sp.name, agreed, steps)
			}
		})
	}
}

// replica is the template's pod number step, bound to node and running.
func replica(template *corev1.Pod, step int, node string) *corev1.Pod {
	p := template.DeepCopy()
	p.Name = fmt.Sprintf("%s-%d", template.Name, step)
	p.UID = types.UID(fmt.Sprintf("%s-replica-%d", template.UID, step))
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	return p
}

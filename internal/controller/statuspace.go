package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// progressRefresh is how often, at most, a migration's status is written
// when all that changed is the wording of its progress: which pods a
// rollout still waits for, how far the pod view has come, how long a soak
// has left. A milestone, a new reason or any other change is written at
// once; a progress message waits until its migration's last status write
// is this old, and is then written if it still differs. A rollout that
// moves on needs no word for each pod (its Deployment says that), and
// one that stops moving stops rewording itself: within this long, the
// status names exactly what it waits for.
const progressRefresh = time.Minute

// progressReasons are the reasons under which a condition's message
// reports progress and changes while the reason stays. Messages under any
// other reason (why a stage is blocked, which pods are Pending, what a
// disruption would strand) are a person's diagnosis: they are written at
// once.
var progressReasons = map[string]bool{
	pgv1.ReasonRolloutInProgress: true,
	pgv1.ReasonWaitingForPodView: true,
	pgv1.ReasonWaitingForPods:    true,
	pgv1.ReasonSoaking:           true,
}

// statusPace remembers when each migration's status was last written, so
// that a write of progress alone is paced (progressRefresh). It is kept in
// memory: after a restart the first change is written at once.
type statusPace struct {
	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
	// settling is when each migration's success was first held for
	// its targets' leaving pods (settleWait).
	settling map[types.NamespacedName]time.Time
}

// hold is how long a status change from before to after waits: zero for
// a change beyond the progress messages, or when key's last write is
// progressRefresh old or older.
func (p *statusPace) hold(key types.NamespacedName, before, after *pgv1.PlacementMigrationStatus, now time.Time) time.Duration {
	if !onlyProgress(before, after) {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[key]
	if !ok {
		return 0
	}
	return max(0, last.Add(progressRefresh).Sub(now))
}

// wrote records a status write of key at now.
func (p *statusPace) wrote(key types.NamespacedName, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[types.NamespacedName]time.Time{}
	}
	p.last[key] = now
	delete(p.settling, key)
}

// forget drops what was remembered of a migration that is gone.
func (p *statusPace) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, key)
	delete(p.settling, key)
}

// firstWordGrace is how long a new migration may wait for its view of its
// targets' pods to catch up before its status says that it waits: one
// created in the same apply as its workload sees the workload's pods
// within a moment, and its first word is then what it does about them.
const firstWordGrace = 2 * time.Second

// firstWordWait is how long a migration's first status (nothing was
// written before) waits, when all it would say is that its view of the
// pods is catching up (no cause known): until the migration is
// firstWordGrace old. A gap with a cause, such as a quota the workload's
// controller names, is said at once.
func firstWordWait(before *pgv1.PlacementMigrationStatus, catchingUp bool, created, now time.Time) time.Duration {
	if !catchingUp || len(before.Conditions) > 0 {
		return 0
	}
	return max(0, created.Add(firstWordGrace).Sub(now))
}

// settleGrace is how long, at most, a migration's success waits for the
// pods its last rollout deleted to be gone: the scheduler counts them
// until then, so the DisruptionReady verdict is drawn after them, and the
// success written with its verdict is one status write instead of two.
// Pods usually go within seconds; one held longer (a long grace period,
// a finalizer) delays the success by this much, and no more.
const settleGrace = 10 * time.Second

// settleWait is how long the status that ends a migration waits while its
// targets' pods are only leaving (settling): until settleGrace after the
// first pass that held it. A migration already succeeded, or a status
// that does not end one, waits for nothing.
func (p *statusPace) settleWait(key types.NamespacedName, before, after *pgv1.PlacementMigrationStatus, settling bool, now time.Time) time.Duration {
	if !settling || after.Phase != pgv1.PhaseSucceeded || before.Phase == pgv1.PhaseSucceeded {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	since, ok := p.settling[key]
	if !ok {
		if p.settling == nil {
			p.settling = map[types.NamespacedName]time.Time{}
		}
		since, p.settling[key] = now, now
	}
	return max(0, since.Add(settleGrace).Sub(now))
}

// onlyProgress reports whether after differs from before in nothing but
// the messages of conditions that keep a progress reason.
func onlyProgress(before, after *pgv1.PlacementMigrationStatus) bool {
	if len(before.Conditions) != len(after.Conditions) {
		return false
	}
	b, a := *before, *after
	b.Conditions = append([]metav1.Condition(nil), before.Conditions...)
	a.Conditions = append([]metav1.Condition(nil), after.Conditions...)
	differs := false
	for i := range a.Conditions {
		bc, ac := &b.Conditions[i], &a.Conditions[i]
		if bc.Message == ac.Message {
			continue
		}
		if bc.Type != ac.Type || bc.Reason != ac.Reason || !progressReasons[ac.Reason] {
			return false
		}
		bc.Message, differs = ac.Message, true
	}
	return differs && equality.Semantic.DeepEqual(b, a)
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// writes is what the settled migrations asked of the API server, from
// their creation to the churn's end: each write to a migration, split
// into those that changed its status and the others (finalizers,
// annotations), and each write to its Deployment's spec. The Deployment
// controller's status writes are not the operator's and are left out.
type writes struct {
	// about says which migrations, and over what span; the settled
	// migrations' when empty.
	about                     string
	status, other, deployment []int
	// trail is what each status write of the migration with the most
	// changed, and how long after the write before it (or the migration's
	// creation) it came: where the writes go, and how close together.
	trail []string
	// succeeded is how long each migration that succeeded took, from its
	// creation to the write of phase Succeeded.
	succeeded []time.Duration
	// conflicts are the manager's requests refused with 409 meanwhile:
	// two of its writers, or it and another, on one object.
	conflicts float64
}

func (w writes) markdown() string {
	var b strings.Builder
	about := w.about
	if about == "" {
		about = "migrations (a soft hostname anti-affinity on a two-replica Deployment each), from their creation to the churn's end"
	}
	fmt.Fprintf(&b, "\nWrites of %d %s:\n\n", len(w.status), about)
	b.WriteString("| figure | a migration, mean | min | max |\n|---|---|---|---|\n")
	row := func(name string, counts []int) {
		if len(counts) == 0 {
			return
		}
		sum := 0
		for _, n := range counts {
			sum += n
		}
		fmt.Fprintf(&b, "| %s | %.1f | %d | %d |\n", name, float64(sum)/float64(len(counts)), slices.Min(counts), slices.Max(counts))
	}
	row("status writes", w.status)
	row("other writes to the migration", w.other)
	row("writes to its Deployment's spec", w.deployment)
	if len(w.succeeded) > 0 {
		var sum time.Duration
		for _, d := range w.succeeded {
			sum += d
		}
		round := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
		fmt.Fprintf(&b, "| creation to Succeeded (%d of %d) | %s | %s | %s |\n", len(w.succeeded), len(w.status),
			round(sum/time.Duration(len(w.succeeded))), round(slices.Min(w.succeeded)), round(slices.Max(w.succeeded)))
	}
	fmt.Fprintf(&b, "| the manager's requests refused with 409 (conflict), in all | %.0f | | |\n", w.conflicts)
	if len(w.trail) > 0 {
		b.WriteString("\nThe status writes of the migration with the most, each with what it changed and how long after the write before it:\n\n")
		for i, t := range w.trail {
			fmt.Fprintf(&b, "%d. %s\n", i+1, t)
		}
	}
	return b.String()
}

// writeWatch counts every write to a set of migrations and to their
// Deployments as the API server's watches report them: a write that
// changes nothing is not one, as the API server stores nothing for it.
type writeWatch struct {
	mu         sync.Mutex
	keys       map[types.NamespacedName]bool
	lastStatus map[types.NamespacedName]string
	generation map[types.NamespacedName]int64
	status     map[types.NamespacedName]int
	trails     map[types.NamespacedName][]string
	lastAt     map[types.NamespacedName]time.Time
	createdAt  map[types.NamespacedName]time.Time
	succeeded  map[types.NamespacedName]time.Duration
	other      map[types.NamespacedName]int
	deployment map[types.NamespacedName]int
	stops      []func()
	stopped    atomic.Bool
	ended      chan error
}

// watchWrites starts counting the writes to the migrations named by keys
// and to the Deployments of the same names, before any of them exists.
func watchWrites(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, keys []client.ObjectKey) (*writeWatch, error) {
	c, err := benchClient(cfg)
	if err != nil {
		return nil, err
	}
	migrations, err := c.Watch(ctx, &pgv1.PlacementMigrationList{})
	if err != nil {
		return nil, fmt.Errorf("watch the migrations: %w", err)
	}
	deployments, err := cs.AppsV1().Deployments("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		migrations.Stop()
		return nil, fmt.Errorf("watch the Deployments: %w", err)
	}
	return countWrites(keys, migrations, deployments), nil
}

// countWrites counts the writes two watches report, of the migrations
// and of the Deployments, to the objects named by keys.
func countWrites(keys []client.ObjectKey, migrations, deployments watch.Interface) *writeWatch {
	w := &writeWatch{
		keys:       map[types.NamespacedName]bool{},
		lastStatus: map[types.NamespacedName]string{},
		generation: map[types.NamespacedName]int64{},
		status:     map[types.NamespacedName]int{},
		trails:     map[types.NamespacedName][]string{},
		lastAt:     map[types.NamespacedName]time.Time{},
		createdAt:  map[types.NamespacedName]time.Time{},
		succeeded:  map[types.NamespacedName]time.Duration{},
		other:      map[types.NamespacedName]int{},
		deployment: map[types.NamespacedName]int{},
		ended:      make(chan error, 2),
		stops:      []func(){migrations.Stop, deployments.Stop},
	}
	for _, k := range keys {
		w.keys[k] = true
	}
	go w.follow("migrations", migrations, w.migrationEvent)
	go w.follow("Deployments", deployments, w.deploymentEvent)
	return w
}

// follow hands each event to count until the watch is stopped; a watch
// the API server ends early would undercount, so it is reported.
func (w *writeWatch) follow(what string, ws watch.Interface, count func(watch.Event) error) {
	for ev := range ws.ResultChan() {
		if w.stopped.Load() {
			// Stopping closes the stream under the decoder, which may
			// report that as an error: nothing after it is counted.
			continue
		}
		if ev.Type == watch.Error {
			w.ended <- fmt.Errorf("the watch of the %s failed: %v", what, ev.Object)
			return
		}
		if err := count(ev); err != nil {
			w.ended <- err
			return
		}
	}
	if !w.stopped.Load() {
		w.ended <- fmt.Errorf("the API server ended the watch of the %s early: writes after it are not counted", what)
		return
	}
	w.ended <- nil
}

func (w *writeWatch) migrationEvent(ev watch.Event) error {
	pm, ok := ev.Object.(*pgv1.PlacementMigration)
	if !ok {
		return fmt.Errorf("a migration's watch sent a %T", ev.Object)
	}
	key := types.NamespacedName{Namespace: pm.Namespace, Name: pm.Name}
	raw, err := json.Marshal(pm.Status)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.keys[key] {
		return nil
	}
	status, now := string(raw), time.Now()
	switch {
	case ev.Type == watch.Added:
		w.lastAt[key], w.createdAt[key] = now, now
	case ev.Type == watch.Modified && status != w.lastStatus[key]:
		w.status[key]++
		w.trails[key] = append(w.trails[key], fmt.Sprintf("%s (%s after the one before)", statusChange(w.lastStatus[key], status), now.Sub(w.lastAt[key]).Round(100*time.Millisecond)))
		w.lastAt[key] = now
	case ev.Type == watch.Modified:
		w.other[key]++
	}
	w.lastStatus[key] = status
	if _, done := w.succeeded[key]; !done && pm.Status.Phase == pgv1.PhaseSucceeded && !w.createdAt[key].IsZero() {
		w.succeeded[key] = now.Sub(w.createdAt[key])
	}
	return nil
}

func (w *writeWatch) deploymentEvent(ev watch.Event) error {
	d, ok := ev.Object.(*appsv1.Deployment)
	if !ok {
		return fmt.Errorf("a Deployment's watch sent a %T", ev.Object)
	}
	key := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.keys[key] {
		return nil
	}
	if ev.Type == watch.Modified && d.Generation != w.generation[key] {
		w.deployment[key]++
	}
	w.generation[key] = d.Generation
	return nil
}

// stop ends the watches and returns the counts, one per migration.
func (w *writeWatch) stop() (writes, error) {
	w.stopped.Store(true)
	for _, s := range w.stops {
		s()
	}
	errs := []error{<-w.ended, <-w.ended}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out writes
	for key := range w.keys {
		if len(w.trails[key]) > len(out.trail) {
			out.trail = w.trails[key]
		}
		out.status = append(out.status, w.status[key])
		out.other = append(out.other, w.other[key])
		out.deployment = append(out.deployment, w.deployment[key])
		if d, ok := w.succeeded[key]; ok {
			out.succeeded = append(out.succeeded, d)
		}
	}
	return out, errors.Join(errs...)
}

// statusChange says what a status write changed: the phase it moved to,
// the conditions whose status or reason changed, and the other fields.
func statusChange(before, after string) string {
	var b, a map[string]json.RawMessage
	_ = json.Unmarshal([]byte(before), &b)
	_ = json.Unmarshal([]byte(after), &a)
	var parts []string
	if string(b["phase"]) != string(a["phase"]) {
		parts = append(parts, "phase "+strings.Trim(string(a["phase"]), `"`))
	}
	if changed := changedConditions(b["conditions"], a["conditions"]); len(changed) > 0 {
		parts = append(parts, "conditions "+strings.Join(changed, ", "))
	}
	var fields []string
	for k := range a {
		if k != "phase" && k != "conditions" && string(a[k]) != string(b[k]) {
			fields = append(fields, k)
		}
	}
	for k := range b {
		if _, kept := a[k]; !kept {
			fields = append(fields, k+" (removed)")
		}
	}
	slices.Sort(fields)
	if len(fields) > 0 {
		parts = append(parts, strings.Join(fields, ", "))
	}
	if len(parts) == 0 {
		// Neither a phase, nor a condition's status or reason, nor
		// another field: what is left are the conditions' messages.
		return "condition messages only"
	}
	return strings.Join(parts, "; ")
}

// changedConditions names the conditions whose status or reason changed,
// as Type=Status/Reason.
func changedConditions(before, after json.RawMessage) []string {
	type condition struct{ Type, Status, Reason string }
	var b, a []condition
	_ = json.Unmarshal(before, &b)
	_ = json.Unmarshal(after, &a)
	was := map[string]condition{}
	for _, c := range b {
		was[c.Type] = c
	}
	var out []string
	for _, c := range a {
		if old, ok := was[c.Type]; !ok || old.Status != c.Status || old.Reason != c.Reason {
			out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
	}
	return out
}

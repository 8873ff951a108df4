package namespacemode

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// unknownMode reads placementguard_admission_namespace_mode_unknown for a
// namespace: 1, or 0 when the series is absent.
func unknownMode(t *testing.T, ns string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "placementguard_admission_namespace_mode_unknown" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == ns {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// A label that names no mode is told once per change, as a Warning Event
// and a metric; a label fixed, removed or naming a mode clears the metric;
// a namespace that is gone leaves no series behind. Nothing real is at
// stake in reading one namespace, so a fake client stands in for the API
// server.
func TestUnknownModeIsToldAndCleared(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "payments", Labels: map[string]string{pgv1.AdmissionLabel: "Denny"}}}
	c := fake.NewClientBuilder().WithObjects(ns).Build()
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Recorder: recorder}
	ctx := context.Background()
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "payments"}}); err != nil {
			t.Fatal(err)
		}
	}
	relabel := func(value string, set bool) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
			t.Fatal(err)
		}
		delete(ns.Labels, pgv1.AdmissionLabel)
		if set {
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[pgv1.AdmissionLabel] = value
		}
		if err := c.Update(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}

	reconcile()
	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, "Warning "+ReasonUnknownAdmissionMode) || !strings.Contains(e, `"Denny"`) || !strings.Contains(e, "as Warn") {
			t.Errorf("event %q", e)
		}
	default:
		t.Fatal("no event for a label that names no mode")
	}
	if got := unknownMode(t, "payments"); got != 1 {
		t.Errorf("metric %v for Denny, want 1", got)
	}

	for _, tc := range []struct {
		value string
		set   bool
	}{{"Deny", true}, {"", false}, {"off", true}} {
		relabel(tc.value, tc.set)
		reconcile()
		want := 0.0
		if tc.set && tc.value == "off" {
			want = 1 // modes are spelt as the docs spell them
		}
		if got := unknownMode(t, "payments"); got != want {
			t.Errorf("label %q (set %v): metric %v, want %v", tc.value, tc.set, got, want)
		}
	}

	if err := c.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if got := unknownMode(t, "payments"); got != 0 {
		t.Errorf("a deleted namespace keeps its series: %v", got)
	}
	if n := len(recorder.Events); n != 1 {
		t.Errorf("%d more events, want one for the second unknown label", n)
	}
}

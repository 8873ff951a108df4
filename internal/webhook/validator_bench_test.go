package webhook

import (
	"bytes"
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"

	pgadmission "github.com/placement-guard/placement-guard/internal/admission"
)

// BenchmarkImageChange is the common request: a change that touches no
// placement field of a workload carrying a hard constraint, answered
// without asking the engine (docs/performance.md: ≤ 50 µs).
func BenchmarkImageChange(b *testing.B) {
	t := &testing.T{}
	v, _ := validator(t, "Deny", pgadmission.ModeDeny)
	req := request(t, admissionv1.Update, web(apart), web(apart, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "x:2" }), "")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := v.Handle(ctx, req); !resp.Allowed {
			b.Fatal("refused")
		}
	}
}

// BenchmarkSeed001 is a judged request: seed 001's shape on two nodes.
func BenchmarkSeed001(b *testing.B) {
	t := &testing.T{}
	v, _ := validator(t, "Deny", pgadmission.ModeDeny)
	req := request(t, admissionv1.Update, web(), web(apart), "")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := v.Handle(ctx, req); resp.Allowed {
			b.Fatal("admitted")
		}
	}
}

// BenchmarkImageChangeServed is BenchmarkImageChange with the Deployment
// as the API server sends it: managed fields, status and kubectl's
// last-applied annotation, three times the bytes, all of them skipped.
func BenchmarkImageChangeServed(b *testing.B) {
	t := &testing.T{}
	v, _ := validator(t, "Deny", pgadmission.ModeDeny)
	old := servedDeployment(b)
	changed := bytes.Replace(old, []byte(`"image":"`), []byte(`"image":"2`), 1)
	if bytes.Equal(old, changed) {
		b.Fatal("no image changed")
	}
	req := request(t, admissionv1.Update, web(apart), web(apart), "")
	req.Object.Raw, req.OldObject.Raw = changed, old
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := v.Handle(ctx, req); !resp.Allowed {
			b.Fatal("refused")
		}
	}
}

package schedulerfidelity

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A pod with several claims: VolumeBinding judges the bound and the
// unbound ones both and gives a node one reason for each that fails, which
// the FitError counts (an independent comparison found the counts of
// "didn't find available persistent volumes to bind" differing). The
// generated scenarios give a pod one claim; these give the pending pod one
// or two more, WaitForFirstConsumer, of the static and the zonal class.
func TestSeveralClaimsGiveEveryReason(t *testing.T) {
	s, err := newScheduler(t.Context().Done())
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for seed := uint64(1); seed <= 3000; seed++ {
		sc := generate(seed)
		p := sc.pending
		for i, class := range []string{classLocal, classZonal} {
			name := fmt.Sprintf("extra-%d", i)
			c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: name},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
					StorageClassName: ptr.To(class)}}
			if seed%3 == uint64(i) {
				continue
			}
			sc.claims = append(sc.claims, c)
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
		}
		c, err := compare(s, sc)
		if err != nil {
			t.Fatal(err)
		}
		if !c.sameNodes() || !c.sameMessage() {
			bad++
			if bad <= 5 {
				t.Errorf("seed %d: %s", seed, c)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of 3000 scenarios disagree", bad)
	}
}

package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Every kind the engine reads makes its own empty object and list, is
// collected into Objects and indexed by the snapshot; other kinds are
// left alone.
func TestEveryObjectKindIsReadOneWay(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range ObjectKinds {
		if seen[k.Resource] {
			t.Errorf("%s listed twice", k.Resource)
		}
		seen[k.Resource] = true
		obj := k.New()
		if obj == nil || !meta.IsListType(k.NewList()) {
			t.Fatalf("%s: New %T, NewList %T", k.Resource, obj, k.NewList())
		}
		if got := KindOfObject(obj); got == nil || got.Resource != k.Resource {
			t.Errorf("%s: an empty object is taken for %v", k.Resource, got)
		}
	}
	var objs Objects
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}}
	for _, o := range []runtime.Object{node, sc} {
		if !objs.Collect(o) {
			t.Errorf("%T not collected", o)
		}
	}
	if objs.Collect(&corev1.ConfigMap{}) {
		t.Error("a ConfigMap was collected")
	}
	if len(objs.Nodes) != 1 || len(objs.StorageClasses) != 1 {
		t.Fatalf("collected %+v", objs)
	}
	s, err := NewSnapshot(Objects{})
	if err != nil {
		t.Fatal(err)
	}
	k := KindOfObject(sc)
	if err := k.Upsert(s, sc); err != nil || s.storageClasses["fast"] == nil {
		t.Fatalf("upsert: %v", err)
	}
	k.Delete(s, sc)
	if s.storageClasses["fast"] != nil {
		t.Error("the storage class stayed after its delete")
	}
}

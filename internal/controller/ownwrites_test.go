package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// A migration the cache returns at a version one of the reconciler's own
// writes replaced is behind; at the version written, or any other, it is
// not, and what was remembered of it goes. Migrations are told apart.
func TestOwnWritesTellACacheBehindThem(t *testing.T) {
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	var w ownWrites
	if w.behind(a, "10") {
		t.Fatal("behind before any write")
	}
	w.wrote(a, "10", "11") // the finalizer
	w.wrote(a, "11", "12") // the status
	w.wrote(a, "12", "12") // a status write the API server stored as it was
	for _, rv := range []string{"10", "11"} {
		if !w.behind(a, rv) {
			t.Errorf("version %s, replaced by a write, is not behind", rv)
		}
	}
	if w.behind(b, "10") {
		t.Error("another migration at a replaced version number is behind")
	}
	if w.behind(a, "12") {
		t.Error("the version written, or a write that changed nothing, is behind")
	}
	if w.behind(a, "10") {
		t.Error("a replaced version is still remembered once the cache has moved past it")
	}
	w.wrote(b, "20", "21")
	w.forget(b)
	if w.behind(b, "20") {
		t.Error("a forgotten migration is behind")
	}
}

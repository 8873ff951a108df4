package placement

import "strconv"

// The end-state search's steps through a StatefulSet's rollout: one pod
// replaced at a time, from the highest ordinal down.

// visitStatefulSet replaces the pods from the highest ordinal down to the
// partition, one at a time, as the StatefulSet controller does: the old
// pod goes, and its successor, with the same name and claims, is placed on
// any node that admits it.
func (x *explorer) visitStatefulSet(ord int) {
	if !x.enter(ord) {
		return
	}
	if ord < x.partition || ord < 0 {
		x.record()
		return
	}
	name := x.w.Name + "-" + strconv.Itoa(ord)
	pod := statefulSetPod(x.s, x.w, ord)
	k, existed := x.oldBy[name]
	if existed {
		x.removeOld(k)
		defer x.restoreOld(k, false)
	}
	x.e.useVolumesOf(pod)
	nodes := x.placements()
	if len(nodes) == 0 && !x.cut {
		x.stuck = true
		return
	}
	for _, i := range nodes {
		x.bindNew(i, pod)
		x.visitStatefulSet(ord - 1)
		x.unbindNew(i, pod)
		x.e.useVolumesOf(pod)
	}
}

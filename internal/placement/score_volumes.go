package placement

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// volumeScore is VolumeBinding's score (StorageCapacityScoring): for a pod
// with claims still to bind, per storage class, how full the volumes a
// node would bind them to would be, or, where none is bound, how much of
// the capacity the driver reports there they would take; on the profile's
// shape, by default the emptier the better. The mean over the classes.
type volumeScore struct {
	e    *evaluator
	line func(utilization int64) int64
}

// newVolumeScore is nil for a profile whose VolumeBinding does not score.
func newVolumeScore(e *evaluator, shape []ShapePoint) *volumeScore {
	if len(shape) == 0 {
		return nil
	}
	return &volumeScore{e: e, line: utilizationLine(shape)}
}

// scores reports whether any node can score other than 0: the pod has
// claims to bind.
func (v *volumeScore) scores() bool { return len(v.e.volumes.delayed) > 0 }

// classUse is what the pod's claims of one class request, and the room
// they would have.
type classUse struct{ requested, capacity int64 }

func (v *volumeScore) score(i int) int64 {
	plan, reason := planDelayedClaims(v.e.volumes.delayed, v.e.volumes.storage, v.e.node(v.e.order[i]))
	if reason != "" {
		return 0
	}
	classes := map[string]*classUse{}
	use := func(class string) *classUse {
		u, ok := classes[class]
		if !ok {
			u = &classUse{}
			classes[class] = u
		}
		return u
	}
	if len(plan.static) > 0 {
		// Volumes it binds: their size against the claims'.
		for _, b := range plan.static {
			u := use(b.volume.Spec.StorageClassName)
			u.requested += storageRequest(b.claim)
			q := b.volume.Spec.Capacity[corev1.ResourceStorage]
			u.capacity += q.Value()
		}
	} else {
		for _, d := range plan.dynamic {
			if d.capacity == nil {
				continue
			}
			u := use(storagehelpers.GetPersistentVolumeClaimClass(d.claim))
			if d.capacity.Capacity != nil {
				u.capacity = d.capacity.Capacity.Value()
			}
			u.requested += storageRequest(d.claim)
		}
	}
	if len(classes) == 0 {
		return 0
	}
	var sum int64
	for _, u := range classes {
		if u.capacity == 0 || u.requested > u.capacity {
			sum += v.line(maxUtilization)
		} else {
			sum += v.line(u.requested * maxUtilization / u.capacity)
		}
	}
	return int64(math.Round(float64(sum) / float64(len(classes))))
}

func storageRequest(c *corev1.PersistentVolumeClaim) int64 {
	q := c.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.Value()
}

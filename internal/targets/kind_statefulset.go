package targets

import (
	"time"

	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
)

// statefulSetKind is a StatefulSet: pods it controls itself, the revision
// in controller-revision-hash, partitioned and OnDelete rollouts, pods
// named and labelled by ordinal. It has no pause.
var statefulSetKind = Kind{
	Name:                  pgv1.KindStatefulSet,
	Resource:              "statefulsets",
	ShortName:             "sts",
	New:                   func() client.Object { return &appsv1.StatefulSet{} },
	NewList:               func() client.ObjectList { return &appsv1.StatefulSetList{} },
	Items:                 func(l client.ObjectList) []client.Object { return items(l.(*appsv1.StatefulSetList).Items) },
	NewApplyConfiguration: func() runtime.ApplyConfiguration { return &appsv1ac.StatefulSetApplyConfiguration{} },
	is:                    func(obj any) bool { _, ok := obj.(*appsv1.StatefulSet); return ok },
	workload: func(obj client.Object, _ []*appsv1.ReplicaSet, pods []*corev1.Pod) *placement.Workload {
		return FromStatefulSet(obj.(*appsv1.StatefulSet), pods)
	},
	progress: func(t *Target, generation int64) Progress {
		return t.statefulSetProgress(max(generation, t.obj.GetGeneration()))
	},
	template: func(obj client.Object) *corev1.PodTemplateSpec { return &obj.(*appsv1.StatefulSet).Spec.Template },
	replicas: func(obj client.Object) **int32 { return &obj.(*appsv1.StatefulSet).Spec.Replicas },
	counts: func(obj client.Object) replicaCounts {
		s := obj.(*appsv1.StatefulSet)
		return countsFrom(s, s.Spec.Replicas, s.Status.Replicas, s.Status.UpdatedReplicas, s.Status.ObservedGeneration)
	},
	shortfall: statefulSetShortfall,
	paused:    func(client.Object) bool { return false },
	partitioned: func(obj client.Object) bool {
		ru := obj.(*appsv1.StatefulSet).Spec.UpdateStrategy.RollingUpdate
		return ru != nil && ru.Partition != nil && *ru.Partition > 0
	},
	podLabels: func(_ *placement.Workload, name string, labels map[string]string) {
		labels[appsv1.StatefulSetPodNameLabel] = name
		if i := strings.LastIndexByte(name, '-'); i >= 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				labels[appsv1.PodIndexLabel] = name[i+1:]
			}
		}
	},
}

// FromStatefulSet builds the Workload of a StatefulSet.
func FromStatefulSet(s *appsv1.StatefulSet, pods []*corev1.Pod) *placement.Workload {
	w := &placement.Workload{
		Kind:                 pgv1.KindStatefulSet,
		Namespace:            s.Namespace,
		Name:                 s.Name,
		Replicas:             replicas(s.Spec.Replicas),
		Selector:             s.Spec.Selector,
		Template:             s.Spec.Template,
		UpdateStrategy:       s.Spec.UpdateStrategy,
		PodManagementPolicy:  s.Spec.PodManagementPolicy,
		VolumeClaimTemplates: s.Spec.VolumeClaimTemplates,
		RevisionLabel:        appsv1.ControllerRevisionHashLabelKey,
		Revision:             s.Status.UpdateRevision,
	}
	for _, p := range pods {
		if controlledBy(p.OwnerReferences, s.UID) {
			w.Pods = append(w.Pods, p.UID)
		}
	}
	return w
}

// statefulSetProgress follows kubectl's StatefulSet status viewer and adds
// what it cannot say: a partitioned rollout is complete once the ordinals
// at or above the partition are updated, and an OnDelete StatefulSet once
// every pod was deleted and came back at the update revision.
func (t *Target) statefulSetProgress(generation int64) Progress {
	s, ref := t.obj.(*appsv1.StatefulSet), t.String()
	want := replicas(s.Spec.Replicas)
	st := s.Status
	if st.ObservedGeneration == 0 || st.ObservedGeneration < generation {
		return Progress{Message: fmt.Sprintf("%s: waiting for the StatefulSet controller to observe generation %d", ref, generation)}
	}
	stuck := t.stuckPod()
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		if st.UpdatedReplicas < want || st.ReadyReplicas < want {
			old := t.podsNotAt(st.UpdateRevision)
			return Progress{StuckPod: stuck, Message: fmt.Sprintf("%s uses the OnDelete update strategy: %d of %d pods run the new revision; each takes it only when deleted (%s)",
				ref, st.UpdatedReplicas, want, brief.FirstFew(old, 3, ", "))}
		}
		return Progress{Done: true, Message: fmt.Sprintf("%s: every pod runs the new revision", ref)}
	}
	if st.ReadyReplicas < want {
		return Progress{StuckPod: stuck, Message: fmt.Sprintf("%s: %d of %d pods Ready", ref, st.ReadyReplicas, want)}
	}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil && *ru.Partition > 0 {
		if st.UpdatedReplicas < want-*ru.Partition {
			return Progress{StuckPod: stuck, Message: fmt.Sprintf("%s: %d of %d pods at or above partition %d updated", ref, st.UpdatedReplicas, want-*ru.Partition, *ru.Partition)}
		}
		return Progress{Done: true, Message: fmt.Sprintf("%s: partitioned rollout complete: the %d pod(s) at or above ordinal %d are updated; ordinals below it keep their template", ref, st.UpdatedReplicas, *ru.Partition)}
	}
	if st.UpdateRevision != st.CurrentRevision {
		return Progress{StuckPod: stuck, Message: fmt.Sprintf("%s: %d of %d pods at revision %s", ref, st.UpdatedReplicas, want, st.UpdateRevision)}
	}
	return Progress{Done: true, Message: fmt.Sprintf("%s: %d of %d pods at revision %s, Ready", ref, st.UpdatedReplicas, want, st.UpdateRevision)}
}

// stuckPod is an OrderedReady StatefulSet's pod that is not Ready and not
// at the update revision: the controller waits for it to become Ready
// before it touches any pod, so it is never replaced by the new template.
func (t *Target) stuckPod() string {
	s := t.obj.(*appsv1.StatefulSet)
	if s.Spec.PodManagementPolicy == appsv1.ParallelPodManagement {
		return ""
	}
	for _, p := range t.Pods {
		if isReady, _ := PodReady(p); p.Labels[appsv1.ControllerRevisionHashLabelKey] != s.Status.UpdateRevision && !isReady {
			return p.Name
		}
	}
	return ""
}

func (t *Target) podsNotAt(revision string) []string {
	var out []string
	for _, p := range t.Pods {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] != revision {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// statefulSetShortfall says why a StatefulSet has fewer pods than it is
// asked for: an OrderedReady one makes the next ordinal only once every
// pod before it is Ready, so a pod that never becomes Ready stops it
// there. Anything else (a quota, a PodSecurity refusal) its controller
// says only in FailedCreate Events.
func statefulSetShortfall(t *Target) (string, time.Time) {
	s := t.obj.(*appsv1.StatefulSet)
	if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		for _, p := range t.Pods {
			if isReady, _ := PodReady(p); !isReady {
				return fmt.Sprintf("pod %s is not Ready, and an OrderedReady StatefulSet makes the next ordinal only once it is", p.Name), p.CreationTimestamp.Time
			}
		}
	}
	return fmt.Sprintf("its controller says why in its FailedCreate Events (kubectl describe statefulset %s): a quota or an admission refusal, most often", s.Name), time.Time{}
}

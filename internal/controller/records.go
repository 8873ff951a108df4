package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// The records of pods the guards compare with. A record summarises every
// pod (count, restarts, a digest of every uid and restart count), lists the
// pods that had restarted with their counts (a pod not listed had none),
// and the first pods by name for people. Nothing is cut silently: past the
// lists' bounds the record says so, and the guards fall back on the
// containers' start times for the pods it does not list.

const (
	maxRestartedListed = 16
	maxPodsListed      = 16
)

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	for _, s := range p.Status.InitContainerStatuses {
		n += s.RestartCount
	}
	return n
}

func observe(p *corev1.Pod) pgv1.PodObservation {
	return pgv1.PodObservation{Name: p.Name, UID: string(p.UID), CreationTimestamp: p.CreationTimestamp, Restarts: restarts(p), NodeName: p.Spec.NodeName}
}

// summaryOf identifies a set of pod incarnations.
func summaryOf(pods []*corev1.Pod) pgv1.PodSetSummary {
	keys := make([]string, 0, len(pods))
	var total int32
	for _, p := range pods {
		r := restarts(p)
		total += r
		keys = append(keys, fmt.Sprintf("%s:%d", p.UID, r))
	}
	sort.Strings(keys)
	sum := sha256.Sum256([]byte(strings.Join(keys, ",")))
	return pgv1.PodSetSummary{Count: int32(len(pods)), Restarts: total, Digest: hex.EncodeToString(sum[:8])}
}

// recordOf records pods observed at now.
func recordOf(pods []*corev1.Pod, now time.Time) *pgv1.PodSetRecord {
	rec := &pgv1.PodSetRecord{PodSetSummary: summaryOf(pods), ObservedAt: metav1.NewTime(now)}
	for _, p := range pods {
		if r := restarts(p); r > 0 {
			if len(rec.Restarted) == maxRestartedListed {
				rec.RestartedIncomplete = true
				continue
			}
			rec.Restarted = append(rec.Restarted, pgv1.PodRestarts{UID: string(p.UID), Restarts: r})
		}
	}
	return rec
}

// protectedRecordOf records the protected pods, the first by name listed;
// pods are in name order.
func protectedRecordOf(pods []*corev1.Pod, now time.Time) *pgv1.ProtectedPodsRecord {
	rec := &pgv1.ProtectedPodsRecord{PodSetRecord: *recordOf(pods, now)}
	for _, p := range pods[:min(len(pods), maxPodsListed)] {
		rec.Pods = append(rec.Pods, observe(p))
	}
	return rec
}

// restartsSince says how many restarts pod p added since the record: its
// recorded count when the record lists it, none when the record is complete
// and the pod existed, and, past an incomplete list, one for a pod whose
// containers (re)started since.
func restartsSince(rec *pgv1.PodSetRecord, p *corev1.Pod) int32 {
	now := restarts(p)
	if rec == nil {
		return 0
	}
	for _, r := range rec.Restarted {
		if r.UID == string(p.UID) {
			return now - r.Restarts
		}
	}
	if !p.CreationTimestamp.Before(&rec.ObservedAt) || !rec.RestartedIncomplete {
		return now
	}
	if now > 0 && planning.LastStart(p).After(rec.ObservedAt.Time) {
		return 1
	}
	return 0
}

// protectedChanged compares the protected pods recorded when the operation
// started with the live ones: a pod gone, recreated or restarted.
func protectedChanged(rec *pgv1.ProtectedPodsRecord, live []*corev1.Pod) string {
	if rec == nil || summaryOf(live) == rec.PodSetSummary {
		return ""
	}
	byName := map[string]*corev1.Pod{}
	for _, p := range live {
		byName[p.Name] = p
	}
	var changes []string
	listed := map[string]bool{}
	for _, o := range rec.Pods {
		listed[o.Name] = true
		p, ok := byName[o.Name]
		switch {
		case !ok:
			changes = append(changes, fmt.Sprintf("%s (uid %s) is gone", o.Name, o.UID))
		case string(p.UID) != o.UID:
			changes = append(changes, fmt.Sprintf("%s was recreated (uid %s, was %s)", o.Name, p.UID, o.UID))
		case restarts(p) != o.Restarts:
			changes = append(changes, fmt.Sprintf("%s restarted (%d restarts, was %d)", o.Name, restarts(p), o.Restarts))
		}
	}
	for _, p := range live {
		if listed[p.Name] {
			continue
		}
		if !p.CreationTimestamp.Before(&rec.ObservedAt) {
			changes = append(changes, fmt.Sprintf("%s was created since %s", p.Name, rec.ObservedAt.UTC().Format(time.RFC3339)))
		} else if restartsSince(&rec.PodSetRecord, p) > 0 {
			changes = append(changes, fmt.Sprintf("%s restarted", p.Name))
		}
	}
	if n := int32(len(live)); n < rec.Count && len(changes) == 0 {
		changes = append(changes, fmt.Sprintf("%d of %d are gone", rec.Count-n, rec.Count))
	}
	if len(changes) == 0 {
		return ""
	}
	sort.Strings(changes)
	return brief.FirstFew(changes, 3, "; ")
}

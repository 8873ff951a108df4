package placement

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Existing pods' required anti-affinity is counted, per domain, against
// the incoming pod's labels and namespace: every pod that carries a term
// is looked at. One judgement asks it for the same template several times
// (the stage's rollout, the fixes it offers), and nothing it reads changes
// until a pod is bound or removed or a node changes, so the snapshot keeps
// the counts per incoming labels and namespace, and each evaluation takes
// a copy it may change.

// existingAntiKey is what the counts depend on of the incoming pod: its
// namespace, its labels and its namespace's labels.
func existingAntiKey(pod *corev1.Pod, nsLabels labels.Set) string {
	var b strings.Builder
	b.WriteString(pod.Namespace)
	for _, set := range []map[string]string{pod.Labels, nsLabels} {
		b.WriteByte(0)
		keys := make([]string, 0, len(set))
		for k := range set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(set[k])
			b.WriteByte(1)
		}
	}
	return b.String()
}

// keepExistingAnti keeps a copy of the counts for key.
func (s *Snapshot) keepExistingAnti(key string, counts existingAntiCounts) {
	if s.existingAnti == nil || len(s.existingAnti) >= maxExistingAnti {
		s.existingAnti = map[string]existingAntiCounts{}
	}
	s.existingAnti[key] = counts.clone()
}

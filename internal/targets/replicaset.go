package targets

import (
	"crypto/sha256"
	"encoding/hex"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// TemplateFingerprintAnnotation holds, on a cached ReplicaSet whose pod
// template was dropped, the fingerprint of that template: what tells which
// ReplicaSet is a Deployment's current revision. The annotation is the
// cache's own; nothing writes it to the API server.
const TemplateFingerprintAnnotation = "placementguard.io/template-fingerprint"

// TrimReplicaSet keeps what the operator reads of a ReplicaSet (identity,
// labels, owners, replicas and status) and replaces its pod template,
// often most of its size and one per revision the Deployment keeps, by
// the template's fingerprint. The informer may hand it a ReplicaSet it
// has trimmed before (a resync, a relist's replace), so a ReplicaSet
// already trimmed is left as it is: fingerprinting its empty template
// would lose which revision it is.
func TrimReplicaSet(rs *appsv1.ReplicaSet) {
	if _, done := rs.Annotations[TemplateFingerprintAnnotation]; done && apiequality.Semantic.DeepEqual(rs.Spec.Template, corev1.PodTemplateSpec{}) {
		return
	}
	fp, ok := templateFingerprint(&rs.Spec.Template)
	if !ok {
		return
	}
	annotations := make(map[string]string, len(rs.Annotations)+1)
	for k, v := range rs.Annotations {
		annotations[k] = v
	}
	annotations[TemplateFingerprintAnnotation] = fp
	rs.Annotations = annotations
	rs.Spec.Template = corev1.PodTemplateSpec{}
}

// templateFingerprint hashes a pod template's wire form without the
// pod-template-hash label. The API server hands out templates in one
// canonical form (defaults applied, quantities canonical), so two
// templates it stores are semantically equal exactly when their wire
// forms are; the generated protobuf encoding writes map entries in key
// order.
func templateFingerprint(t *corev1.PodTemplateSpec) (string, bool) {
	c := *t
	if _, ok := c.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		c.Labels = make(map[string]string, len(t.Labels))
		for k, v := range t.Labels {
			if k != appsv1.DefaultDeploymentUniqueLabelKey {
				c.Labels[k] = v
			}
		}
	}
	raw, err := c.Marshal()
	if err != nil {
		return "", false
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), true
}

// sameTemplate reports whether a ReplicaSet's template is the Deployment's,
// as the Deployment controller finds its new ReplicaSet: equal but for the
// pod-template-hash label the controller adds. A ReplicaSet trimmed by
// TrimReplicaSet is compared by its template's fingerprint.
func sameTemplate(rs *appsv1.ReplicaSet, d *corev1.PodTemplateSpec) bool {
	if fp, ok := rs.Annotations[TemplateFingerprintAnnotation]; ok {
		mine, ok := templateFingerprint(d)
		return ok && fp == mine
	}
	a, b := rs.Spec.Template.DeepCopy(), d.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return apiequality.Semantic.DeepEqual(a, b)
}

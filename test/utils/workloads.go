// Package utils holds helpers shared by the e2e suites: workload builders,
// per-spec namespaces and node pools, and pod queries.
package utils

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// PoolLabel marks the nodes of one spec's pool. Nodes are cluster-scoped, so
// specs that share a cluster keep their pods on their own nodes with it.
const PoolLabel = "e2e.placementguard.io/pool"

// ZoneLabel is the well-known zone label.
const ZoneLabel = "topology.kubernetes.io/zone"

// Deployment returns a Deployment of replicas pods labelled app=name plus
// extra, restricted to the spec's node pool. Its pods request a little CPU
// and memory so the scheduler's resource accounting is exercised.
func Deployment(namespace, name, pool string, replicas int32, extra map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	for k, v := range extra {
		labels[k] = v
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{PoolLabel: pool},
					Containers: []corev1.Container{{
						Name:  "main",
						Image: "registry.invalid/" + name + ":1",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    *resourceQuantity("100m"),
							corev1.ResourceMemory: *resourceQuantity("64Mi"),
						}},
					}},
					// kwok deletes pods at once; keep the grace short anyway.
					TerminationGracePeriodSeconds: ptr.To[int64](1),
				},
			},
		},
	}
}

// RoleDeployment is one pod labelled app=name on the nodes labelled
// role=role: incident 000's search engine, graph DB and broker, as the
// demos and the fleet suite play it.
func RoleDeployment(namespace, name, role string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"role": role},
					Containers: []corev1.Container{{Name: name, Image: "registry.invalid/" + name + ":1", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: *resourceQuantity("500m"), corev1.ResourceMemory: *resourceQuantity("1Gi")},
					}}},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
				},
			},
		},
	}
}

// HostnameAntiAffinity is a required anti-affinity term on the hostname
// against the pods matching labels.
func HostnameAntiAffinity(labels map[string]string) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey:   corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
		}},
	}}
}

// ZoneSpread is a DoNotSchedule zone spread with maxSkew 1 over the pods
// matching labels.
func ZoneSpread(labels map[string]string) []corev1.TopologySpreadConstraint {
	return []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       ZoneLabel,
		WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: labels},
	}}
}

// StatefulSet returns a StatefulSet of replicas pods labelled app=name,
// restricted to the spec's node pool, without volumes, rolled out one pod
// at a time as the default RollingUpdate strategy does.
func StatefulSet(namespace, name, pool string, replicas int32) *appsv1.StatefulSet {
	d := Deployment(namespace, name, pool, replicas, nil)
	return &appsv1.StatefulSet{
		ObjectMeta: d.ObjectMeta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:    d.Spec.Replicas,
			Selector:    d.Spec.Selector,
			Template:    d.Spec.Template,
			ServiceName: name,
		},
	}
}

// Restricted makes a Deployment's pods pass the restricted Pod Security
// Standard, for specs in namespaces that enforce it.
func Restricted(d *appsv1.Deployment) *appsv1.Deployment {
	spec := &d.Spec.Template.Spec
	spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](1000),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for i := range spec.Containers {
		spec.Containers[i].SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
	return d
}

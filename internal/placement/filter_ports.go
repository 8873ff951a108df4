package placement

import corev1 "k8s.io/api/core/v1"

// ReasonNodePorts is NodePorts' reason, word for word.
const ReasonNodePorts = "node(s) didn't have free ports for the requested pod ports"

// wildcardIP is the host IP a port binds when it names none.
const wildcardIP = "0.0.0.0"

// hostPort is one port a pod binds on its node.
type hostPort struct {
	ip       string
	protocol corev1.Protocol
	port     int32
}

// podHostPorts are the host ports a pod holds for as long as it runs: its
// containers' and its sidecars' (restartable init containers'), as
// NodePorts reads them, with the defaults filled in.
func podHostPorts(pod *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(c *corev1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := hostPort{ip: p.HostIP, protocol: p.Protocol, port: p.HostPort}
			if hp.ip == "" {
				hp.ip = wildcardIP
			}
			if hp.protocol == "" {
				hp.protocol = corev1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return out
}

// conflicts reports whether a wanted port collides with one in use: the
// same protocol and port, on the same IP or where either binds every IP.
func (h hostPort) conflicts(used hostPort) bool {
	return h.protocol == used.protocol && h.port == used.port &&
		(h.ip == wildcardIP || used.ip == wildcardIP || h.ip == used.ip)
}

// initPorts counts, per evaluated node, the host ports its pods hold; only
// for a pod that asks for host ports, so that the common pod pays nothing.
func (e *evaluator) initPorts() {
	e.hostPorts = podHostPorts(e.pod)
	if len(e.hostPorts) == 0 {
		return
	}
	e.usedPorts = make([]map[hostPort]int32, len(e.order))
	for i, id := range e.order {
		for pid := range e.s.nodes[id].pods {
			e.accountPorts(e.s.pods[pid].common(), i, 1)
		}
	}
}

func (e *evaluator) accountPorts(p *corev1.Pod, i int, delta int32) {
	if e.usedPorts == nil {
		return
	}
	for _, hp := range podHostPorts(p) {
		if e.usedPorts[i] == nil {
			e.usedPorts[i] = map[hostPort]int32{}
		}
		e.usedPorts[i][hp] += delta
	}
}

// portsFree is NodePorts' check of the node at position i.
func (e *evaluator) portsFree(i int) bool {
	if len(e.hostPorts) == 0 {
		return true
	}
	for used, n := range e.usedPorts[i] {
		if n <= 0 {
			continue
		}
		for _, want := range e.hostPorts {
			if want.conflicts(used) {
				return false
			}
		}
	}
	return true
}

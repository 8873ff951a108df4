package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	pgadmission "github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// handleScale judges a write to a workload's scale subresource (`kubectl
// scale`, a HorizontalPodAutoscaler): the workload as it is, with the
// replicas the write asks for. In Deny, a person's or a pipeline's scale
// that leaves more of the replicas unplaceable than before is refused:
// scaling an unsatisfiable workload up first must not open a way around
// Deny. An autoscaler's write (Validator.Autoscalers, by the user the API
// server says it comes as) is judged as in Warn, so that autoscaling is
// never refused: a workload that cannot take the replicas is told so in
// warnings, and by the Event the operator records once it lands.
func (v *Validator) handleScale(ctx context.Context, req admission.Request) (admission.Response, pgadmission.Mode, string) {
	kind := kindLabel(req)
	if req.Operation != admissionv1.Update {
		return admission.Allowed(""), pgadmission.ModeOff, kind
	}
	k := targets.KindOfResource(req.Resource.Resource)
	if k == nil {
		return admission.Allowed(""), pgadmission.ModeOff, kind
	}
	replicas, err := scaleReplicas(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("read the Scale: %w", err)), pgadmission.ModeOff, kind
	}
	if before, err := scaleReplicas(req.OldObject.Raw); err == nil && before == replicas {
		return admission.Allowed(""), pgadmission.ModeOff, kind
	}
	live, err := v.Cluster.Workload(ctx, k, req.Namespace, req.Name)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			logf.FromContext(ctx).Info("Admitted a scale that was not judged", "kind", k.Name, "namespace", req.Namespace, "name", req.Name, "reason", err.Error())
		}
		return admission.Allowed(""), pgadmission.ModeOff, kind
	}
	if live.GetLabels()[pgv1.AdmissionLabel] == string(pgadmission.ModeOff) || len(planning.HardConstraints(&targets.TemplateOf(live).Spec)) == 0 {
		return admission.Allowed(""), pgadmission.ModeOff, kind
	}
	scaled := k.Scaled(live, replicas)
	if !pgadmission.Relevant(targets.WorkloadOf(live), targets.WorkloadOf(scaled)) {
		return admission.Allowed(""), pgadmission.ModeOff, kind
	}
	change := aScale
	if v.autoscaler(req.UserInfo.Username) {
		change = anAutoscale
	}
	resp, mode := v.answer(ctx, req, scaled, live, change)
	return resp, mode, kind
}

// DefaultAutoscalers are the users a HorizontalPodAutoscaler's writes
// come as: the controller manager's own credentials, or its
// ServiceAccount where it runs each controller with one
// (--use-service-account-credentials, kubeadm's default).
var DefaultAutoscalers = []string{"system:kube-controller-manager", "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}

// autoscaler reports a write of an autoscaler's.
func (v *Validator) autoscaler(user string) bool {
	autoscalers := v.Autoscalers
	if autoscalers == nil {
		autoscalers = DefaultAutoscalers
	}
	return slices.Contains(autoscalers, user)
}

// scaleReplicas reads the replicas a serialized Scale asks for.
func scaleReplicas(raw []byte) (int32, error) {
	if len(raw) == 0 {
		return 0, fmt.Errorf("the request carries no Scale")
	}
	var s autoscalingv1.Scale
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, err
	}
	return s.Spec.Replicas, nil
}

package webhook

// A migration's field manager (workloadpatch.FieldManager) marks its own
// writes in managedFields: the check exempts them, and only them, when the
// operator's own user makes them; any other writer naming one borrows it.

import (
	"context"
	"encoding/json"
	"fmt"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pgadmission "github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// fieldManager is the field manager a request names, "" for none.
func fieldManager(req admission.Request) string {
	var opts struct {
		FieldManager string `json:"fieldManager"`
	}
	if len(req.Options.Raw) > 0 && json.Unmarshal(req.Options.Raw, &opts) == nil {
		return opts.FieldManager
	}
	return ""
}

// ownWrite reports a migration's own write: a migration's field manager,
// from the operator's own user. The field manager alone proves nothing
// (kubectl --field-manager names any), and the user alone would exempt
// the operator's other writes, which are not judged changes.
func (v *Validator) ownWrite(req admission.Request) bool {
	_, migration := workloadpatch.MigrationOf(fieldManager(req))
	return migration && v.Operator != "" && req.UserInfo.Username == v.Operator
}

// borrowedManager is the field manager of a write that names a
// migration's but does not come from the operator.
func (v *Validator) borrowedManager(req admission.Request) (string, bool) {
	manager := fieldManager(req)
	if _, migration := workloadpatch.MigrationOf(manager); !migration || v.ownWrite(req) {
		return "", false
	}
	return manager, true
}

// refuseBorrowed answers a write under a borrowed field manager: in Deny
// it is refused whatever it changes, since it would pass in managedFields
// as a migration's own write and take or release that migration's fields;
// in the other modes it is judged as any other write (refused is false).
func (v *Validator) refuseBorrowed(ctx context.Context, req admission.Request, manager string) (admission.Response, pgadmission.Mode, bool) {
	policy, _ := v.policy(ctx, req.Namespace)
	mode := policy.mode
	logf.FromContext(ctx).Info("A write names a migration's field manager but does not come from the operator",
		"kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "fieldManager", manager, "user", req.UserInfo.Username, "mode", mode)
	if mode != pgadmission.ModeDeny {
		return admission.Response{}, mode, false
	}
	return deny([]string{borrowedWarning(req, manager)}), mode, true
}

// borrowedWarning words a write under a borrowed field manager.
func borrowedWarning(req admission.Request, manager string) string {
	return pgadmission.ClipWarning(fmt.Sprintf("%s/%s: field manager %q is reserved for placement-guard's migrations, and %s is not the operator: write under your own field manager",
		req.Kind.Kind, req.Name, manager, req.UserInfo.Username))
}

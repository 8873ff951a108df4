package workloadpatch

import (
	"errors"
	"regexp"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Conflict is a server-side apply conflict: another field manager owns a
// field our apply would change. placement-guard never forces ownership;
// the migration stops and names the managers.
type Conflict struct {
	Managers []string
	Fields   []string
}

func (c *Conflict) Error() string {
	return "field(s) " + strings.Join(c.Fields, ", ") + " owned by " + strings.Join(c.Managers, ", ")
}

// The API server words each conflicting field's cause as
// `conflict with "<manager>"` or `conflict with "<manager>" using <gv>`.
var managerInMessage = regexp.MustCompile(`conflict with "([^"]+)"`)

// AsConflict returns the conflict an apply failed with, if it was one.
func AsConflict(err error) (*Conflict, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsConflict(err) {
		return nil, false
	}
	details := status.Status().Details
	if details == nil {
		return nil, false
	}
	managers := map[string]struct{}{}
	c := &Conflict{}
	for _, cause := range details.Causes {
		if cause.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		if m := managerInMessage.FindStringSubmatch(cause.Message); m != nil {
			managers[m[1]] = struct{}{}
		}
		c.Fields = append(c.Fields, cause.Field)
	}
	if len(c.Fields) == 0 {
		return nil, false
	}
	for m := range managers {
		c.Managers = append(c.Managers, m)
	}
	sort.Strings(c.Managers)
	sort.Strings(c.Fields)
	return c, true
}

// IsPreconditionFailed reports a write refused because the workload is
// not the object the write named: its uid precondition failed (409
// without a field manager conflict), or the API server refused to change
// the uid (422 on metadata.uid), so the workload was deleted and
// re-created since; or, for a write that names the resourceVersion it was
// decided on (Target.ResourceVersion), the workload has changed since.
func IsPreconditionFailed(err error) bool {
	if _, field := AsConflict(err); apierrors.IsConflict(err) && !field {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

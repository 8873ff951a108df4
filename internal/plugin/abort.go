package plugin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/adoption"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// abortOptions are abort's flags.
type abortOptions struct {
	yes     bool
	wait    bool
	timeout time.Duration
}

// abortPoll is how often a waiting abort looks at the migration.
const abortPoll = 500 * time.Millisecond

// runAbort is the panic button: it must revert every time. The revert
// finalizer and onDelete: Revert go on in one write, locked to the
// migration as read, so the deletion that follows always finds the
// operator's finalizer in place, whatever onDelete was and however far
// behind the operator is. The delete is locked to that write too: a
// migration changed in between is read again and checked before it is
// deleted.
func runAbort(ctx context.Context, o *Options, name string, opts abortOptions) error {
	pm, err := getMigration(ctx, o, name)
	if err != nil {
		return err
	}
	if !opts.yes {
		what := fmt.Sprintf("Its constraint is removed from %d target(s)", len(carrying(pm)))
		if adopted(pm) {
			what = "It was made by Adopt mode: the constraint goes back to the soft form Adopt admitted, and its adoption ends (no migration is made of it again until its author changes it)"
		}
		fmt.Fprintf(o.Out, "Abort PlacementMigration %s/%s (%s)? %s, and the object is deleted. Type the name to confirm: ",
			pm.Namespace, pm.Name, orNone(string(pm.Status.Phase)), what)
		answer, _ := bufio.NewReader(o.In).ReadString('\n')
		if strings.TrimSpace(answer) != name {
			return usagef("not confirmed; nothing was changed")
		}
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	if pm.DeletionTimestamp.IsZero() {
		if pm, err = armRevert(ctx, c, pm); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "placementmigration.placementguard.io/%s set to revert on delete\n", name)
		if err := deleteArmed(ctx, c, pm); err != nil {
			return err
		}
	} else if !slices.Contains(pm.Finalizers, pgv1.RevertFinalizer) {
		return usagef("PlacementMigration %s/%s is already being deleted without the revert finalizer (onDelete was %s): it cannot be made to revert now; remove the constraint from %s by hand",
			pm.Namespace, name, pm.Spec.OnDelete, strings.Join(carrying(pm), ", "))
	}
	targets := carrying(pm)
	if !opts.wait {
		fmt.Fprintf(o.Out, "placementmigration.placementguard.io/%s deleted; the operator removes the constraint from %d target(s) (%s) before the object goes: kubectl wait --for=delete -n %s pmig/%s\n",
			name, len(targets), strings.Join(targets, ", "), pm.Namespace, name)
		return nil
	}
	fmt.Fprintf(o.Out, "Waiting for the operator to remove the constraint from %d target(s)...\n", len(targets))
	last, err := waitGone(ctx, c, pm, opts.timeout)
	if err != nil {
		return usageError{fmt.Errorf("%w; %s", err, describeStuck(last))}
	}
	fmt.Fprintf(o.Out, "placementmigration.placementguard.io/%s deleted after its revert\n", name)
	for _, line := range checkReverted(ctx, c, pm) {
		fmt.Fprintln(o.Out, "  "+line)
	}
	return nil
}

// checkReverted reads each target the migration had written, where the
// user may, and says whether it still carries a placement field of the
// migration's field manager: what happened, not what should have.
func checkReverted(ctx context.Context, c client.Client, pm *pgv1.PlacementMigration) []string {
	manager := pm.Status.FieldManager
	var out []string
	for _, ts := range pm.Status.Targets {
		if ts.Applied == nil && (ts.Stage == "" || ts.Stage == pgv1.StageNone) {
			continue
		}
		ref := ts.Ref().String()
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(ts.Kind.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKey{Namespace: pm.Namespace, Name: ts.Name}, obj)
		switch {
		case apierrors.IsNotFound(err):
			out = append(out, ref+": gone")
		case err != nil:
			out = append(out, fmt.Sprintf("%s: not checked (%v)", ref, shortError(err)))
		case ts.UID != "" && string(obj.UID) != ts.UID:
			out = append(out, ref+": re-created since the migration wrote it; the new workload was left alone")
		case adopted(pm):
			out = append(out, adoptionAfterAbort(ref, obj, pm.Name))
		case manager != "" && ownsPlacement(obj, manager):
			out = append(out, fmt.Sprintf("%s: still carries placement fields of %s", ref, manager))
		default:
			out = append(out, ref+": reverted, no placement field of the migration left")
		}
	}
	return out
}

// adopted reports a migration Adopt mode made.
func adopted(pm *pgv1.PlacementMigration) bool {
	_, ok := pm.Labels[adoption.AdoptedLabel]
	return ok
}

// adoptionAfterAbort says what the abort of an adopted migration left of
// its record on the workload: ended, the constraint kept soft.
func adoptionAfterAbort(ref string, obj metav1.Object, migration string) string {
	rec, err := adoption.Find(obj.GetAnnotations(), migration)
	switch {
	case err != nil:
		return fmt.Sprintf("%s: its adoption record cannot be read (%v)", ref, err)
	case rec == nil:
		return fmt.Sprintf("%s: carries no adoption record of %s any more", ref, migration)
	case rec.Active():
		return fmt.Sprintf("%s: its adoption record is not ended yet; the operator ends it once it sees the migration gone", ref)
	}
	author := rec.Author
	if author == "" {
		author = "its manifest"
	}
	return fmt.Sprintf("%s: the constraint kept in the soft form Adopt admitted; its adoption ended (%s), recorded in annotation %s: no migration is made of it again until %s changes it",
		ref, rec.Ended, adoption.Annotation, author)
}

func ownsPlacement(obj metav1.Object, manager string) bool {
	return slices.ContainsFunc(obj.GetManagedFields(), func(mf metav1.ManagedFieldsEntry) bool {
		return mf.Manager == manager && workloadpatch.OwnsPlacementFields(mf)
	})
}

func shortError(err error) string {
	if apierrors.IsForbidden(err) {
		return "you may not read it"
	}
	return err.Error()
}

// armRevert sets onDelete: Revert and adds the revert finalizer in one
// patch carrying the resourceVersion read, and reads again on a conflict.
func armRevert(ctx context.Context, c client.Client, pm *pgv1.PlacementMigration) (*pgv1.PlacementMigration, error) {
	for attempt := 0; ; attempt++ {
		finalizers := pm.Finalizers
		if !slices.Contains(finalizers, pgv1.RevertFinalizer) {
			finalizers = append(slices.Clone(finalizers), pgv1.RevertFinalizer)
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": pm.ResourceVersion, "finalizers": finalizers},
			"spec":     map[string]any{"onDelete": string(pgv1.DeletionRevert)},
		})
		if err != nil {
			return nil, err
		}
		err = c.Patch(ctx, pm, client.RawPatch(types.MergePatchType, patch))
		if err == nil {
			return pm, nil
		}
		if !apierrors.IsConflict(err) || attempt == 4 {
			return nil, usageError{fmt.Errorf("set PlacementMigration %s/%s to revert on delete: %w", pm.Namespace, pm.Name, err)}
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pm), pm); err != nil {
			return nil, usageError{fmt.Errorf("read PlacementMigration %s/%s again: %w", pm.Namespace, pm.Name, err)}
		}
	}
}

// deleteArmed deletes the migration only as it is with the finalizer on:
// a migration changed since (a status written, a finalizer removed) is
// read again and armed again before the next attempt.
func deleteArmed(ctx context.Context, c client.Client, pm *pgv1.PlacementMigration) error {
	for attempt := 0; ; attempt++ {
		uid, rv := pm.UID, pm.ResourceVersion
		err := c.Delete(ctx, pm, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == 9 {
			return usageError{fmt.Errorf("delete PlacementMigration %s/%s: %w", pm.Namespace, pm.Name, err)}
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pm), pm); err != nil {
			return usageError{fmt.Errorf("read PlacementMigration %s/%s again: %w", pm.Namespace, pm.Name, err)}
		}
		if !slices.Contains(pm.Finalizers, pgv1.RevertFinalizer) || pm.Spec.OnDelete != pgv1.DeletionRevert {
			var armErr error
			if pm, armErr = armRevert(ctx, c, pm); armErr != nil {
				return armErr
			}
		}
	}
}

// waitGone waits until the migration is deleted, and returns it as last
// seen when it is not by the timeout.
func waitGone(ctx context.Context, c client.Client, pm *pgv1.PlacementMigration, timeout time.Duration) (*pgv1.PlacementMigration, error) {
	last := pm.DeepCopy()
	err := wait.PollUntilContextTimeout(ctx, abortPoll, timeout, true, func(ctx context.Context) (bool, error) {
		current := &pgv1.PlacementMigration{}
		err := c.Get(ctx, client.ObjectKeyFromObject(pm), current)
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, nil
		case current.UID != pm.UID:
			// A migration of the same name made since is not ours to wait on.
			return true, nil
		}
		last = current
		return false, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return last, fmt.Errorf("PlacementMigration %s/%s is still there after %s: the operator has not finished the revert", pm.Namespace, pm.Name, timeout)
	}
	return last, err
}

// describeStuck says what the migration reports while its revert waits.
func describeStuck(pm *pgv1.PlacementMigration) string {
	if pm == nil {
		return "is the operator running?"
	}
	if c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionReady); c != nil && c.ObservedGeneration == pm.Generation {
		return fmt.Sprintf("it reports %s (%s: %s); the revert finalizer keeps it until the targets are reverted", orNone(string(pm.Status.Phase)), c.Reason, c.Message)
	}
	return "the operator has not reconciled the deletion: is it running?"
}

// carrying names the targets the migration has written, which a revert
// restores.
func carrying(pm *pgv1.PlacementMigration) []string {
	var out []string
	for _, ts := range pm.Status.Targets {
		if ts.Applied != nil || (ts.Stage != "" && ts.Stage != pgv1.StageNone) {
			out = append(out, ts.Ref().String())
		}
	}
	return out
}

package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// newControlCommands are the verbs that steer a migration. They are the
// only ones that write, and they write only the PlacementMigration.
func newControlCommands(o *Options) []*cobra.Command {
	pause := &cobra.Command{
		Use:               "pause NAME",
		Short:             "Hold a migration where it is: nothing is patched until it is resumed",
		Example:           "  kubectl placement pause -n db graphdb-apart",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeMigrations(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			return patchMigration(cmd.Context(), o, args[0], map[string]any{"spec": map[string]any{"paused": true}}, "paused")
		},
	}
	resume := &cobra.Command{
		Use:               "resume NAME",
		Short:             "Let a paused migration go on",
		Example:           "  kubectl placement resume -n db graphdb-apart",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeMigrations(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			return patchMigration(cmd.Context(), o, args[0], map[string]any{"spec": map[string]any{"paused": nil}}, "resumed")
		},
	}
	retry := &cobra.Command{
		Use:   "retry NAME",
		Short: "Restart a RolledBack or Failed migration from its last verified stage",
		Long: `retry sets the ` + pgv1.RetryAnnotation + ` annotation to the current time. The operator
acts on each new value once: a RolledBack or Failed migration starts again
from its last verified stage; on any other migration the value is only
recorded.`,
		Example:           "  kubectl placement retry -n db graphdb-apart",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeMigrations(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			pm, err := getMigration(cmd.Context(), o, args[0])
			if err != nil {
				return err
			}
			if pm.Status.Phase != pgv1.PhaseRolledBack && pm.Status.Phase != pgv1.PhaseFailed {
				fmt.Fprintf(o.ErrOut, "note: %s is %s, not RolledBack or Failed; the operator records the retry and changes nothing\n", pm.Name, orNone(string(pm.Status.Phase)))
			}
			value := time.Now().UTC().Format(time.RFC3339Nano)
			return patchMigration(cmd.Context(), o, args[0], map[string]any{"metadata": map[string]any{"annotations": map[string]any{pgv1.RetryAnnotation: value}}}, "retry requested ("+value+")")
		},
	}
	var ab abortOptions
	abort := &cobra.Command{
		Use:   "abort NAME",
		Short: "Revert what the migration applied and delete it",
		Long: `abort sets spec.onDelete to Revert and puts the operator's revert finalizer
on the migration in one write, then deletes it: the operator restores each
target's template as it was before the migration, and only then lets the
object go. abort waits for that (--wait, up to --timeout) and says whether
the revert was done; with --wait=false it says only that it was asked for.
It asks for confirmation unless --yes is given.`,
		Example:           "  kubectl placement abort -n db graphdb-apart --yes",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeMigrations(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAbort(cmd.Context(), o, args[0], ab)
		},
	}
	abort.Flags().BoolVarP(&ab.yes, "yes", "y", false, "do not ask for confirmation")
	abort.Flags().BoolVar(&ab.wait, "wait", true, "wait until the operator has reverted the targets and the migration is gone")
	abort.Flags().DurationVar(&ab.timeout, "timeout", 5*time.Minute, "how long --wait waits")
	return []*cobra.Command{pause, resume, retry, abort}
}

// patchMigration merge-patches a migration and says what it did.
func patchMigration(ctx context.Context, o *Options, name string, patch map[string]any, done string) error {
	ns, err := o.Namespace()
	if err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	pm := &pgv1.PlacementMigration{}
	pm.Namespace, pm.Name = ns, name
	if err := c.Patch(ctx, pm, client.RawPatch(types.MergePatchType, data)); err != nil {
		return usageError{fmt.Errorf("patch PlacementMigration %s/%s: %w", ns, name, err)}
	}
	fmt.Fprintf(o.Out, "placementmigration.placementguard.io/%s %s\n", name, done)
	return nil
}

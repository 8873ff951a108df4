// Package plugin is kubectl-placement: the placement engine where a
// constraint change is made, in a terminal and in CI. It plans a
// migration against a live cluster or a directory of YAML, lints rendered
// manifests, and shows and steers PlacementMigrations.
package plugin

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/fleet"
)

// Exit codes CI can act on.
const (
	ExitOK      = 0
	ExitHazards = 1
	ExitUsage   = 2
)

// Version is the plugin's release, set when it is built for one.
var Version = "v0.0.0-dev"

// errHazardsFound makes a command exit 1 after printing its report.
// The output formats the commands take with -o.
const (
	outputTable  = "table"
	outputTree   = "tree"
	outputJSON   = "json"
	outputYAML   = "yaml"
	outputGitHub = "github"
	outputWide   = "wide"
)

var errHazardsFound = errors.New("hazards found")

// usageError is a mistake in the command line or an input the plugin
// cannot read: exit 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// Options are what every command shares: how to reach the cluster and
// where to write.
type Options struct {
	Config *genericclioptions.ConfigFlags
	genericiooptions.IOStreams
}

// Namespace is the namespace of --namespace or of the kubeconfig context.
func (o *Options) Namespace() (string, error) {
	ns, _, err := o.Config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", usageError{fmt.Errorf("read the kubeconfig: %w", err)}
	}
	return ns, nil
}

func (o *Options) client() (client.Client, error) {
	cfg, err := o.Config.ToRESTConfig()
	if err != nil {
		return nil, usageError{fmt.Errorf("read the kubeconfig: %w", err)}
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		return nil, usageError{fmt.Errorf("connect to the cluster: %w", err)}
	}
	return c, nil
}

// NewCommand is `kubectl placement` and its subcommands.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{Config: genericclioptions.NewConfigFlags(true), IOStreams: streams}
	root := &cobra.Command{
		Use:   "kubectl-placement",
		Short: "Plan, lint and steer placement constraint changes before they take production down",
		Long: `kubectl placement asks the placement engine of placement-guard, faithful to
kube-scheduler, whether a pod anti-affinity or topology spread constraint fits
a cluster, whether the rollout that applies it can finish, and what stands in
the way, before anything is changed.

Exit codes: 0 nothing found, 1 hazards found, 2 usage, input or access error.`,
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl placement",
		},
	}
	o.Config.AddFlags(root.PersistentFlags())
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.AddCommand(newPlanCommand(o), newLintCommand(o), newStatusCommand(o), newWaitCommand(o))
	root.AddCommand(newControlCommands(o)...)
	return root
}

// Main runs the command line and returns the process's exit code.
func Main(args []string, streams genericiooptions.IOStreams) int {
	// No credential plugin started for a fleet outlives the command.
	defer fleet.StopPlugins()
	cmd := NewCommand(streams)
	cmd.SetArgs(args)
	err := cmd.Execute()
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errHazardsFound):
		return ExitHazards
	case isFailed(err):
		fmt.Fprintln(streams.ErrOut, "error:", err)
		return ExitHazards
	}
	fmt.Fprintln(streams.ErrOut, "error:", err)
	return ExitUsage
}

// Run is Main on the process's streams.
func Run() int {
	return Main(os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
}

// checkOutput refuses an output format the command does not write.
func checkOutput(format string, allowed ...string) error {
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	return usagef("unknown output format %q; use one of %v", format, allowed)
}

// readInput opens a file name, or standard input for "-".
func readInput(o *Options, name string) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(o.In), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, usageError{err}
	}
	return f, nil
}

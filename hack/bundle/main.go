// Command bundle writes the OLM bundle of placement-guard to bundle/ from
// what `kustomize build config/default` renders (read on standard input)
// and the hand-written part of the ClusterServiceVersion in
// config/manifests/bases: the CRD as it is, the manager Deployment and the
// permissions bound to its ServiceAccount as the CSV's install strategy, the
// samples as alm-examples. `make bundle` runs it; a test regenerates the
// bundle and fails when the committed one differs.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kustomize build config/default | bundle OUTDIR")
		os.Exit(2)
	}
	if err := run(os.Stdin, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
}

func run(rendered io.Reader, out string) error {
	raw, err := io.ReadAll(rendered)
	if err != nil {
		return err
	}
	files, err := Generate(raw, Sources{
		CSVBase:    filepath.Join("config", "manifests", "bases", "placement-guard.clusterserviceversion.yaml"),
		SamplesDir: filepath.Join("config", "samples"),
	})
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(out, "manifests")); err != nil {
		return err
	}
	for name, content := range files {
		path := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

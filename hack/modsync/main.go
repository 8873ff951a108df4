// Command modsync keeps the Go modules that `make test` compiles on one
// version of every module they share, so that a package compiled for one of
// them (k8s.io/api for the operator, say) is taken from the build cache by
// the others (kube-apiserver, helm, kwok, Karpenter, crd-ref-docs, the
// fidelity test). On a cold clone the Kubernetes libraries are then
// compiled once instead of six times; the Makefile compiles every module
// with one Go (GO_TOOLCHAIN), without which no package is shared at all.
// Run it through make (make modsync, make verify), which sets that Go:
// Karpenter's module refuses an older one.
//
// Only modules that contribute compiled packages are compared: each module's
// build targets are listed with `go list -deps`, so a module that only appears
// in a dependency's tests does not count.
//
//	go run ./hack/modsync          # fail, naming each module behind the others
//	go run ./hack/modsync -fix     # raise each of them with `go get`, then tidy
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
)

// buildSet is a module directory and the packages `make test` builds in it.
type buildSet struct {
	dir     string
	targets []string
}

var buildSets = []buildSet{
	{".", []string{"-test", "./..."}},
	{"test/schedulerfidelity", []string{"-test", "./..."}},
	{"test/gates", []string{"-test", "./..."}},
	{"hack/tools/kubernetes", []string{
		"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager",
		"k8s.io/kubernetes/cmd/kube-scheduler", "k8s.io/kubernetes/cmd/kubectl",
	}},
	{"hack/tools/etcd", []string{"go.etcd.io/etcd/server/v3"}},
	{"hack/tools/kwok", []string{"sigs.k8s.io/kwok/cmd/kwok"}},
	{"hack/tools/helm", []string{"helm.sh/helm/v4/cmd/helm"}},
	{"hack/tools/karpenter", []string{"sigs.k8s.io/karpenter/kwok"}},
	{"hack/tools/docs", []string{"github.com/elastic/crd-ref-docs"}},
	{"hack/tools/dev", []string{"sigs.k8s.io/controller-tools/cmd/controller-gen", "sigs.k8s.io/kustomize/kustomize/v5", "github.com/onsi/ginkgo/v2/ginkgo"}},
}

func main() {
	fix := flag.Bool("fix", false, "raise the modules behind with go get and tidy, until none is")
	flag.Parse()
	if err := run(*fix); err != nil {
		fmt.Fprintln(os.Stderr, "modsync:", err)
		os.Exit(1)
	}
}

func run(fix bool) error {
	for round := 1; ; round++ {
		lag, err := findLag()
		if err != nil {
			return err
		}
		if len(lag) == 0 {
			return nil
		}
		if !fix {
			return fmt.Errorf("%s\nrun 'go run ./hack/modsync -fix'", describe(lag))
		}
		if round > 8 {
			return fmt.Errorf("no common versions after %d rounds:\n%s", round-1, describe(lag))
		}
		for _, set := range buildSets {
			if ups := lag[set.dir]; len(ups) > 0 {
				if err := goCmd(set.dir, append([]string{"get"}, ups...)...); err != nil {
					return err
				}
			}
		}
		for _, set := range buildSets {
			if err := goCmd(set.dir, "mod", "tidy"); err != nil {
				return err
			}
		}
	}
}

// findLag returns, per module directory, the "path@version" upgrades that
// bring each of its compiled modules to the highest version any set builds.
func findLag() (map[string][]string, error) {
	versions := map[string]map[string]string{}
	highest := map[string]string{}
	for _, set := range buildSets {
		mods, err := compiledModules(set)
		if err != nil {
			return nil, err
		}
		versions[set.dir] = mods
		for path, v := range mods {
			if semver.Compare(v, highest[path]) > 0 {
				highest[path] = v
			}
		}
	}
	lag := map[string][]string{}
	for dir, mods := range versions {
		for path, v := range mods {
			if semver.Compare(v, highest[path]) < 0 {
				lag[dir] = append(lag[dir], path+"@"+highest[path])
			}
		}
		slices.Sort(lag[dir])
	}
	return lag, nil
}

// compiledModules maps each module that contributes a package to the set's
// build to the version compiled (the replacement's, when it is replaced).
func compiledModules(set buildSet) (map[string]string, error) {
	args := append([]string{"list", "-deps", "-f",
		"{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}"}, set.targets...)
	cmd := exec.Command("go", args...)
	cmd.Dir = set.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the packages built in %s: %w\n%s", set.dir, err, stderr.String())
	}
	mods := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, v, ok := strings.Cut(sc.Text(), " ")
		if ok && semver.IsValid(v) {
			mods[path] = v
		}
	}
	return mods, sc.Err()
}

func describe(lag map[string][]string) string {
	var b strings.Builder
	for _, set := range buildSets {
		if ups := lag[set.dir]; len(ups) > 0 {
			fmt.Fprintf(&b, "%s compiles older versions than the other tools modules; it needs %s\n", set.dir, strings.Join(ups, " "))
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func goCmd(dir string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s in %s: %w", strings.Join(args, " "), dir, err)
	}
	return nil
}

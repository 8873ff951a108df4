package plugin

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is the part of krew's Plugin manifest that krew validates.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		ShortDescription string `json:"shortDescription"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// The krew manifest, rendered as `make plugin-dist` renders it, names an
// archive and a checksum for each platform the Makefile builds, and the
// binary and licence each archive holds.
func TestKrewManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "krew", "placement.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PLUGIN_PLATFORMS = (.*)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("the Makefile sets no PLUGIN_PLATFORMS")
	}
	platforms := strings.Fields(string(m[1]))
	rendered := strings.NewReplacer("${VERSION}", "v1.2.3", "${BASE_URL}", "https://example.invalid/v1.2.3").Replace(string(raw))
	for _, p := range platforms {
		rendered = strings.ReplaceAll(rendered, "${SHA256_"+p+"}", strings.Repeat("a", 64))
	}
	if strings.Contains(rendered, "${") {
		t.Fatalf("a placeholder is left that make plugin-dist does not fill: %s", regexp.MustCompile(`\$\{[^}]*\}`).FindString(rendered))
	}
	var k krewPlugin
	if err := yaml.Unmarshal([]byte(rendered), &k); err != nil {
		t.Fatal(err)
	}
	if k.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || k.Kind != "Plugin" || k.Metadata.Name != "placement" {
		t.Fatalf("not a krew Plugin named placement: %s %s %s", k.APIVersion, k.Kind, k.Metadata.Name)
	}
	if k.Spec.Version != "v1.2.3" || k.Spec.ShortDescription == "" {
		t.Fatalf("version %q, shortDescription %q", k.Spec.Version, k.Spec.ShortDescription)
	}
	seen := map[string]bool{}
	for _, p := range k.Spec.Platforms {
		name := p.Selector.MatchLabels["os"] + "_" + p.Selector.MatchLabels["arch"]
		seen[name] = true
		if !strings.HasSuffix(p.URI, "_"+name+".tar.gz") || len(p.Sha256) != 64 || p.Bin != "kubectl-placement" {
			t.Errorf("platform %s: uri %s, sha256 %q, bin %s", name, p.URI, p.Sha256, p.Bin)
		}
		files := map[string]bool{}
		for _, f := range p.Files {
			files[f.From] = true
		}
		if !files["kubectl-placement"] || !files["LICENSE"] {
			t.Errorf("platform %s does not install the binary and the licence: %+v", name, p.Files)
		}
	}
	for _, p := range platforms {
		if !seen[p] {
			t.Errorf("the Makefile builds %s but the manifest does not offer it", p)
		}
	}
	if len(seen) != len(platforms) {
		t.Errorf("the manifest offers %d platforms, the Makefile builds %d", len(seen), len(platforms))
	}
}

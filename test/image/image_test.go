// Package image tests `make image`: the manager's multi-arch image built
// without a Docker engine. It opens the OCI layout with the standard library
// alone, so it checks what a registry or a runtime would read, not what the
// builder believes it wrote.
package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Platform  *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform,omitempty"`
}

type index struct {
	Manifests []descriptor `json:"manifests"`
}

type manifest struct {
	Config descriptor   `json:"config"`
	Layers []descriptor `json:"layers"`
}

type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Created      string `json:"created"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

// wantMachine is the ELF machine each platform's binary must be built for.
var wantMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// TestImage builds the manager's image twice with `make image` for the
// platform the tests run on, and checks what a runtime reads from it and that
// one commit gives one digest. Cross-compiling the manager for a second
// architecture takes minutes on a cold build cache; how the tool assembles
// several platforms into one index is checked by TestMultiPlatformImage with a
// tiny program, and that `make image` asks for both by TestImagePlatforms.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager")
	}
	root := repoRoot(t)
	first, second := t.TempDir(), t.TempDir()
	makeImage(t, root, first)
	makeImage(t, root, second)

	outer := readIndex(t, filepath.Join(first, "image"))
	again := readIndex(t, filepath.Join(second, "image"))
	if len(outer.Manifests) != 1 || len(again.Manifests) != 1 {
		t.Fatalf("index.json should name one image index, got %d and %d", len(outer.Manifests), len(again.Manifests))
	}
	if outer.Manifests[0].Digest != again.Manifests[0].Digest {
		t.Errorf("two builds of one commit gave two digests: %s and %s", outer.Manifests[0].Digest, again.Manifests[0].Digest)
	}

	layoutDir := filepath.Join(first, "image")
	seen := checkIndex(t, layoutDir, outer.Manifests[0], root)
	if !seen[hostPlatform] {
		t.Errorf("the image index lacks %s (has %v)", hostPlatform, seen)
	}
	if _, err := os.Stat(filepath.Join(first, "image_"+strings.ReplaceAll(hostPlatform, "/", "_")+".tar")); err != nil {
		t.Errorf("no docker-loadable tarball for %s: %v", hostPlatform, err)
	}

	// Once the image is built, the one-file install pins it by digest.
	out, err := exec.Command("make", "-C", root, "--no-print-directory", "build-installer", "DIST="+first,
		"IMG=registry.example.com/placement-guard:v0.1.0").CombinedOutput()
	if err != nil {
		t.Fatalf("make build-installer: %v\n%s", err, out)
	}
	install, err := os.ReadFile(filepath.Join(first, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := "image: registry.example.com/placement-guard:v0.1.0@" + outer.Manifests[0].Digest
	if !strings.Contains(string(install), want) {
		t.Errorf("install.yaml does not pin the built image by digest: want %q", want)
	}
}

// TestMultiPlatformImage runs the image tool as `make image` does, with a
// binary per architecture, and checks that the index names each platform with
// its own binary and that each has a tarball.
func TestMultiPlatformImage(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles a program for two architectures")
	}
	root := repoRoot(t)
	dist := t.TempDir()
	args := []string{"run", ".", "-layout", filepath.Join(dist, "image"), "-tarball-dir", dist, "-tag", "placement-guard:test"}
	for _, key := range dockerfileLabels(t, root) {
		args = append(args, "-label", key+"=test")
	}
	for arch := range wantMachine {
		bin := filepath.Join(dist, "build", arch, "manager")
		build := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/tiny")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build for linux/%s: %v\n%s", arch, err, out)
		}
		args = append(args, "-binary", "linux/"+arch+"="+bin)
	}
	tool := exec.Command("go", args...)
	tool.Dir = filepath.Join(root, "hack", "tools", "image")
	if out, err := tool.CombinedOutput(); err != nil {
		t.Fatalf("the image tool: %v\n%s", err, out)
	}

	layoutDir := filepath.Join(dist, "image")
	outer := readIndex(t, layoutDir)
	if len(outer.Manifests) != 1 {
		t.Fatalf("index.json should name one image index, got %d", len(outer.Manifests))
	}
	seen := checkIndex(t, layoutDir, outer.Manifests[0], root)
	for arch := range wantMachine {
		if !seen["linux/"+arch] {
			t.Errorf("the image index lacks linux/%s (has %v)", arch, seen)
		}
		if _, err := os.Stat(filepath.Join(dist, "image_linux_"+arch+".tar")); err != nil {
			t.Errorf("no docker-loadable tarball for linux/%s: %v", arch, err)
		}
	}
}

// TestImagePlatforms keeps `make image` building for both architectures:
// TestImage builds one, to spare the tests a cross-compiled manager.
func TestImagePlatforms(t *testing.T) {
	out, err := exec.Command("make", "-C", repoRoot(t), "--no-print-directory", "-n", "image-binaries").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n image-binaries: %v\n%s", err, out)
	}
	for arch := range wantMachine {
		if !strings.Contains(string(out), "linux/"+arch) {
			t.Errorf("make image does not build linux/%s:\n%s", arch, out)
		}
	}
}

// hostPlatform is the one platform TestImage builds the manager for.
var hostPlatform = "linux/" + runtime.GOARCH

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func makeImage(t *testing.T, root, dist string) {
	t.Helper()
	cmd := exec.Command("make", "-C", root, "--no-print-directory", "image", "DIST="+dist,
		"IMG=placement-guard:test", "IMAGE_PLATFORMS="+hostPlatform)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
}

// checkIndex checks every platform's image of an image index and returns the
// platforms it names.
func checkIndex(t *testing.T, layoutDir string, d descriptor, root string) map[string]bool {
	t.Helper()
	var multi index
	readBlobJSON(t, layoutDir, d, &multi)
	seen := map[string]bool{}
	for _, m := range multi.Manifests {
		if m.Platform == nil {
			t.Fatalf("manifest %s has no platform", m.Digest)
		}
		platform := m.Platform.OS + "/" + m.Platform.Architecture
		seen[platform] = true
		t.Run(platform, func(t *testing.T) { checkPlatformImage(t, layoutDir, m, root) })
	}
	return seen
}

func checkPlatformImage(t *testing.T, layoutDir string, d descriptor, root string) {
	var m manifest
	readBlobJSON(t, layoutDir, d, &m)
	var cfg imageConfig
	readBlobJSON(t, layoutDir, m.Config, &cfg)

	if cfg.OS != d.Platform.OS || cfg.Architecture != d.Platform.Architecture {
		t.Errorf("config says %s/%s, index says %s/%s", cfg.OS, cfg.Architecture, d.Platform.OS, d.Platform.Architecture)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.Config.User)
	}
	if strings.Join(cfg.Config.Entrypoint, " ") != "/manager" || len(cfg.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/manager] and none", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	if !strings.HasPrefix(cfg.Created, "1970-01-01T00:00:00") {
		t.Errorf("created %q: a timestamp of the build makes digests differ", cfg.Created)
	}
	for _, key := range dockerfileLabels(t, root) {
		if cfg.Config.Labels[key] == "" {
			t.Errorf("label %s of the Dockerfile is missing (labels %v)", key, cfg.Config.Labels)
		}
	}

	files := map[string][]byte{}
	for _, l := range m.Layers {
		for name, data := range layerFiles(t, layoutDir, l) {
			files[name] = data
		}
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox"} {
		if _, ok := files[shell]; ok {
			t.Errorf("the image has /%s", shell)
		}
	}
	manager, ok := files["manager"]
	if !ok {
		t.Fatalf("no /manager in the image (files %v)", keys(files))
	}
	bin, err := elf.NewFile(bytes.NewReader(manager))
	if err != nil {
		t.Fatalf("/manager is not an ELF binary: %v", err)
	}
	if want := wantMachine[d.Platform.Architecture]; bin.Machine != want {
		t.Errorf("/manager is built for %s, want %s", bin.Machine, want)
	}
	for _, p := range bin.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("/manager is dynamically linked; the image has no libc")
		}
	}
	if !strings.Contains(string(files["etc/passwd"]), ":65532:65532:") {
		t.Errorf("/etc/passwd does not name user 65532: %q", files["etc/passwd"])
	}
}

// dockerfileLabels are the label keys the Dockerfile sets: the image built
// without Docker must carry the same.
func dockerfileLabels(t *testing.T, root string) []string {
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keyRE := regexp.MustCompile(`(org\.opencontainers\.image\.[a-z]+)=`)
	var found []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		for _, m := range keyRE.FindAllStringSubmatch(s.Text(), -1) {
			found = append(found, m[1])
		}
	}
	if len(found) == 0 {
		t.Fatal("the Dockerfile sets no org.opencontainers.image labels")
	}
	return found
}

func readIndex(t *testing.T, layoutDir string) index {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(layoutDir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx index
	if err := json.Unmarshal(data, &idx); err != nil {
		t.Fatal(err)
	}
	return idx
}

// readBlob reads a blob and checks it against its digest and size.
func readBlob(t *testing.T, layoutDir string, d descriptor) []byte {
	t.Helper()
	algo, hexDigest, _ := strings.Cut(d.Digest, ":")
	data, err := os.ReadFile(filepath.Join(layoutDir, "blobs", algo, hexDigest))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != hexDigest || int64(len(data)) != d.Size {
		t.Fatalf("blob %s does not match its descriptor", d.Digest)
	}
	return data
}

func readBlobJSON(t *testing.T, layoutDir string, d descriptor, into any) {
	t.Helper()
	if err := json.Unmarshal(readBlob(t, layoutDir, d), into); err != nil {
		t.Fatalf("blob %s: %v", d.Digest, err)
	}
}

func layerFiles(t *testing.T, layoutDir string, d descriptor) map[string][]byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(readBlob(t, layoutDir, d)))
	if err != nil {
		t.Fatalf("layer %s: %v", d.Digest, err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("layer %s: %v", d.Digest, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(hdr.Name, "/")] = data
	}
}

func keys(m map[string][]byte) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return fmt.Sprint(ks)
}

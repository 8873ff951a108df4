// Command image builds the manager's container image without a Docker
// engine: one layer holding the static binary (and the passwd and group
// entries of the non-root user it runs as), no shell, no base image.
//
// The image is reproducible: every timestamp is the Unix epoch and file
// owners and modes are fixed, so the same binaries give the same digest.
//
//	image -binary linux/amd64=bin/linux_amd64/manager -binary linux/arm64=... \
//	      -layout dist/image -tarball-dir dist -tag placement-guard:v0.1.0 [-push REF]
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user of distroless' "nonroot" variant, which the Dockerfile uses too.
const (
	nonRootID   = 65532
	nonRootUser = "65532:65532"
	entrypoint  = "/manager"
)

// epoch is every timestamp in the image, so that rebuilding from the same
// binaries gives the same digest.
var epoch = time.Unix(0, 0).UTC()

type options struct {
	binaries   map[string]string // "os/arch" -> path of the static binary
	labels     map[string]string
	layoutDir  string
	tarballDir string
	tag        string
	push       string
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(2)
	}
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	opts := options{binaries: map[string]string{}, labels: map[string]string{}}
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.Func("binary", "os/arch=path of the static manager binary for that platform (repeat per platform)", keyValueInto(opts.binaries))
	fs.Func("label", "key=value of an image label (repeatable)", keyValueInto(opts.labels))
	fs.StringVar(&opts.layoutDir, "layout", "", "directory to write the multi-platform OCI image layout to")
	fs.StringVar(&opts.tarballDir, "tarball-dir", "", "directory to write one `docker load`-able tarball per platform to")
	fs.StringVar(&opts.tag, "tag", "placement-guard:latest", "the tag the tarballs carry")
	fs.StringVar(&opts.push, "push", "", "push the image index to this reference (registry/repository:tag)")
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	if len(opts.binaries) == 0 {
		return opts, errors.New("at least one -binary os/arch=path is needed")
	}
	if opts.layoutDir == "" && opts.tarballDir == "" && opts.push == "" {
		return opts, errors.New("nothing to write: give -layout, -tarball-dir or -push")
	}
	return opts, nil
}

func keyValueInto(m map[string]string) func(string) error {
	return func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value", s)
		}
		m[k] = v
		return nil
	}
}

func run(opts options) error {
	platforms := sortedKeys(opts.binaries)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	images := map[string]v1.Image{}
	for _, p := range platforms {
		platform, err := v1.ParsePlatform(p)
		if err != nil {
			return fmt.Errorf("platform %q: %w", p, err)
		}
		img, err := buildImage(opts.binaries[p], *platform, opts.labels)
		if err != nil {
			return fmt.Errorf("image for %s: %w", p, err)
		}
		images[p] = img
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: platform},
		})
	}
	digest, err := idx.Digest()
	if err != nil {
		return fmt.Errorf("index digest: %w", err)
	}
	if opts.layoutDir != "" {
		if err := writeLayout(opts.layoutDir, opts.tag, idx); err != nil {
			return err
		}
		fmt.Printf("wrote OCI layout %s (index %s)\n", opts.layoutDir, digest)
	}
	if opts.tarballDir != "" {
		if err := writeTarballs(opts.tarballDir, opts.tag, images); err != nil {
			return err
		}
	}
	if opts.push != "" {
		ref, err := name.ParseReference(opts.push)
		if err != nil {
			return fmt.Errorf("push reference: %w", err)
		}
		if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("push %s: %w", ref, err)
		}
		fmt.Printf("pushed %s@%s\n", ref.Context(), digest)
	}
	return nil
}

// buildImage makes the image of one platform: the binary at /manager, run as
// 65532:65532 with /manager as its entrypoint.
func buildImage(binary string, platform v1.Platform, labels map[string]string) (v1.Image, error) {
	layerTar, err := rootFilesystem(binary)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "placement-guard hack/tools/image", Comment: "the manager, static"},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: epoch}
	cfg.OS, cfg.Architecture, cfg.Variant = platform.OS, platform.Architecture, platform.Variant
	cfg.Config.User = nonRootUser
	cfg.Config.Entrypoint = []string{entrypoint}
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = labels
	return mutate.ConfigFile(img, cfg)
}

// rootFilesystem is the image's only layer, as a tar: /manager, and /etc/passwd
// and /etc/group naming the non-root user, so that tools resolving the user
// find it. There is no shell and nothing else.
func rootFilesystem(binary string) ([]byte, error) {
	manager, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/", 0o755, nil},
		{"etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", nonRootID)},
		{"etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRootID, nonRootID)},
		{"manager", 0o755, manager},
	}
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, ModTime: epoch, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if strings.HasSuffix(e.name, "/") {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeLayout writes an OCI image layout whose index.json names the
// multi-platform index by its tag, so that `skopeo copy oci:DIR:TAG ...` and
// `crane push DIR ...` find it.
func writeLayout(dir, tag string, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout %s: %w", dir, err)
	}
	ref := tag
	if t, err := name.NewTag(tag); err == nil {
		ref = t.TagStr()
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return fmt.Errorf("write layout %s: %w", dir, err)
	}
	return nil
}

// writeTarballs writes one `docker load`-able tarball per platform: the
// docker archive format holds one image per tag, not an index.
func writeTarballs(dir, tag string, images map[string]v1.Image) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range sortedKeys(images) {
		file := filepath.Join(dir, "image_"+strings.ReplaceAll(p, "/", "_")+".tar")
		if err := tarball.WriteToFile(file, ref, images[p]); err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
		fmt.Printf("wrote %s (%s)\n", file, tag)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

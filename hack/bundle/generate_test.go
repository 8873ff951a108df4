package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// render runs the pinned kustomize over config/default, as `make bundle` does.
func render(t *testing.T) []byte {
	t.Helper()
	bin := os.Getenv("PLACEMENT_GUARD_BIN")
	if bin == "" {
		bin = filepath.Join("..", "..", "bin")
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join("..", "..", "config", "default"))
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kustomize build config/default (run `make test`, which builds bin/kustomize): %v\n%s", err, stderr.String())
	}
	return out.Bytes()
}

func generate(t *testing.T, rendered []byte) map[string][]byte {
	t.Helper()
	files, err := Generate(rendered, Sources{
		CSVBase:    filepath.Join("..", "..", "config", "manifests", "bases", "placement-guard.clusterserviceversion.yaml"),
		SamplesDir: filepath.Join("..", "..", "config", "samples"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestCommittedBundleIsInSyncWithConfig(t *testing.T) {
	files := generate(t, render(t))
	var onDisk []string
	root := filepath.Join("..", "..", "bundle")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != "README.md" {
			rel, _ := filepath.Rel(root, path)
			onDisk = append(onDisk, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for name := range files {
		want = append(want, name)
	}
	sort.Strings(onDisk)
	sort.Strings(want)
	if !reflect.DeepEqual(onDisk, want) {
		t.Fatalf("bundle/ holds %v, make bundle writes %v; run `make bundle` and commit", onDisk, want)
	}
	for name, content := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, content) {
			t.Errorf("bundle/%s is stale; run `make bundle` and commit", name)
		}
	}
}

// csv is the part of a ClusterServiceVersion the checks read.
type csv struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Version        string `json:"version"`
		MinKubeVersion string `json:"minKubeVersion"`
		Description    string `json:"description"`
		Icon           []struct {
			Base64Data string `json:"base64data"`
			MediaType  string `json:"mediatype"`
		} `json:"icon"`
		InstallModes []struct {
			Type      string `json:"type"`
			Supported bool   `json:"supported"`
		} `json:"installModes"`
		CustomResourceDefinitions struct {
			Owned []struct {
				Name              string                  `json:"name"`
				Version           string                  `json:"version"`
				Kind              string                  `json:"kind"`
				SpecDescriptors   []struct{ Path string } `json:"specDescriptors"`
				StatusDescriptors []struct{ Path string } `json:"statusDescriptors"`
			} `json:"owned"`
		} `json:"customresourcedefinitions"`
		WebhookDefinitions []struct {
			Type           string                                       `json:"type"`
			DeploymentName string                                       `json:"deploymentName"`
			ContainerPort  int32                                        `json:"containerPort"`
			WebhookPath    string                                       `json:"webhookPath"`
			FailurePolicy  string                                       `json:"failurePolicy"`
			Rules          []admissionregistrationv1.RuleWithOperations `json:"rules"`
		} `json:"webhookdefinitions"`
		Install struct {
			Strategy string `json:"strategy"`
			Spec     struct {
				ClusterPermissions []struct {
					ServiceAccountName string              `json:"serviceAccountName"`
					Rules              []rbacv1.PolicyRule `json:"rules"`
				} `json:"clusterPermissions"`
				Permissions []struct {
					Rules []rbacv1.PolicyRule `json:"rules"`
				} `json:"permissions"`
				Deployments []struct {
					Name string                `json:"name"`
					Spec appsv1.DeploymentSpec `json:"spec"`
				} `json:"deployments"`
			} `json:"spec"`
		} `json:"install"`
	} `json:"spec"`
}

func TestBundleIsStructurallyValid(t *testing.T) {
	rendered := render(t)
	files := generate(t, rendered)
	var c csv
	must(t, yaml.Unmarshal(files[csvFile], &c))
	objs, err := decodeAll(rendered)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	var deployment appsv1.Deployment
	var managerRole rbacv1.ClusterRole
	for _, o := range objs {
		switch {
		case o.GetKind() == "CustomResourceDefinition":
			must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &crd))
		case o.GetKind() == "Deployment":
			must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &deployment))
		case o.GetKind() == "ClusterRole" && o.GetName() == "placement-guard-manager-role":
			must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &managerRole))
		}
	}

	if c.Kind != "ClusterServiceVersion" || c.Metadata.Name != "placement-guard.v"+c.Spec.Version || c.Spec.MinKubeVersion == "" || c.Spec.Description == "" {
		t.Errorf("name %q, version %q, minKubeVersion %q: a CSV is named after its version and says what it needs", c.Metadata.Name, c.Spec.Version, c.Spec.MinKubeVersion)
	}
	if len(c.Spec.Icon) != 1 || c.Spec.Icon[0].Base64Data == "" || c.Spec.Icon[0].MediaType == "" {
		t.Error("the CSV needs an icon")
	}
	modes := map[string]bool{}
	for _, m := range c.Spec.InstallModes {
		modes[m.Type] = m.Supported
	}
	if len(modes) != 4 || !modes["AllNamespaces"] {
		t.Errorf("install modes %v: all four listed, AllNamespaces supported (the operator watches nodes and pods cluster-wide)", modes)
	}
	owned := c.Spec.CustomResourceDefinitions.Owned
	if len(owned) != 1 || owned[0].Name != crd.Name || owned[0].Kind != crd.Spec.Names.Kind || owned[0].Version != crd.Spec.Versions[0].Name {
		t.Fatalf("owned CRDs %+v, want %s", owned, crd.Name)
	}
	schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, d := range owned[0].SpecDescriptors {
		mustHavePath(t, schema.Properties["spec"], d.Path)
	}
	for _, d := range owned[0].StatusDescriptors {
		mustHavePath(t, schema.Properties["status"], d.Path)
	}
	if c.Spec.Install.Strategy != "deployment" || len(c.Spec.Install.Spec.Deployments) != 1 {
		t.Fatalf("install strategy %q with %d deployments", c.Spec.Install.Strategy, len(c.Spec.Install.Spec.Deployments))
	}
	// The CSV's manager is config/default's, serving the certificate OLM
	// mounts instead of keeping one.
	want := deployment.DeepCopy()
	servedByOLM(want)
	if got := c.Spec.Install.Spec.Deployments[0]; got.Name != deployment.Name || !reflect.DeepEqual(got.Spec, want.Spec) {
		t.Error("the CSV's deployment differs from config/default's manager Deployment")
	}
	args := c.Spec.Install.Spec.Deployments[0].Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--webhook-cert-path="+olmCertDir) || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--webhook-cert-secret") }) {
		t.Errorf("the bundle's manager must serve OLM's certificate: %v", args)
	}
	var webhookPort int32
	for _, p := range deployment.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "webhook-server" {
			webhookPort = p.ContainerPort
		}
	}
	defs := c.Spec.WebhookDefinitions
	paths := map[string]string{"ValidatingAdmissionWebhook": "/validate-workloads", "MutatingAdmissionWebhook": "/adopt-workloads"}
	if len(defs) != len(paths) {
		t.Errorf("webhook definitions %+v: want the check's and Adopt mode's", defs)
	}
	for _, d := range defs {
		if d.DeploymentName != deployment.Name || d.ContainerPort != webhookPort || d.WebhookPath != paths[d.Type] || d.FailurePolicy != "Ignore" || len(d.Rules) != 1 {
			t.Errorf("webhook definition %+v: want %s at %s, on the manager's port %d", d, d.Type, paths[d.Type], webhookPort)
		}
		delete(paths, d.Type)
	}
	for _, perms := range c.Spec.Install.Spec.Permissions {
		for _, r := range perms.Rules {
			if slices.Contains(r.Resources, "secrets") {
				t.Errorf("under OLM the manager keeps no certificate, yet may %v secrets", r.Verbs)
			}
		}
	}
	perms := c.Spec.Install.Spec.ClusterPermissions
	if len(perms) != 1 || perms[0].ServiceAccountName != deployment.Spec.Template.Spec.ServiceAccountName {
		t.Fatalf("cluster permissions %+v, want one entry for the manager's ServiceAccount", perms)
	}
	if !reflect.DeepEqual(perms[0].Rules[:len(managerRole.Rules)], managerRole.Rules) {
		t.Error("the CSV's cluster permissions do not start with the manager ClusterRole's rules")
	}
	var examples []map[string]any
	if err := json.Unmarshal([]byte(c.Metadata.Annotations["alm-examples"]), &examples); err != nil || len(examples) == 0 {
		t.Fatalf("alm-examples must be a JSON list of samples: %v", err)
	}
	for _, e := range examples {
		if e["kind"] != crd.Spec.Names.Kind {
			t.Errorf("alm-example of kind %v", e["kind"])
		}
	}
	var annotations struct {
		Annotations map[string]string `json:"annotations"`
	}
	must(t, yaml.Unmarshal(files["metadata/annotations.yaml"], &annotations))
	for _, k := range []string{"mediatype.v1", "manifests.v1", "metadata.v1", "package.v1", "channels.v1"} {
		if annotations.Annotations["operators.operatorframework.io.bundle."+k] == "" {
			t.Errorf("metadata/annotations.yaml lacks %s", k)
		}
	}
	if crdFile := files["manifests/"+crd.Name+".yaml"]; len(crdFile) == 0 {
		t.Error("the bundle does not carry the CRD")
	}
}

func mustHavePath(t *testing.T, s apiextensionsv1.JSONSchemaProps, path string) {
	t.Helper()
	for _, p := range bytes.Split([]byte(path), []byte(".")) {
		child, ok := s.Properties[string(p)]
		if !ok {
			t.Errorf("descriptor path %s is not in the CRD schema", path)
			return
		}
		s = child
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Package kubernetes holds agentd's Kubernetes manifests. Its only Go file
// is this test, which validates them with no cluster and no network: every
// document is decoded strictly (unknown fields are errors) into the
// k8s.io/api type of its kind, so a misspelt field fails CI instead of
// being dropped by the API server. The k8s.io dependency stays here.
package kubernetes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	k8sjson "sigs.k8s.io/json"
)

// decodeAll strictly decodes every document of a manifest file.
func decodeAll(manifest []byte) ([]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	var out []any
	for i := 0; ; i++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if doc == nil {
			continue
		}
		var obj any
		switch fmt.Sprint(doc["apiVersion"], " ", doc["kind"]) {
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1 Secret":
			obj = &corev1.Secret{}
		case "policy/v1 PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		default:
			return nil, fmt.Errorf("document %d: unknown kind %v %v", i, doc["apiVersion"], doc["kind"])
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		// As the API server decodes: field names are case-sensitive
		// (encoding/json's are not), and here unknown or repeated fields
		// are errors rather than dropped.
		strict, err := k8sjson.UnmarshalStrict(b, obj, k8sjson.DisallowUnknownFields, k8sjson.DisallowDuplicateFields)
		if err = errors.Join(append(strict, err)...); err != nil {
			return nil, fmt.Errorf("document %d (%v %v): %w", i, doc["kind"], doc["metadata"], err)
		}
		out = append(out, obj)
	}
}

func TestManifestsDecodeStrictly(t *testing.T) {
	b, err := os.ReadFile("agentd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(b)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[fmt.Sprintf("%T", o)] = true
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		switch {
		case c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz":
			t.Errorf("readiness probe is not GET /readyz: %+v", c.ReadinessProbe)
		case c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz":
			t.Errorf("liveness probe is not GET /healthz: %+v", c.LivenessProbe)
		case c.Lifecycle == nil || c.Lifecycle.PreStop == nil:
			t.Error("no preStop drain")
		case d.Spec.Template.Spec.SecurityContext == nil || d.Spec.Template.Spec.SecurityContext.RunAsNonRoot == nil ||
			!*d.Spec.Template.Spec.SecurityContext.RunAsNonRoot:
			t.Error("pods may run as root")
		case d.Spec.Template.Annotations["prometheus.io/scrape"] != "true":
			t.Error("no scrape annotations")
		}
	}
	for _, k := range []string{"*v1.Deployment", "*v1.Service", "*v1.ConfigMap", "*v1.Secret", "*v1.PodDisruptionBudget"} {
		if !kinds[k] {
			t.Errorf("no %s in agentd.yaml", k)
		}
	}
}

// A misspelt field must fail the validation, not vanish.
func TestManifestTypoIsRejected(t *testing.T) {
	b, err := os.ReadFile("agentd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, typo := range [][2]string{
		{"readinessProbe:", "readinesProbe:"},
		{"maxUnavailable: 1", "maxUnavailble: 1"},
		{"targetPort: http", "targetport: http"},
	} {
		bad := strings.Replace(string(b), typo[0], typo[1], 1)
		if bad == string(b) {
			t.Fatalf("%q is not in the manifest", typo[0])
		}
		if _, err := decodeAll([]byte(bad)); err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("typo %q → %q: err = %v, want an unknown field", typo[0], typo[1], err)
		}
	}
}

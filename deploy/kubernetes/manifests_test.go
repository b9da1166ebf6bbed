// Package kubernetes holds agentd's Kubernetes manifests. Its only Go file
// is this test, which validates them with no cluster and no network: every
// document is decoded strictly (unknown fields are errors) into the
// k8s.io/api type of its kind, so a misspelt field fails CI instead of
// being dropped by the API server; and the objects must fit together
// (selectors and pod labels, named ports, the ConfigMaps and Secrets the
// pods read, and that their keys are settings agentd reads), which no
// single object's validation shows. The k8s.io dependency stays here.
package kubernetes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
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

// TestManifestsFitTogether: the objects of agentd.yaml refer to each other
// correctly, which strict decoding alone does not show.
func TestManifestsFitTogether(t *testing.T) {
	objs := loadManifests(t)
	settings := agentdSettings(t)
	for _, p := range misfits(objs, settings) {
		t.Error(p)
	}
}

// TestMisfitsAreFound breaks one reference at a time and checks that
// misfits reports it.
func TestMisfitsAreFound(t *testing.T) {
	settings := agentdSettings(t)
	deployment := func(objs []any) *appsv1.Deployment { return find[*appsv1.Deployment](t, objs) }
	for _, c := range []struct {
		name, want string
		change     func([]any)
	}{
		{"the Service selects other pods", "Service agentd: its selector map[app.kubernetes.io/name:agentd-api] selects no pod", func(objs []any) {
			find[*corev1.Service](t, objs).Spec.Selector = map[string]string{"app.kubernetes.io/name": "agentd-api"}
		}},
		{"the Service has no selector", "Service agentd: no selector", func(objs []any) {
			find[*corev1.Service](t, objs).Spec.Selector = nil
		}},
		{"the Service targets a port no container names", `Service agentd: port http targets "web", which no container port of its pods is`, func(objs []any) {
			find[*corev1.Service](t, objs).Spec.Ports[0].TargetPort = intstr.FromString("web")
		}},
		{"the Service targets a port number no container has", `Service agentd: port http targets "9090", which no container port of its pods is`, func(objs []any) {
			find[*corev1.Service](t, objs).Spec.Ports[0].TargetPort = intstr.FromInt32(9090)
		}},
		{"the container's port is renamed", `Deployment agentd: container agentd: readiness probe targets "http", which no container port of its pods is`, func(objs []any) {
			deployment(objs).Spec.Template.Spec.Containers[0].Ports[0].Name = "api"
		}},
		{"the Deployment's selector misses its pods", "Deployment agentd: its selector app.kubernetes.io/name=agentd does not select its own pod template", func(objs []any) {
			deployment(objs).Spec.Template.Labels = map[string]string{"app": "agentd"}
		}},
		{"the disruption budget selects other pods", "PodDisruptionBudget agentd: its selector app.kubernetes.io/name=other selects no pod", func(objs []any) {
			find[*policyv1.PodDisruptionBudget](t, objs).Spec.Selector.MatchLabels = map[string]string{"app.kubernetes.io/name": "other"}
		}},
		{"the scrape port is not the container's", `Deployment agentd: prometheus.io/port "9090" is not a container port`, func(objs []any) {
			deployment(objs).Spec.Template.Annotations["prometheus.io/port"] = "9090"
		}},
		{"envFrom names a Secret the file lacks", "Deployment agentd: container agentd: envFrom names Secret agentd-secrets, which is not in the file", func(objs []any) {
			deployment(objs).Spec.Template.Spec.Containers[0].EnvFrom[1].SecretRef.Name = "agentd-secrets"
		}},
		{"envFrom names a ConfigMap the file lacks", "Deployment agentd: container agentd: envFrom names ConfigMap agentd-config, which is not in the file", func(objs []any) {
			deployment(objs).Spec.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name = "agentd-config"
		}},
		{"an env var reads a Secret key that is not there", "Deployment agentd: container agentd: env OPENAI_API_KEY reads key OPENAI_KEY of Secret agentd, which has no such key", func(objs []any) {
			c := &deployment(objs).Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "OPENAI_API_KEY", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "agentd"}, Key: "OPENAI_KEY"}}})
		}},
		{"a volume mounts a ConfigMap the file lacks", "Deployment agentd: volume prompts mounts ConfigMap agentd-prompts, which is not in the file", func(objs []any) {
			d := deployment(objs)
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "prompts", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "agentd-prompts"}}}})
		}},
		{"a ConfigMap key agentd does not read", "ConfigMap agentd: key AGENTD_SHUTDOWN_GRACEFUL, loaded into container agentd's environment, is not a setting agentd reads", func(objs []any) {
			cm := findNamed[*corev1.ConfigMap](t, objs, "agentd")
			cm.Data["AGENTD_SHUTDOWN_GRACEFUL"] = cm.Data["AGENTD_SHUTDOWN_GRACE"]
			delete(cm.Data, "AGENTD_SHUTDOWN_GRACE")
		}},
		{"a Secret key agentd does not read", "Secret agentd: key AGENTD_APIKEYS, loaded into container agentd's environment, is not a setting agentd reads", func(objs []any) {
			s := findNamed[*corev1.Secret](t, objs, "agentd")
			s.StringData["AGENTD_APIKEYS"] = s.StringData["AGENTD_API_KEYS"]
			delete(s.StringData, "AGENTD_API_KEYS")
		}},
	} {
		objs := loadManifests(t)
		c.change(objs)
		got := misfits(objs, settings)
		if !slices.Contains(got, c.want) {
			t.Errorf("%s: misfits = %q, want %q among them", c.name, got, c.want)
		}
	}
}

func loadManifests(t *testing.T) []any {
	t.Helper()
	b, err := os.ReadFile("agentd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(b)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// find returns the one object of type T.
func find[T any](t *testing.T, objs []any) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%d objects of type %T in agentd.yaml, want 1", len(found), zero)
	}
	return found[0]
}

// findNamed returns the object of type T with the given name.
func findNamed[T interface{ GetName() string }](t *testing.T, objs []any, name string) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.(T); ok && v.GetName() == name {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T named %s in agentd.yaml", zero, name)
	return zero
}

// settingRE finds the quoted environment variable names in cmd/agentd's
// code: the settings agentd reads.
var settingRE = regexp.MustCompile(`"((?:AGENTD|OPENAI|OTEL|GO)[A-Z0-9_]*)"`)

// agentdSettings are the environment variables agentd reads (cmd/agentd),
// and GOMEMLIMIT and GOGC, which the Go runtime reads.
func agentdSettings(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "cmd", "agentd", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("cmd/agentd: %v", err)
	}
	settings := map[string]bool{"GOMEMLIMIT": true, "GOGC": true}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range settingRE.FindAllStringSubmatch(string(b), -1) {
			settings[m[1]] = true
		}
	}
	if !settings["AGENTD_DATABASE_URL"] {
		t.Fatalf("cmd/agentd does not name AGENTD_DATABASE_URL: the settings are not found (%d)", len(settings))
	}
	return settings
}

// misfits lists every reference between the objects that does not hold:
// a Deployment's selector and its pod template, the Service's and the
// disruption budget's selectors and the pods, the ports that the Service,
// the probes and the scrape annotation name and the container ports, the
// ConfigMaps and Secrets that the pods read and the file's, and the keys
// loaded into agentd's environment and the settings agentd reads.
func misfits(objs []any, settings map[string]bool) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	configMaps, secrets := map[string]map[string]bool{}, map[string]map[string]bool{}
	var pods []corev1.PodTemplateSpec
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			configMaps[o.Name] = keys(o.Data)
			maps.Copy(configMaps[o.Name], keys(o.BinaryData))
		case *corev1.Secret:
			secrets[o.Name] = keys(o.StringData)
			maps.Copy(secrets[o.Name], keys(o.Data))
		case *appsv1.Deployment:
			pods = append(pods, o.Spec.Template)
		}
	}
	// ports are the container ports of the pods a selector selects.
	ports := func(sel labels.Selector) (names map[string]bool, numbers map[int32]bool, n int) {
		names, numbers = map[string]bool{}, map[int32]bool{}
		for _, p := range pods {
			if !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			n++
			for _, c := range p.Spec.Containers {
				for _, cp := range c.Ports {
					names[cp.Name], numbers[cp.ContainerPort] = true, true
				}
			}
		}
		return names, numbers, n
	}
	targets := func(sel labels.Selector, port intstr.IntOrString) bool {
		names, numbers, _ := ports(sel)
		if port.Type == intstr.String {
			return names[port.StrVal]
		}
		return numbers[port.IntVal]
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Service:
			if len(o.Spec.Selector) == 0 {
				bad("Service %s: no selector", o.Name)
				continue
			}
			sel := labels.SelectorFromSet(o.Spec.Selector)
			if _, _, n := ports(sel); n == 0 {
				bad("Service %s: its selector %v selects no pod", o.Name, o.Spec.Selector)
				continue
			}
			for _, p := range o.Spec.Ports {
				target := p.TargetPort
				if target.Type == intstr.Int && target.IntVal == 0 {
					target = intstr.FromInt32(p.Port) // unset: the port's own number
				}
				if !targets(sel, target) {
					bad("Service %s: port %s targets %q, which no container port of its pods is", o.Name, p.Name, target.String())
				}
			}
		case *policyv1.PodDisruptionBudget:
			sel, err := metav1.LabelSelectorAsSelector(o.Spec.Selector)
			if err != nil || sel.Empty() {
				bad("PodDisruptionBudget %s: selector %v: %v", o.Name, o.Spec.Selector, err)
				continue
			}
			if _, _, n := ports(sel); n == 0 {
				bad("PodDisruptionBudget %s: its selector %v selects no pod", o.Name, sel)
			}
		case *appsv1.Deployment:
			out = append(out, deploymentMisfits(o, configMaps, secrets, settings)...)
		}
	}
	return out
}

// deploymentMisfits is misfits for one Deployment.
func deploymentMisfits(d *appsv1.Deployment, configMaps, secrets map[string]map[string]bool, settings map[string]bool) []string {
	var out []string
	bad := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("Deployment %s: ", d.Name)+fmt.Sprintf(format, args...))
	}
	pod := d.Spec.Template
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	switch {
	case err != nil || sel.Empty():
		bad("selector %v: %v", d.Spec.Selector, err)
	case !sel.Matches(labels.Set(pod.Labels)):
		bad("its selector %v does not select its own pod template", sel)
	}
	names, numbers := map[string]bool{}, map[int32]bool{}
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			names[cp.Name], numbers[cp.ContainerPort] = true, true
		}
	}
	if p, ok := pod.Annotations["prometheus.io/port"]; ok {
		n, err := strconv.Atoi(p)
		if err != nil || !numbers[int32(n)] {
			bad("prometheus.io/port %q is not a container port", p)
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range []struct {
			what  string
			probe *corev1.Probe
		}{{"startup", c.StartupProbe}, {"liveness", c.LivenessProbe}, {"readiness", c.ReadinessProbe}} {
			what, probe := p.what, p.probe
			if probe == nil {
				continue
			}
			var port intstr.IntOrString
			switch {
			case probe.HTTPGet != nil:
				port = probe.HTTPGet.Port
			case probe.TCPSocket != nil:
				port = probe.TCPSocket.Port
			default:
				continue
			}
			if port.Type == intstr.String && !names[port.StrVal] || port.Type == intstr.Int && !numbers[port.IntVal] {
				bad("container %s: %s probe targets %q, which no container port of its pods is", c.Name, what, port.String())
			}
		}
		for _, ef := range c.EnvFrom {
			var (
				kind, name string
				have       map[string]map[string]bool
				optional   *bool
			)
			switch {
			case ef.ConfigMapRef != nil:
				kind, name, have, optional = "ConfigMap", ef.ConfigMapRef.Name, configMaps, ef.ConfigMapRef.Optional
			case ef.SecretRef != nil:
				kind, name, have, optional = "Secret", ef.SecretRef.Name, secrets, ef.SecretRef.Optional
			default:
				continue
			}
			ks, ok := have[name]
			if !ok {
				if optional == nil || !*optional {
					bad("container %s: envFrom names %s %s, which is not in the file", c.Name, kind, name)
				}
				continue
			}
			for _, k := range slices.Sorted(maps.Keys(ks)) {
				if !settings[ef.Prefix+k] {
					out = append(out, fmt.Sprintf("%s %s: key %s, loaded into container %s's environment, is not a setting agentd reads", kind, name, ef.Prefix+k, c.Name))
				}
			}
		}
		for _, e := range c.Env {
			if !settings[e.Name] {
				bad("container %s: env %s is not a setting agentd reads", c.Name, e.Name)
			}
			if e.ValueFrom == nil {
				continue
			}
			var (
				kind, name, key string
				have            map[string]map[string]bool
				optional        *bool
			)
			switch {
			case e.ValueFrom.ConfigMapKeyRef != nil:
				r := e.ValueFrom.ConfigMapKeyRef
				kind, name, key, have, optional = "ConfigMap", r.Name, r.Key, configMaps, r.Optional
			case e.ValueFrom.SecretKeyRef != nil:
				r := e.ValueFrom.SecretKeyRef
				kind, name, key, have, optional = "Secret", r.Name, r.Key, secrets, r.Optional
			default:
				continue
			}
			if ks, ok := have[name]; (!ok || !ks[key]) && (optional == nil || !*optional) {
				if !ok {
					bad("container %s: env %s reads %s %s, which is not in the file", c.Name, e.Name, kind, name)
				} else {
					bad("container %s: env %s reads key %s of %s %s, which has no such key", c.Name, e.Name, key, kind, name)
				}
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		var (
			kind, name string
			have       map[string]map[string]bool
			optional   *bool
			items      []corev1.KeyToPath
		)
		switch {
		case v.ConfigMap != nil:
			kind, name, have, optional, items = "ConfigMap", v.ConfigMap.Name, configMaps, v.ConfigMap.Optional, v.ConfigMap.Items
		case v.Secret != nil:
			kind, name, have, optional, items = "Secret", v.Secret.SecretName, secrets, v.Secret.Optional, v.Secret.Items
		default:
			continue
		}
		ks, ok := have[name]
		switch {
		case !ok && (optional == nil || !*optional):
			bad("volume %s mounts %s %s, which is not in the file", v.Name, kind, name)
		case ok:
			for _, it := range items {
				if !ks[it.Key] {
					bad("volume %s mounts key %s of %s %s, which has no such key", v.Name, it.Key, kind, name)
				}
			}
		}
	}
	return out
}

// keys is the set of keys of m.
func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/counterd/counterd/internal/admin"
	"github.com/counterd/counterd/internal/config"
)

// image is the counterd image every manifest names: `make image`'s,
// pushed under the release's version.
const image = "ghcr.io/counterd/counterd:VERSION"

// imageUser is the image's numeric user (deploy/image).
const imageUser = 65532

// kinds are the kinds a manifest may hold, with their apiVersion; any
// other kind fails the test.
var kinds = map[string]struct {
	apiVersion string
	new        func() any
}{
	"Deployment":    {"apps/v1", func() any { return &appsv1.Deployment{} }},
	"CronJob":       {"batch/v1", func() any { return &batchv1.CronJob{} }},
	"Secret":        {"v1", func() any { return &corev1.Secret{} }},
	"ConfigMap":     {"v1", func() any { return &corev1.ConfigMap{} }},
	"NetworkPolicy": {"networking.k8s.io/v1", func() any { return &networkingv1.NetworkPolicy{} }},
}

// manifests are the decoded objects of every file.
type manifests struct {
	deployments []*appsv1.Deployment
	cronJobs    []*batchv1.CronJob
	secrets     map[string]*corev1.Secret
	configMaps  map[string]*corev1.ConfigMap
	policies    []*networkingv1.NetworkPolicy
}

// load decodes every document of *.yaml and alternatives/*.yaml strictly
// (an unknown or duplicated field is an error) into the API's types.
func load(t *testing.T) manifests {
	t.Helper()
	m := manifests{secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{}}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	alt, err := filepath.Glob("alternatives/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, alt...)
	if len(files) == 0 {
		t.Fatal("no manifests")
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range documents(b) {
			where := fmt.Sprintf("%s document %d", file, i+1)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			k, ok := kinds[tm.Kind]
			if !ok {
				t.Fatalf("%s: kind %q is not one this test knows; add it to kinds with its checks", where, tm.Kind)
			}
			if tm.APIVersion != k.apiVersion {
				t.Fatalf("%s: %s apiVersion %q; want %q", where, tm.Kind, tm.APIVersion, k.apiVersion)
			}
			obj := k.new()
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s: strict decoding into %T: %v", where, obj, err)
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				m.deployments = append(m.deployments, o)
			case *batchv1.CronJob:
				m.cronJobs = append(m.cronJobs, o)
			case *corev1.Secret:
				m.secrets[o.Name] = o
			case *corev1.ConfigMap:
				m.configMaps[o.Name] = o
			case *networkingv1.NetworkPolicy:
				m.policies = append(m.policies, o)
			}
			if reflect.ValueOf(obj).Elem().FieldByName("ObjectMeta").Interface().(metav1.ObjectMeta).Name == "" {
				t.Errorf("%s: no metadata.name", where)
			}
		}
	}
	return m
}

// documents splits a multi-document YAML file, leaving out documents
// that hold only comments.
func documents(b []byte) [][]byte {
	var out [][]byte
	for _, doc := range bytes.Split(append([]byte("\n"), b...), []byte("\n---")) {
		empty := true
		for _, line := range strings.Split(string(doc), "\n") {
			if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
				empty = false
			}
		}
		if !empty {
			out = append(out, doc)
		}
	}
	return out
}

// pod is one pod template and where it comes from.
type pod struct {
	where string
	spec  *corev1.PodSpec
}

func (m manifests) pods() []pod {
	var out []pod
	for _, d := range m.deployments {
		out = append(out, pod{"Deployment " + d.Name, &d.Spec.Template.Spec})
	}
	for _, c := range m.cronJobs {
		out = append(out, pod{"CronJob " + c.Name, &c.Spec.JobTemplate.Spec.Template.Spec})
	}
	return out
}

// variables lists the variables a configuration struct reads (its env
// tags), as counterd -h does.
func variables[T any]() []string {
	var out []string
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("env"), ","); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// env resolves a container's environment: envFrom ConfigMaps, then env.
// A value from a Secret is left as its EnvVar, with no Value.
func (m manifests) env(t *testing.T, where string, c corev1.Container) map[string]corev1.EnvVar {
	t.Helper()
	out := map[string]corev1.EnvVar{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil || from.Prefix != "" {
			t.Errorf("%s: container %s: envFrom other than a ConfigMap without prefix", where, c.Name)
			continue
		}
		cm, ok := m.configMaps[from.ConfigMapRef.Name]
		if !ok {
			t.Errorf("%s: container %s: envFrom ConfigMap %q is in no manifest", where, c.Name, from.ConfigMapRef.Name)
			continue
		}
		for k, v := range cm.Data {
			out[k] = corev1.EnvVar{Name: k, Value: v}
		}
	}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

// environ turns env into KEY=VALUE pairs for config.Load, each Secret
// reference replaced by the Secret's (placeholder) value.
func (m manifests) environ(t *testing.T, where string, env map[string]corev1.EnvVar) []string {
	t.Helper()
	var out []string
	for name, e := range env {
		v := e.Value
		if ref := secretRef(e); ref != nil {
			v = m.secretValue(t, where, ref)
		}
		out = append(out, name+"="+v)
	}
	return out
}

func secretRef(e corev1.EnvVar) *corev1.SecretKeySelector {
	if e.ValueFrom == nil {
		return nil
	}
	return e.ValueFrom.SecretKeyRef
}

func (m manifests) secretValue(t *testing.T, where string, ref *corev1.SecretKeySelector) string {
	t.Helper()
	s, ok := m.secrets[ref.Name]
	if !ok {
		t.Errorf("%s: Secret %q is in no manifest", where, ref.Name)
		return ""
	}
	if v, ok := s.StringData[ref.Key]; ok {
		return v
	}
	if v, ok := s.Data[ref.Key]; ok {
		return string(v)
	}
	t.Errorf("%s: Secret %q has no key %q", where, ref.Name, ref.Key)
	return ""
}

// isCounterd says whether c runs counterd: the image with its own
// entrypoint.
func isCounterd(c corev1.Container) bool {
	return strings.HasPrefix(c.Image, "ghcr.io/counterd/") && (len(c.Command) == 0 || path.Base(c.Command[0]) == "counterd")
}

// isRollup says whether c runs rollup.
func isRollup(c corev1.Container) bool {
	return strings.HasPrefix(c.Image, "ghcr.io/counterd/") && len(c.Command) > 0 && path.Base(c.Command[0]) == "rollup"
}

// sidecar is the app pod's counterd: its template, its sidecar and its
// app containers.
type sidecar struct {
	where string
	d     *appsv1.Deployment
	c     corev1.Container
	apps  []corev1.Container
}

func (m manifests) sidecars(t *testing.T) []sidecar {
	t.Helper()
	var out []sidecar
	for _, d := range m.deployments {
		spec := &d.Spec.Template.Spec
		for _, c := range spec.Containers {
			if isCounterd(c) {
				t.Errorf("Deployment %s: counterd is a regular container; make it a native sidecar (an initContainers entry with restartPolicy: Always) so it starts before the app and stops after it", d.Name)
			}
		}
		for _, c := range spec.InitContainers {
			if !isCounterd(c) {
				continue
			}
			if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
				t.Errorf("Deployment %s: init container %s runs counterd without restartPolicy: Always", d.Name, c.Name)
			}
			out = append(out, sidecar{where: "Deployment " + d.Name, d: d, c: c, apps: spec.Containers})
		}
	}
	if len(out) == 0 {
		t.Fatal("no Deployment has a counterd sidecar")
	}
	return out
}

// loadCounterd checks the sidecar's variables are counterd's and loads
// them as counterd would.
func (m manifests) loadCounterd(t *testing.T, s sidecar) (config.Counterd, map[string]corev1.EnvVar) {
	t.Helper()
	env := m.env(t, s.where, s.c)
	known := variables[config.Counterd]()
	for name := range env {
		if !slices.Contains(known, name) {
			t.Errorf("%s: counterd is given %s, which it does not read (internal/config)", s.where, name)
		}
	}
	cfg, err := config.Load[config.Counterd](m.environ(t, s.where, env))
	if err != nil {
		t.Fatalf("%s: counterd would refuse its settings: %v", s.where, err)
	}
	return cfg, env
}

// TestManifestsDecode decodes every manifest strictly; load fails on
// anything else.
func TestManifestsDecode(t *testing.T) {
	t.Parallel()
	m := load(t)
	if len(m.deployments) == 0 || len(m.secrets) == 0 {
		t.Fatalf("decoded %d Deployments and %d Secrets; want some of each", len(m.deployments), len(m.secrets))
	}
}

// The database URL, which holds the password, comes from a Secret in
// every container that reads it, and from nowhere else.
func TestDatabaseURLFromSecret(t *testing.T) {
	t.Parallel()
	m := load(t)
	for _, p := range m.pods() {
		for _, c := range slices.Concat(p.spec.InitContainers, p.spec.Containers) {
			if !isCounterd(c) && !isRollup(c) {
				continue
			}
			env := m.env(t, p.where, c)
			e, ok := env["DATABASE_URL"]
			if !ok || secretRef(e) == nil || e.Value != "" {
				t.Errorf("%s: container %s: DATABASE_URL %+v; want it from a secretKeyRef", p.where, c.Name, e)
				continue
			}
			m.secretValue(t, p.where, secretRef(e))
			if e, ok := env["COUNTERD_PASSWORD"]; ok && secretRef(e) == nil {
				t.Errorf("%s: container %s: COUNTERD_PASSWORD is a literal; want a secretKeyRef", p.where, c.Name)
			}
		}
	}
	for name, cm := range m.configMaps {
		for _, k := range []string{"DATABASE_URL", "COUNTERD_PASSWORD"} {
			if _, ok := cm.Data[k]; ok {
				t.Errorf("ConfigMap %s holds %s; it belongs in a Secret", name, k)
			}
		}
	}
	for name, s := range m.secrets {
		for k, v := range s.StringData {
			if !strings.Contains(v, "CHANGE-ME") {
				t.Errorf("Secret %s key %s: %q is not an obvious placeholder (CHANGE-ME)", name, k, v)
			}
		}
	}
}

// Every ConfigMap key a counterd sidecar reads is a counterd variable
// (loadCounterd checks the resolved environment), and the settings load
// as counterd would load them.
func TestSidecarSettingsAreCounterds(t *testing.T) {
	t.Parallel()
	m := load(t)
	for _, s := range m.sidecars(t) {
		cfg, _ := m.loadCounterd(t, s)
		if s.c.Image != image {
			t.Errorf("%s: image %q; want %q", s.where, s.c.Image, image)
		}
		if cfg.IO == "" || cfg.Socket == "" {
			t.Errorf("%s: loaded settings lack the socket or the I/O mode: %+v", s.where, cfg)
		}
	}
}

// The app reaches the sidecar's socket: the same volume mounted at the
// same path in both, the socket in a subdirectory of it (counterd refuses
// a socket directory others can write, and an emptyDir is 0777), and the
// app's COUNTERD_SOCKET and REDIS_URL naming that path. The app runs as
// counterd's user, since the socket is 0600 in a 0700 directory.
func TestSocketAgrees(t *testing.T) {
	t.Parallel()
	m := load(t)
	for _, s := range m.sidecars(t) {
		cfg, _ := m.loadCounterd(t, s)
		mount, ok := mountOf(s.c, filepath.Dir(cfg.Socket))
		if !ok {
			t.Errorf("%s: no volume holds the socket's directory %s", s.where, filepath.Dir(cfg.Socket))
			continue
		}
		if filepath.Dir(cfg.Socket) == mount.MountPath {
			t.Errorf("%s: socket %s directly in the volume's mount %s; counterd refuses a 0777 emptyDir, so put it in a subdirectory", s.where, cfg.Socket, mount.MountPath)
		}
		if v := volume(s.d.Spec.Template.Spec, mount.Name); v == nil || v.EmptyDir == nil {
			t.Errorf("%s: socket volume %s is not an emptyDir", s.where, mount.Name)
		}
		if len(s.apps) == 0 {
			t.Errorf("%s: no app container", s.where)
		}
		uid := effective(s.d.Spec.Template.Spec, s.c).RunAsUser
		for _, app := range s.apps {
			if !slices.ContainsFunc(app.VolumeMounts, func(vm corev1.VolumeMount) bool {
				return vm.Name == mount.Name && vm.MountPath == mount.MountPath && vm.SubPath == "" && vm.SubPathExpr == ""
			}) {
				t.Errorf("%s: app container %s does not mount volume %s at %s", s.where, app.Name, mount.Name, mount.MountPath)
			}
			env := m.env(t, s.where, app)
			if got := env["COUNTERD_SOCKET"].Value; got != cfg.Socket {
				t.Errorf("%s: app container %s: COUNTERD_SOCKET %q; want the sidecar's %q", s.where, app.Name, got, cfg.Socket)
			}
			if got, want := env["REDIS_URL"].Value, "unix://"+cfg.Socket; got != want {
				t.Errorf("%s: app container %s: REDIS_URL %q; want %q", s.where, app.Name, got, want)
			}
			if got := effective(s.d.Spec.Template.Spec, app).RunAsUser; got == nil || uid == nil || *got != *uid {
				t.Errorf("%s: app container %s runs as user %v, counterd as %v; want the same (the socket is 0600 in a 0700 directory)", s.where, app.Name, deref(got), deref(uid))
			}
			if _, ok := mountOf(app, cfg.JournalDir); ok {
				t.Errorf("%s: app container %s mounts the journal's volume", s.where, app.Name)
			}
		}
	}
}

// The kubelet reaches the metrics listener: COUNTERD_METRICS_ADDR is not
// loopback, and its port is the container's metrics port and every
// probe's. Startup and liveness ask /healthz; readiness asks /acceptingz,
// never /readyz, which is 503 while PostgreSQL is down, and a sidecar's
// readiness is its pod's. admin's handler answers each probe's path 200
// while /readyz fails.
func TestSidecarProbes(t *testing.T) {
	t.Parallel()
	m := load(t)
	for _, s := range m.sidecars(t) {
		cfg, _ := m.loadCounterd(t, s)
		port := listenPort(t, s.where, "COUNTERD_METRICS_ADDR", cfg.MetricsAddr)
		checkPorts(t, s.where, s.c, port)
		probes := map[string]*corev1.Probe{"startupProbe": s.c.StartupProbe, "livenessProbe": s.c.LivenessProbe, "readinessProbe": s.c.ReadinessProbe}
		want := map[string]string{"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/acceptingz"}
		h := admin.New(admin.Options{
			Ready:     func(context.Context) (string, error) { return "", errors.New("database unreachable") },
			Accepting: func() error { return nil },
		})
		for name, p := range probes {
			if p == nil || p.HTTPGet == nil {
				t.Errorf("%s: no HTTP %s", s.where, name)
				continue
			}
			if p.HTTPGet.Path != want[name] {
				t.Errorf("%s: %s path %q; want %q", s.where, name, p.HTTPGet.Path, want[name])
			}
			if p.HTTPGet.Path == "/readyz" && name != "livenessProbe" {
				t.Errorf("%s: %s on /readyz would take the pod out of service during a PostgreSQL outage", s.where, name)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.HTTPGet.Path, nil))
			if rec.Code != http.StatusOK {
				t.Errorf("%s: %s path %s: counterd answers %d with the database down; want 200", s.where, name, p.HTTPGet.Path, rec.Code)
			}
		}
	}
}

// listenPort returns the port of a listen address that is not loopback.
func listenPort(t *testing.T, where, name, addr string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: %s %q: %v", where, name, addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		t.Errorf("%s: %s %q is loopback; the kubelet probes the pod's IP", where, name, addr)
	}
	return port
}

// checkPorts checks that c declares port as its port named metrics and
// that every probe asks it.
func checkPorts(t *testing.T, where string, c corev1.Container, port string) {
	t.Helper()
	named := map[string]string{}
	for _, p := range c.Ports {
		named[p.Name] = fmt.Sprint(p.ContainerPort)
	}
	if named["metrics"] != port {
		t.Errorf("%s: container %s: port named metrics is %q; want the listener's %s", where, c.Name, named["metrics"], port)
	}
	for name, p := range map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			continue
		}
		got := p.HTTPGet.Port.String()
		if n, ok := named[got]; ok {
			got = n
		}
		if got != port {
			t.Errorf("%s: container %s: %s asks port %s; the listener is on %s", where, c.Name, name, p.HTTPGet.Port.String(), port)
		}
	}
}

// The grace period covers the app's drain and counterd's: connections
// answered and the final flush within COUNTERD_SHUTDOWN_TIMEOUT of its
// SIGTERM, then budget leases returned within as long again. The sidecar
// gets SIGTERM only once the app has exited, so twice the timeout plus
// margin is the least; the app's own time comes on top.
func TestGracePeriodCoversShutdown(t *testing.T) {
	t.Parallel()
	m := load(t)
	for _, s := range m.sidecars(t) {
		cfg, _ := m.loadCounterd(t, s)
		grace := s.d.Spec.Template.Spec.TerminationGracePeriodSeconds
		least := 2*cfg.ShutdownTimeout + 10*time.Second
		if grace == nil || time.Duration(*grace)*time.Second <= least {
			t.Errorf("%s: terminationGracePeriodSeconds %v; want more than %s (2 x COUNTERD_SHUTDOWN_TIMEOUT %s + 10 s)", s.where, deref(grace), least, cfg.ShutdownTimeout)
		}
	}
}

// The journal is on a volume that survives container restarts (an
// emptyDir on disk, not memory), in a subdirectory counterd creates, with
// room for COUNTERD_JOURNAL_MAX_BYTES twice over: past its sizeLimit the
// kubelet evicts the pod, and the journal with it. The pod's
// ephemeral-storage limit, when set, covers the disk emptyDirs.
func TestJournalVolume(t *testing.T) {
	t.Parallel()
	m := load(t)
	for _, s := range m.sidecars(t) {
		cfg, _ := m.loadCounterd(t, s)
		spec := s.d.Spec.Template.Spec
		mount, ok := mountOf(s.c, cfg.JournalDir)
		if !ok || mount.MountPath == cfg.JournalDir {
			t.Errorf("%s: COUNTERD_JOURNAL_DIR %s is not in a subdirectory of a mounted volume", s.where, cfg.JournalDir)
			continue
		}
		if sock, ok := mountOf(s.c, filepath.Dir(cfg.Socket)); ok && sock.Name == mount.Name {
			t.Errorf("%s: the journal shares volume %s with the socket", s.where, mount.Name)
		}
		v := volume(spec, mount.Name)
		switch {
		case v == nil || v.EmptyDir == nil:
			t.Errorf("%s: journal volume %s is not an emptyDir (a Deployment's pods cannot each have a PVC; see README.md)", s.where, mount.Name)
			continue
		case v.EmptyDir.Medium == corev1.StorageMediumMemory:
			t.Errorf("%s: journal volume %s is in memory: it would count against the memory limit, and an OOM kill of the pod's containers is what it must survive", s.where, mount.Name)
		case v.EmptyDir.SizeLimit == nil:
			t.Errorf("%s: journal volume %s has no sizeLimit", s.where, mount.Name)
		case v.EmptyDir.SizeLimit.Value() < 2*cfg.JournalMaxBytes:
			t.Errorf("%s: journal volume %s sizeLimit %s; want at least twice COUNTERD_JOURNAL_MAX_BYTES (%d)", s.where, mount.Name, v.EmptyDir.SizeLimit, cfg.JournalMaxBytes)
		}
		var disk, limit resource.Quantity
		limited := false
		for _, v := range spec.Volumes {
			if v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory && v.EmptyDir.SizeLimit != nil {
				disk.Add(*v.EmptyDir.SizeLimit)
			}
		}
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			if q, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
				limit.Add(q)
				limited = true
			}
		}
		if limited && limit.Cmp(disk) <= 0 {
			t.Errorf("%s: ephemeral-storage limits %s do not exceed the emptyDirs' sizeLimits %s: the kubelet would evict the pod before the journal is full", s.where, &limit, &disk)
		}
	}
}

// effectiveContext is a container's security settings with the pod's
// filled in.
type effectiveContext struct {
	RunAsNonRoot, ReadOnlyRoot, NoEscalation bool
	RunAsUser                                *int64
	Seccomp                                  *corev1.SeccompProfile
	Drop, Add                                []corev1.Capability
}

func effective(spec corev1.PodSpec, c corev1.Container) effectiveContext {
	var e effectiveContext
	if p := spec.SecurityContext; p != nil {
		e.RunAsNonRoot = p.RunAsNonRoot != nil && *p.RunAsNonRoot
		e.RunAsUser, e.Seccomp = p.RunAsUser, p.SeccompProfile
	}
	if s := c.SecurityContext; s != nil {
		if s.RunAsNonRoot != nil {
			e.RunAsNonRoot = *s.RunAsNonRoot
		}
		if s.RunAsUser != nil {
			e.RunAsUser = s.RunAsUser
		}
		if s.SeccompProfile != nil {
			e.Seccomp = s.SeccompProfile
		}
		e.ReadOnlyRoot = s.ReadOnlyRootFilesystem != nil && *s.ReadOnlyRootFilesystem
		e.NoEscalation = s.AllowPrivilegeEscalation != nil && !*s.AllowPrivilegeEscalation
		if s.Capabilities != nil {
			e.Drop, e.Add = s.Capabilities.Drop, s.Capabilities.Add
		}
	}
	return e
}

// Every container of every pod runs as the image's non-root user with a
// read-only root, no privilege escalation, no capabilities and the
// runtime's seccomp profile; requests CPU and memory and limits memory;
// and pods running counterd or rollup get no service links or API token.
func TestPodHardening(t *testing.T) {
	t.Parallel()
	m := load(t)
	for _, p := range m.pods() {
		counterd := false
		for _, c := range slices.Concat(p.spec.InitContainers, p.spec.Containers) {
			counterd = counterd || isCounterd(c) || isRollup(c)
			e := effective(*p.spec, c)
			where := p.where + ": container " + c.Name
			if !e.RunAsNonRoot || e.RunAsUser == nil || *e.RunAsUser != imageUser {
				t.Errorf("%s: runAsNonRoot %v, runAsUser %v; want true, %d", where, e.RunAsNonRoot, deref(e.RunAsUser), imageUser)
			}
			if !e.ReadOnlyRoot || !e.NoEscalation {
				t.Errorf("%s: readOnlyRootFilesystem true: %v, allowPrivilegeEscalation false: %v; want both", where, e.ReadOnlyRoot, e.NoEscalation)
			}
			if !slices.Equal(e.Drop, []corev1.Capability{"ALL"}) || len(e.Add) > 0 {
				t.Errorf("%s: capabilities drop %v add %v; want drop [ALL], add none", where, e.Drop, e.Add)
			}
			if e.Seccomp == nil || e.Seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s: seccompProfile %+v; want RuntimeDefault", where, e.Seccomp)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					t.Errorf("%s: no %s request", where, r)
				}
			}
			if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Errorf("%s: no memory limit", where)
			}
			if (isCounterd(c) || isRollup(c)) && c.Image != image {
				t.Errorf("%s: image %q; want %q", where, c.Image, image)
			}
		}
		if counterd {
			if p.spec.EnableServiceLinks == nil || *p.spec.EnableServiceLinks {
				t.Errorf("%s: enableServiceLinks is not false: a Service named counterd would set COUNTERD_PORT", p.where)
			}
			if p.spec.AutomountServiceAccountToken == nil || *p.spec.AutomountServiceAccountToken {
				t.Errorf("%s: automountServiceAccountToken is not false: counterd and rollup need no API access", p.where)
			}
		}
	}
}

// rollup reads only its own variables and would accept them; the
// scheduler's probes ask its metrics port, and `rollup once` runs as a
// CronJob that never overlaps itself and outlasts ROLLUP_TIMEOUT.
func TestRollup(t *testing.T) {
	t.Parallel()
	m := load(t)
	known := variables[config.Rollup]()
	found := 0
	check := func(where string, c corev1.Container) config.Rollup {
		t.Helper()
		found++
		env := m.env(t, where, c)
		for name := range env {
			if !slices.Contains(known, name) {
				t.Errorf("%s: rollup is given %s, which it does not read (internal/config)", where, name)
			}
		}
		cfg, err := config.Load[config.Rollup](m.environ(t, where, env))
		if err != nil {
			t.Fatalf("%s: rollup would refuse its settings: %v", where, err)
		}
		return cfg
	}
	for _, d := range m.deployments {
		for _, c := range slices.Concat(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers) {
			if !isRollup(c) {
				continue
			}
			where := "Deployment " + d.Name
			cfg := check(where, c)
			if len(c.Args) > 0 {
				t.Errorf("%s: rollup args %q; the scheduler takes none (once would exit, and the Deployment restart it)", where, c.Args)
			}
			if cfg.MetricsAddr == config.MetricsOff {
				t.Errorf("%s: ROLLUP_METRICS_ADDR is off: nothing to probe or scrape", where)
				continue
			}
			checkPorts(t, where, c, listenPort(t, where, "ROLLUP_METRICS_ADDR", cfg.MetricsAddr))
			if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
				t.Errorf("%s: rollup's liveness probe is not /healthz", where)
			}
		}
	}
	for _, cj := range m.cronJobs {
		spec := cj.Spec.JobTemplate.Spec
		for _, c := range spec.Template.Spec.Containers {
			if !isRollup(c) {
				continue
			}
			where := "CronJob " + cj.Name
			cfg := check(where, c)
			if !slices.Equal(c.Args, []string{"once"}) {
				t.Errorf("%s: rollup args %q; want [once]", where, c.Args)
			}
			if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
				t.Errorf("%s: concurrencyPolicy %q; want Forbid", where, cj.Spec.ConcurrencyPolicy)
			}
			if d := spec.ActiveDeadlineSeconds; d == nil || time.Duration(*d)*time.Second <= cfg.Timeout {
				t.Errorf("%s: activeDeadlineSeconds %v; want more than ROLLUP_TIMEOUT %s, so rollup ends its own pass", where, deref(d), cfg.Timeout)
			}
		}
	}
	if found == 0 {
		t.Fatal("no manifest runs rollup")
	}
}

// A NetworkPolicy admits the sidecar's metrics port to the app's pods
// from chosen peers only: the listener is on the pod's IP.
func TestMetricsPortPolicy(t *testing.T) {
	t.Parallel()
	m := load(t)
	for _, s := range m.sidecars(t) {
		cfg, _ := m.loadCounterd(t, s)
		port := listenPort(t, s.where, "COUNTERD_METRICS_ADDR", cfg.MetricsAddr)
		labels := s.d.Spec.Template.Labels
		covered := false
		for _, np := range m.policies {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil {
				t.Fatalf("NetworkPolicy %s: %v", np.Name, err)
			}
			if !sel.Matches(labelSet(labels)) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				continue
			}
			for _, rule := range np.Spec.Ingress {
				admits := len(rule.Ports) == 0 || slices.ContainsFunc(rule.Ports, func(p networkingv1.NetworkPolicyPort) bool {
					return p.Port == nil || p.Port.String() == port || p.Port.String() == "metrics"
				})
				switch {
				case admits && len(rule.From) == 0:
					t.Errorf("NetworkPolicy %s admits the metrics port %s from everywhere", np.Name, port)
				case admits:
					covered = true
				}
			}
		}
		if !covered {
			t.Errorf("%s: no NetworkPolicy limits who reaches the metrics port %s", s.where, port)
		}
	}
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool   { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) {
	v, ok := l[k]
	return v, ok
}

// mountOf returns the mount of c whose path holds dir (dir itself or
// below it).
func mountOf(c corev1.Container, dir string) (corev1.VolumeMount, bool) {
	for _, vm := range c.VolumeMounts {
		if dir == vm.MountPath || strings.HasPrefix(dir, strings.TrimSuffix(vm.MountPath, "/")+"/") {
			return vm, true
		}
	}
	return corev1.VolumeMount{}, false
}

func volume(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

func deref[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}

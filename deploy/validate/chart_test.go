package validate

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/intakehq/intake/pkg/config"
)

const (
	chartDir    = "../helm/intake"
	release     = "intake"
	namespace   = "intake"
	nonRootID   = 65532
	metricsPort = "metrics"
)

// valuesCase is one way the chart is rendered: the defaults, or a values
// file of the chart's ci/ directory on top of them.
type valuesCase struct {
	name string
	file string // relative to chartDir; "" for the defaults
	// what the values turn on
	optional      bool   // HPA, KEDA, ServiceMonitor, PrometheusRule
	dispatcher    bool   // config.destinations: the dispatcher runs (dispatcher.enabled: auto)
	processorReps int    // the config's processor.replicas
	consumer      string // the processors' durable
}

var valuesCases = []valuesCase{
	{name: "defaults", processorReps: 2, consumer: "processor"},
	{name: "demo", file: "ci/demo-values.yaml", processorReps: 2, consumer: "processor"},
	{name: "all-features", file: "ci/all-features-values.yaml", optional: true, dispatcher: true, processorReps: 6, consumer: "processor-eu"},
}

func loadValues(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, file))
	if err != nil {
		t.Fatalf("values %s: %v", file, err)
	}
	return v
}

// TestChartLints runs helm lint's rules in-process: errors fail, warnings
// and notes are reported.
func TestChartLints(t *testing.T) {
	for _, c := range valuesCases {
		t.Run(c.name, func(t *testing.T) {
			linter := lint.All(chartDir, loadValues(t, c.file), namespace, false)
			for _, m := range linter.Messages {
				switch {
				case m.Severity >= support.ErrorSev:
					t.Errorf("lint error: %s", m)
				case m.Severity == support.WarningSev:
					t.Logf("lint warning: %s", m)
				default:
					t.Logf("lint note: %s", m)
				}
			}
		})
	}
}

// object is one rendered document.
type object struct {
	source      string // template file
	apiVersion  string
	kind        string
	name        string
	annotations map[string]string
	labels      map[string]string
	typed       any
}

func (o object) String() string { return fmt.Sprintf("%s %s (%s)", o.kind, o.name, o.source) }

// renderFiles renders the chart as `helm install` would (hooks included)
// with strict templates: a reference to a value that does not exist is an
// error. It returns the rendered text by template file.
func renderFiles(vals map[string]any) (map[string]string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name: release, Namespace: namespace, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Engine{Strict: true}.Render(ch, rv)
}

// render renders the chart and decodes every object strictly.
func render(vals map[string]any) ([]object, error) {
	out, err := renderFiles(vals)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	var objs []object
	for _, n := range names {
		if strings.HasSuffix(n, "NOTES.txt") || strings.HasPrefix(filepath.Base(n), "_") {
			continue
		}
		docs := releaseutil.SplitManifests(out[n])
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			doc := docs[k]
			var head struct {
				APIVersion string            `json:"apiVersion"`
				Kind       string            `json:"kind"`
				Metadata   metav1.ObjectMeta `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return nil, fmt.Errorf("%s: %w\n%s", n, err, doc)
			}
			if head.Kind == "" && head.APIVersion == "" {
				continue // comments only
			}
			typed := newTyped(head.APIVersion, head.Kind)
			if typed == nil {
				return nil, fmt.Errorf("%s: unexpected %s %s", n, head.APIVersion, head.Kind)
			}
			if err := decodeStrict([]byte(doc), typed); err != nil {
				return nil, fmt.Errorf("%s: %s %s does not decode strictly: %w", n, head.Kind, head.Metadata.Name, err)
			}
			objs = append(objs, object{source: n, apiVersion: head.APIVersion, kind: head.Kind, name: head.Metadata.Name,
				annotations: head.Metadata.Annotations, labels: head.Metadata.Labels, typed: typed})
		}
	}
	return objs, nil
}

func byKind[T any](objs []object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.typed.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// TestChartRenders renders every values case and checks each object.
func TestChartRenders(t *testing.T) {
	for _, c := range valuesCases {
		t.Run(c.name, func(t *testing.T) {
			objs, err := render(loadValues(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			counts := map[string]int{}
			for _, o := range objs {
				counts[o.kind]++
				if o.labels["app.kubernetes.io/instance"] != release || o.labels["app.kubernetes.io/name"] == "" {
					t.Errorf("%s: missing the standard labels: %v", o, o.labels)
				}
			}
			t.Logf("rendered: %v", counts)
			// NetworkPolicies are on by default: one per role and the egress one.
			want := map[string]int{"Deployment": 3, "Job": 1, "ConfigMap": 2, "Service": 3, "ServiceAccount": 1, "PodDisruptionBudget": 3, "NetworkPolicy": 4}
			if c.optional {
				want["HorizontalPodAutoscaler"], want["ScaledObject"], want["ServiceMonitor"], want["PrometheusRule"] = 1, 1, 1, 1
			}
			if c.dispatcher {
				// Its Deployment, PDB, ingress policy and egress policy for its destinations.
				want["Deployment"]++
				want["PodDisruptionBudget"]++
				want["NetworkPolicy"] += 2
			}
			for k, n := range want {
				if counts[k] != n {
					t.Errorf("%d %s objects, want %d", counts[k], k, n)
				}
			}
			for k := range counts {
				if _, ok := want[k]; !ok {
					t.Errorf("unexpected kind %s", k)
				}
			}
			checkConfig(t, c, objs)
			checkWorkloads(t, objs)
			checkHook(t, objs)
			checkReferences(t, c, objs)
		})
	}
}

// roleSecrets are the secrets each role loads (intake.Roles.Secrets; the
// migrate Job as `intake migrate` does).
var roleSecrets = map[string]config.Secrets{
	"ingress": config.WebhookSecrets | config.EnvelopeKeys, "replayer": config.APITokens,
	"processor": config.EnvelopeKeys, "dispatcher": config.DestinationSecrets, "migrate": config.NoSecrets,
}

// configFiles are the rendered config files by role: each ConfigMap's
// "<role>.yaml" keys.
func configFiles(t *testing.T, objs []object) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, cm := range byKind[*corev1.ConfigMap](objs) {
		if len(cm.Data) == 0 {
			t.Errorf("ConfigMap %s has no config file", cm.Name)
		}
		for k, raw := range cm.Data {
			role, ok := strings.CutSuffix(k, ".yaml")
			if _, known := roleSecrets[role]; !ok || !known {
				t.Errorf("ConfigMap %s: key %s is no role's config file", cm.Name, k)
				continue
			}
			files[role] = raw
		}
	}
	return files
}

// checkConfig loads each role's rendered config file with Intake's own
// loader, as that role does, and checks it holds no other role's secret.
func checkConfig(t *testing.T, c valuesCase, objs []object) {
	t.Helper()
	files := configFiles(t, objs)
	if len(files) != len(roleSecrets) {
		t.Errorf("config files for %v, want one for each of ingress, processor, replayer, dispatcher and migrate", slices.Sorted(maps.Keys(files)))
	}
	for role, raw := range files {
		// Every ${VAR} is set, as the pods' env and Secrets would: a value
		// any field accepts (a Standard Webhooks secret, 16+ characters).
		// The URL overrides are left unset, to see what the file holds.
		anything := func(name string) (string, bool) {
			if name == "DATABASE_URL" || name == "INTAKE_NATS_URL" {
				return "", false
			}
			return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true
		}
		cfg, err := config.ParseFor([]byte(raw), anything, roleSecrets[role])
		if err != nil {
			t.Errorf("%s.yaml: intake %s refuses the config: %v\n%s", role, role, err, raw)
			continue
		}
		checkRoleSecrets(t, role, raw)
		if cfg.HTTP.InternalAddr != ":9100" || cfg.Ingress.Addr != ":8080" {
			t.Errorf("%s.yaml: http.internal_addr %q, ingress.addr %q", role, cfg.HTTP.InternalAddr, cfg.Ingress.Addr)
		}
		if cfg.Processor.Replicas != c.processorReps {
			t.Errorf("%s.yaml: processor.replicas %d, want %d (replicaCount or keda.maxReplicaCount)", role, cfg.Processor.Replicas, c.processorReps)
		}
		if got := strings.TrimPrefix(c.consumer, "processor-"); c.consumer != "processor" && cfg.Processor.Shard != got {
			t.Errorf("%s.yaml: processor.shard %q, want %q", role, cfg.Processor.Shard, got)
		}
		if cfg.NATS.Stream.Replicas != 3 {
			t.Errorf("%s.yaml: nats.stream.replicas %d, want 3 (the NATS cluster of deploy/engines)", role, cfg.NATS.Stream.Replicas)
		}
		if !strings.Contains(raw, "${INTAKE_NATS_PASSWORD}") || cfg.Postgres.URL != "" {
			t.Errorf("%s.yaml: secrets must come from the environment", role)
		}
	}
}

// checkRoleSecrets: a role's file holds api.tokens only for the replayer,
// integrations[].secrets only for ingress (issue 30, item 6) and
// destinations[].secrets only for the dispatcher (issue 32).
func checkRoleSecrets(t *testing.T, role, raw string) {
	t.Helper()
	var doc struct {
		API struct {
			Tokens []any `json:"tokens"`
		} `json:"api"`
		Integrations []map[string]any `json:"integrations"`
		Destinations []map[string]any `json:"destinations"`
		Envelope     struct {
			Keys []any `json:"keys"`
		} `json:"envelope"`
	}
	if err := yaml.Unmarshal([]byte(raw), &doc); err != nil {
		t.Errorf("%s.yaml: %v", role, err)
		return
	}
	if len(doc.API.Tokens) > 0 && roleSecrets[role]&config.APITokens == 0 {
		t.Errorf("%s.yaml holds api.tokens, which only the replayer uses", role)
	}
	if len(doc.Envelope.Keys) > 0 && roleSecrets[role]&config.EnvelopeKeys == 0 {
		t.Errorf("%s.yaml holds envelope.keys, which only ingress and the processor use", role)
	}
	for _, in := range doc.Integrations {
		if _, ok := in["secrets"]; ok && roleSecrets[role]&config.WebhookSecrets == 0 {
			t.Errorf("%s.yaml holds integration %v's secrets, which only ingress uses", role, in["name"])
		}
	}
	for _, d := range doc.Destinations {
		_, ok := d["secrets"]
		if ok != (roleSecrets[role]&config.DestinationSecrets != 0) {
			t.Errorf("%s.yaml: destination %v's secrets present %v; only the dispatcher's file holds them", role, d["name"], ok)
		}
	}
}

// role is what each workload must be.
var roles = map[string]struct {
	natsUser string
	database bool
	probes   bool
}{
	"ingress":    {natsUser: "ingress", probes: true},
	"processor":  {natsUser: "processor", database: true, probes: true},
	"replayer":   {natsUser: "replayer", database: true, probes: true},
	"dispatcher": {natsUser: "dispatcher", database: true, probes: true},
	"migrate":    {natsUser: "admin", database: true},
}

func checkWorkloads(t *testing.T, objs []object) {
	t.Helper()
	for _, d := range byKind[*appsv1.Deployment](objs) {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Deployment %s: selector %v does not select its pods %v", d.Name, d.Spec.Selector, d.Spec.Template.Labels)
		}
		if d.Spec.Template.Annotations["checksum/config"] == "" {
			t.Errorf("Deployment %s: no checksum/config: a config change would not roll it", d.Name)
		}
		checkPod(t, "Deployment "+d.Name, d.Spec.Template.Labels["app.kubernetes.io/component"], d.Spec.Template.Spec)
		checkDrain(t, d, defaultDrain)
	}
	for _, j := range byKind[*batchv1.Job](objs) {
		if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("Job %s: restartPolicy %q", j.Name, j.Spec.Template.Spec.RestartPolicy)
		}
		checkPod(t, "Job "+j.Name, j.Spec.Template.Labels["app.kubernetes.io/component"], j.Spec.Template.Spec)
	}
}

// defaultDrain is values.yaml's terminationDrain.seconds.
const defaultDrain = 10

// shutdownTimeout is intake.ShutdownTimeout (the module root package): what a role takes after
// SIGTERM for in-flight requests.
const shutdownTimeout = 30

// checkDrain: ingress and replayer (behind Services) sleep drain seconds in
// a preStop hook, and their grace period covers that and the shutdown; the
// processor and the dispatcher (no Service traffic) have no hook.
func checkDrain(t *testing.T, d *appsv1.Deployment, drain int64) {
	t.Helper()
	role := d.Spec.Template.Labels["app.kubernetes.io/component"]
	spec := d.Spec.Template.Spec
	var sleep int64
	if l := spec.Containers[0].Lifecycle; l != nil && l.PreStop != nil {
		if l.PreStop.Sleep == nil {
			t.Errorf("Deployment %s: preStop must be a sleep (the image has no shell)", d.Name)
		} else {
			sleep = l.PreStop.Sleep.Seconds
		}
	}
	want := drain
	if role == "processor" || role == "dispatcher" {
		want = 0
	}
	if sleep != want {
		t.Errorf("Deployment %s: preStop sleep %ds, want %ds", d.Name, sleep, want)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g < sleep+shutdownTimeout {
		t.Errorf("Deployment %s: terminationGracePeriodSeconds %v, want at least the drain %ds plus the shutdown %ds", d.Name, g, sleep, shutdownTimeout)
	}
}

func checkPod(t *testing.T, where, role string, spec corev1.PodSpec) {
	t.Helper()
	want, ok := roles[role]
	if !ok {
		t.Errorf("%s: unknown role %q", where, role)
		return
	}
	psc := spec.SecurityContext
	switch {
	case psc == nil:
		t.Errorf("%s: no pod securityContext", where)
	case psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
		t.Errorf("%s: pod runAsNonRoot is not true", where)
	case psc.RunAsUser == nil || *psc.RunAsUser != nonRootID, psc.RunAsGroup == nil || *psc.RunAsGroup != nonRootID,
		psc.FSGroup == nil || *psc.FSGroup != nonRootID:
		t.Errorf("%s: pod runAsUser/runAsGroup/fsGroup must be %d", where, nonRootID)
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("%s: seccompProfile is not RuntimeDefault", where)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: mounts a service account token; Intake never calls the API", where)
	}
	if len(spec.Containers) != 1 {
		t.Errorf("%s: %d containers, want 1", where, len(spec.Containers))
		return
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Errorf("%s: no container securityContext", where)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != nonRootID:
		t.Errorf("%s: container must run as non-root %d", where, nonRootID)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: root filesystem is writable", where)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: allowPrivilegeEscalation is not false", where)
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
		t.Errorf("%s: capabilities must drop ALL and add none", where)
	}
	if len(c.Args) == 0 || c.Args[0] != role || !slices.Contains(c.Args, "--config") {
		t.Errorf("%s: args %v, want [%s … --config …]", where, c.Args, role)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: resources must request cpu and memory and limit memory: %v", where, c.Resources)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
		secretish := strings.Contains(e.Name, "PASSWORD") || strings.Contains(e.Name, "SECRET") ||
			strings.Contains(e.Name, "TOKEN") || e.Name == "DATABASE_URL"
		if secretish && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("%s: %s must come from a Secret (secretKeyRef)", where, e.Name)
		}
	}
	if got := env["INTAKE_NATS_USER"].Value; got != want.natsUser {
		t.Errorf("%s: INTAKE_NATS_USER %q, want %q", where, got, want.natsUser)
	}
	if _, ok := env["INTAKE_NATS_PASSWORD"]; !ok {
		t.Errorf("%s: no INTAKE_NATS_PASSWORD", where)
	}
	// The chart's GOMEMLIMIT comes first, so an extraEnv one (later) wins.
	if i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" }); i < 0 ||
		c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.ResourceFieldRef == nil || c.Env[i].ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
		t.Errorf("%s: GOMEMLIMIT must come from the memory limit (resourceFieldRef limits.memory)", where)
	}
	if _, ok := env["DATABASE_URL"]; ok != want.database {
		t.Errorf("%s: DATABASE_URL present %v, want %v", where, ok, want.database)
	}
	if !want.probes {
		return
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"startup", c.StartupProbe, "/healthz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			t.Errorf("%s: no %s probe (httpGet)", where, p.name)
		case p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != metricsPort:
			t.Errorf("%s: %s probe %s on %s, want %s on the internal port", where, p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}
	if ports[metricsPort] != 9100 {
		t.Errorf("%s: no container port %q 9100 (http.internal_addr)", where, metricsPort)
	}
}

// checkHook checks that `intake migrate` runs as a pre-install/pre-upgrade
// hook, after its own copy of the config exists.
func checkHook(t *testing.T, objs []object) {
	t.Helper()
	var job, cm *object
	for i, o := range objs {
		if o.annotations["helm.sh/hook"] == "" {
			continue
		}
		switch o.kind {
		case "Job":
			job = &objs[i]
		case "ConfigMap":
			cm = &objs[i]
		default:
			t.Errorf("%s: unexpected hook", o)
		}
	}
	if job == nil || cm == nil {
		t.Fatalf("want a hook Job and a hook ConfigMap")
	}
	for _, o := range []*object{job, cm} {
		hooks := strings.Split(o.annotations["helm.sh/hook"], ",")
		if !slices.Contains(hooks, "pre-install") || !slices.Contains(hooks, "pre-upgrade") {
			t.Errorf("%s: helm.sh/hook %q, want pre-install,pre-upgrade", o, o.annotations["helm.sh/hook"])
		}
		if o.annotations["helm.sh/hook-delete-policy"] == "" || o.annotations["helm.sh/hook-weight"] == "" {
			t.Errorf("%s: want helm.sh/hook-weight and helm.sh/hook-delete-policy", o)
		}
	}
	if cw, jw := weight(t, cm), weight(t, job); cw >= jw {
		t.Errorf("the hook ConfigMap (weight %d) must be created before the Job (weight %d)", cw, jw)
	}
	spec := job.typed.(*batchv1.Job).Spec.Template.Spec
	found := false
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.name {
			found = true
		}
	}
	if !found {
		t.Errorf("Job %s does not mount the hook ConfigMap %s (the release's own does not exist yet at pre-install)", job.name, cm.name)
	}
	// At pre-install only hooks of lower weight exist: the Job must name no
	// other object of the release.
	for _, o := range objs {
		if o.annotations["helm.sh/hook"] != "" {
			continue
		}
		if o.kind == "ServiceAccount" && o.name == spec.ServiceAccountName {
			t.Errorf("Job %s runs as ServiceAccount %s, which the release creates after its hooks", job.name, o.name)
		}
		for _, v := range spec.Volumes {
			if o.kind == "ConfigMap" && v.ConfigMap != nil && v.ConfigMap.Name == o.name {
				t.Errorf("Job %s mounts ConfigMap %s, which the release creates after its hooks", job.name, o.name)
			}
		}
	}
}

func weight(t *testing.T, o *object) int {
	t.Helper()
	w, err := strconv.Atoi(o.annotations["helm.sh/hook-weight"])
	if err != nil {
		t.Errorf("%s: helm.sh/hook-weight: %v", o, err)
	}
	return w
}

// checkReferences checks that what names another object finds it.
func checkReferences(t *testing.T, c valuesCase, objs []object) {
	t.Helper()
	deployments := map[string]*appsv1.Deployment{}
	for _, d := range byKind[*appsv1.Deployment](objs) {
		deployments[d.Name] = d
	}
	// selects returns the Deployments whose pods sel selects.
	selects := func(sel *metav1.LabelSelector) []*appsv1.Deployment {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return nil
		}
		var out []*appsv1.Deployment
		for _, d := range deployments {
			if s.Matches(labels.Set(d.Spec.Template.Labels)) {
				out = append(out, d)
			}
		}
		return out
	}
	hasPort := func(d *appsv1.Deployment, name string) bool {
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			if p.Name == name {
				return true
			}
		}
		return false
	}
	var configMap *object
	for i, o := range objs {
		if o.kind == "ConfigMap" && o.annotations["helm.sh/hook"] == "" {
			configMap = &objs[i]
		}
	}
	if configMap == nil {
		t.Fatal("no config ConfigMap")
	}
	// Named after its content (TestConfigMapFollowsTheConfig), so each
	// ReplicaSet keeps its own.
	if !strings.HasPrefix(configMap.name, release+"-config-") || len(configMap.name) != len(release+"-config-")+10 {
		t.Errorf("config ConfigMap %s, want %s-config-<10 hex digits of its content's digest>", configMap.name, release)
	}
	if configMap.annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("config ConfigMap %s: want helm.sh/resource-policy: keep (old pods still mount it after the upgrade)", configMap.name)
	}
	for _, d := range deployments {
		// Its own role's file only: no other role's part is in the pod.
		role := d.Spec.Template.Labels["app.kubernetes.io/component"]
		if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
			return v.ConfigMap != nil && v.ConfigMap.Name == configMap.name &&
				slices.Equal(v.ConfigMap.Items, []corev1.KeyToPath{{Key: role + ".yaml", Path: "intake.yaml"}})
		}) {
			t.Errorf("Deployment %s does not mount %s.yaml (alone) of the config ConfigMap %s", d.Name, role, configMap.name)
		}
	}
	services := byKind[*corev1.Service](objs)
	for _, s := range services {
		ds := selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector})
		if len(ds) == 0 {
			t.Errorf("Service %s selects no Deployment", s.Name)
		}
		for _, p := range s.Spec.Ports {
			for _, d := range ds {
				if !hasPort(d, p.TargetPort.String()) {
					t.Errorf("Service %s port %s: Deployment %s has no port %q", s.Name, p.Name, d.Name, p.TargetPort.String())
				}
			}
		}
	}
	for _, p := range byKind[*policyv1.PodDisruptionBudget](objs) {
		if len(selects(p.Spec.Selector)) != 1 {
			t.Errorf("PodDisruptionBudget %s selects %d Deployments, want 1", p.Name, len(selects(p.Spec.Selector)))
		}
	}
	for _, n := range byKind[*networkingv1.NetworkPolicy](objs) {
		if len(selects(&n.Spec.PodSelector)) == 0 {
			t.Errorf("NetworkPolicy %s selects no pods", n.Name)
		}
		if len(n.Spec.Egress) == 0 {
			continue
		}
		if n.Labels["app.kubernetes.io/component"] == "dispatcher" {
			// The destinations' policy: the dispatcher's pods only.
			if ds := selects(&n.Spec.PodSelector); len(ds) != 1 || ds[0].Spec.Template.Labels["app.kubernetes.io/component"] != "dispatcher" {
				t.Errorf("NetworkPolicy %s selects %d Deployments, want the dispatcher's alone", n.Name, len(ds))
			}
			continue
		}
		// DNS, NATS and Postgres, each a rule of its own (the restore runbook
		// changes networkPolicy.egress.postgres).
		ports := map[int32]bool{}
		for _, r := range n.Spec.Egress {
			for _, p := range r.Ports {
				if len(r.To) > 0 {
					ports[p.Port.IntVal] = true
				}
			}
		}
		for _, p := range []int32{53, 4222, 5432} {
			if !ports[p] {
				t.Errorf("NetworkPolicy %s: no egress rule with peers for port %d", n.Name, p)
			}
		}
	}
	scaled := func(kind, name string) {
		d, ok := deployments[name]
		switch {
		case !ok:
			t.Errorf("%s targets Deployment %s, which is not rendered", kind, name)
		case d.Spec.Replicas != nil:
			t.Errorf("%s scales Deployment %s, which sets replicas: every upgrade would reset them", kind, name)
		}
	}
	for _, h := range byKind[*autoscalingv2.HorizontalPodAutoscaler](objs) {
		scaled("HorizontalPodAutoscaler "+h.Name, h.Spec.ScaleTargetRef.Name)
	}
	for _, so := range byKind[*scaledObject](objs) {
		scaled("ScaledObject "+so.Metadata.Name, so.Spec.ScaleTargetRef.Name)
		if so.Spec.MaxReplicaCount == nil || int(*so.Spec.MaxReplicaCount) != c.processorReps {
			t.Errorf("ScaledObject %s: maxReplicaCount must be the config's processor.replicas %d", so.Metadata.Name, c.processorReps)
		}
		if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "nats-jetstream" {
			t.Errorf("ScaledObject %s: want one nats-jetstream trigger", so.Metadata.Name)
			continue
		}
		md := so.Spec.Triggers[0].Metadata
		if md["stream"] != "INTAKE_IN" || md["consumer"] != c.consumer || md["account"] == "" ||
			md["natsServerMonitoringEndpoint"] == "" || md["lagThreshold"] == "" {
			t.Errorf("ScaledObject %s: trigger metadata %v, want stream INTAKE_IN, consumer %s, account, endpoint, lagThreshold", so.Metadata.Name, md, c.consumer)
		}
	}
	for _, sm := range byKind[*serviceMonitor](objs) {
		sel, _ := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		n := 0
		for _, s := range services {
			if !sel.Matches(labels.Set(s.Labels)) {
				continue
			}
			n++
			for _, ep := range sm.Spec.Endpoints {
				if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
					t.Errorf("ServiceMonitor %s: Service %s has no port %q", sm.Metadata.Name, s.Name, ep.Port)
				}
			}
		}
		if n != 1 {
			t.Errorf("ServiceMonitor %s selects %d Services, want the metrics Service", sm.Metadata.Name, n)
		}
	}
	for _, pr := range byKind[*prometheusRule](objs) {
		if len(pr.Spec.Groups) == 0 {
			t.Errorf("PrometheusRule %s has no groups", pr.Metadata.Name)
		}
		for _, g := range pr.Spec.Groups {
			for i, r := range g.Rules {
				if r.Expr == "" || (r.Alert == "") == (r.Record == "") {
					t.Errorf("PrometheusRule %s group %s rule %d: want expr and exactly one of alert, record", pr.Metadata.Name, g.Name, i)
				}
			}
		}
	}
}

// TestNetworkPoliciesOnByDefault: the default render isolates every pod of
// the release both ways (issue 30, item 11). Each role's pods are selected
// by an ingress policy that opens only the role's own ports — the webhook
// port (to anyone by default: webhooks come from the internet), the API
// port to apiFrom, the internal port to metricsFrom — and every pod, the
// migrate Job's too, by an egress policy that allows DNS, NATS and Postgres
// only, each to named peers. Turned off, none is rendered.
func TestNetworkPoliciesOnByDefault(t *testing.T) {
	objs, err := render(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	policies := byKind[*networkingv1.NetworkPolicy](objs)
	type workload struct {
		name   string
		labels map[string]string
		ports  map[string]int32 // container ports by name
	}
	var workloads []workload
	for _, d := range byKind[*appsv1.Deployment](objs) {
		ports := map[string]int32{}
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			ports[p.Name] = p.ContainerPort
		}
		workloads = append(workloads, workload{"Deployment " + d.Name, d.Spec.Template.Labels, ports})
	}
	for _, j := range byKind[*batchv1.Job](objs) {
		workloads = append(workloads, workload{"Job " + j.Name, j.Spec.Template.Labels, nil})
	}
	if len(workloads) != 4 {
		t.Fatalf("%d workloads, want the 3 Deployments and the migrate Job", len(workloads))
	}
	selecting := func(l map[string]string, typ networkingv1.PolicyType) []*networkingv1.NetworkPolicy {
		var out []*networkingv1.NetworkPolicy
		for _, p := range policies {
			sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
			if err != nil {
				t.Fatal(err)
			}
			if sel.Matches(labels.Set(l)) && slices.Contains(p.Spec.PolicyTypes, typ) {
				out = append(out, p)
			}
		}
		return out
	}
	wantFrom := map[string]bool{ // port name → whether the default names its peers
		"http":    true, // the replayer's API (apiFrom); ingress's webhooks are open, below
		"metrics": true,
	}
	for _, w := range workloads {
		role := w.labels["app.kubernetes.io/component"]
		if role != "migrate" {
			in := selecting(w.labels, networkingv1.PolicyTypeIngress)
			if len(in) == 0 {
				t.Errorf("%s: no NetworkPolicy limits what reaches it", w.name)
			}
			for _, p := range in {
				for i, r := range p.Spec.Ingress {
					if len(r.Ports) == 0 {
						t.Errorf("NetworkPolicy %s rule %d: no ports (every port)", p.Name, i)
					}
					for _, port := range r.Ports {
						name := port.Port.String()
						if _, ok := w.ports[name]; !ok {
							t.Errorf("NetworkPolicy %s opens port %s, which %s does not serve", p.Name, name, w.name)
						}
						open := len(r.From) == 0
						if open && !(role == "ingress" && name == "http") && wantFrom[name] {
							t.Errorf("NetworkPolicy %s: port %s of %s is open to anyone by default", p.Name, name, w.name)
						}
					}
				}
			}
		}
		out := selecting(w.labels, networkingv1.PolicyTypeEgress)
		if len(out) == 0 {
			t.Errorf("%s: no NetworkPolicy limits where it connects", w.name)
		}
		for _, p := range out {
			for i, r := range p.Spec.Egress {
				for _, port := range r.Ports {
					if n := port.Port.IntVal; n != 53 && n != 4222 && n != 5432 {
						t.Errorf("NetworkPolicy %s egress rule %d: port %d by default, want DNS, NATS and Postgres only", p.Name, i, n)
					}
				}
				if len(r.Ports) == 0 || len(r.To) == 0 {
					t.Errorf("NetworkPolicy %s egress rule %d: want ports and named peers by default", p.Name, i)
				}
			}
		}
	}
	off, err := render(map[string]any{"networkPolicy": map[string]any{"enabled": false}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(byKind[*networkingv1.NetworkPolicy](off)); n != 0 {
		t.Errorf("networkPolicy.enabled: false renders %d NetworkPolicies", n)
	}
}

// TestConfigMapFollowsTheConfig: another config is another ConfigMap (and
// pod template), the same config the same one.
func TestConfigMapFollowsTheConfig(t *testing.T) {
	name := func(vals map[string]any) string {
		t.Helper()
		objs, err := render(vals)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range byKind[*appsv1.Deployment](objs) {
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.ConfigMap != nil {
					return v.ConfigMap.Name
				}
			}
		}
		t.Fatal("no Deployment mounts a ConfigMap")
		return ""
	}
	a, b := name(map[string]any{}), name(map[string]any{})
	c := name(map[string]any{"logLevel": "debug"}) // not in the config
	d := name(map[string]any{"config": map[string]any{"nats": map[string]any{"publish_timeout": "7s"}}})
	if a != b || a != c {
		t.Errorf("the same config renders ConfigMaps %s, %s, %s", a, b, c)
	}
	if a == d {
		t.Errorf("a changed config keeps ConfigMap %s", a)
	}
}

// TestDrainOff: terminationDrain.seconds 0 leaves the preStop hook out
// (clusters before Kubernetes 1.30).
func TestDrainOff(t *testing.T) {
	objs, err := render(map[string]any{"terminationDrain": map[string]any{"seconds": 0}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range byKind[*appsv1.Deployment](objs) {
		checkDrain(t, d, 0)
	}
}

// TestChartRefusesSecretsInValues: the chart fails rather than render a
// secret written into values — a literal, text beside a ${VAR}, or the
// default of a ${VAR:-…} (compose's ${VAR-…} too), which the config's
// ConfigMap would hold for whoever reads it (issue 30, item 11) — under any
// secret-shaped key, and a URL's password; the message names the key and
// never the value. References alone, digests and defaults of other keys
// render.
func TestChartRefusesSecretsInValues(t *testing.T) {
	const secret = "whsec_real_live_secret"
	for _, c := range []struct {
		name   string
		values string // values; the config below config:
		want   string
	}{
		{"postgres url", `config: {postgres: {url: "postgres://intake:hunter2@db/intake"}}`, "config.postgres.url"},
		{"nats password", `config: {nats: {password: hunter2}}`, "config.nats.password"},
		{"integration secret", `config: {integrations: [{name: a, provider: hmac, tenant: t, secrets: [hunter2hunter2]}]}`, "config.integrations[0].secrets[0]"},
		{"api token", `config: {api: {tokens: [{name: ops, token: hunter2hunter2hunter2, role: operator}]}}`, "config.api.tokens[0].token"},
		{"integration secret as a default", `config: {integrations: [{name: a, provider: standard, tenant: t, secrets: ["${STRIPE_WHSEC}", "${X:-` + secret + `}"]}]}`, "config.integrations[0].secrets[1]: ${X:-…} has a default"},
		{"integration secret as compose's default", `config: {integrations: [{name: a, provider: standard, tenant: t, secrets: ["${X-` + secret + `}"]}]}`, "config.integrations[0].secrets[0]: ${X-…} has a default"},
		{"api token as a default", `config: {api: {tokens: [{name: ops, token: "${INTAKE_OPERATOR_TOKEN:-` + secret + `}", role: operator}]}}`, "config.api.tokens[0].token: ${INTAKE_OPERATOR_TOKEN:-…} has a default"},
		{"envelope key", `config: {envelope: {keys: [envelope-key-in-values-0123456789abcdef]}}`, "config.envelope.keys[0]: a literal secret"},
		{"envelope key as a default", `config: {envelope: {keys: ["${INTAKE_ENVELOPE_KEY:-` + secret + `}"]}}`, "config.envelope.keys[0]: ${INTAKE_ENVELOPE_KEY:-…} has a default"},
		{"nats password as a default", `config: {nats: {password: "${INTAKE_NATS_PASSWORD:-` + secret + `}"}}`, "config.nats.password: ${INTAKE_NATS_PASSWORD:-…} has a default"},
		{"text beside a reference", `config: {integrations: [{name: a, provider: hmac, tenant: t, secrets: ["` + secret + `${X}"]}]}`, "config.integrations[0].secrets[0]: literal text"},
		{"another secret-shaped key", `config: {console: {session_key: "${K:-` + secret + `}"}}`, "config.console.session_key: ${K:-…} has a default"},
		{"a URL's password in the config", `config: {tracing: {endpoint: "https://intake:` + secret + `@otel:4318"}}`, "config.tracing.endpoint: the URL's password"},
		{"a URL's password in nats.url", `nats: {url: "nats://ingress:` + secret + `@nats:4222"}`, "nats.url: a password in the URL"},
		{"a URL's password as a default", `nats: {url: "nats://ingress:${P:-` + secret + `}@nats:4222"}`, "nats.url: a password in the URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var vals map[string]any
			if err := yaml.Unmarshal([]byte(c.values), &vals); err != nil {
				t.Fatal(err)
			}
			_, err := render(vals)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("render: %v, want an error naming %s", err, c.want)
			}
			t.Logf("refused: %v", err)
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error repeats the secret: %v", err)
			}
		})
	}
	// What may be written: references alone, a digest, another key's default.
	ok := `config:
  api:
    tokens:
      - {name: ops, token: "${INTAKE_OPERATOR_TOKEN}", role: operator}
      - {name: dash, token_sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8, role: viewer}
  integrations:
    - {name: a, provider: standard, tenant: "${TENANT:-acme}", secrets: ["${A}", "${A_OLD}${A_SUFFIX}"]}
`
	var vals map[string]any
	if err := yaml.Unmarshal([]byte(ok), &vals); err != nil {
		t.Fatal(err)
	}
	if _, err := render(vals); err != nil {
		t.Errorf("the chart refuses references, a digest and a tenant's default: %v", err)
	}
}

// TestValuesDocumented: every value of values.yaml has a row in README.md.
func TestValuesDocumented(t *testing.T) {
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme := readFile(t, filepath.Join(chartDir, "README.md"))
	for _, key := range leafKeys("", vals) {
		if !strings.Contains(readme, "`"+key+"`") {
			t.Errorf("values.yaml key %s has no row in README.md", key)
		}
	}
}

// leafKeys lists the dotted paths of values: maps are walked, except the
// free-form ones (their content is the user's), which count as one value.
func leafKeys(prefix string, m map[string]any) []string {
	freeForm := map[string]bool{
		"config": true, "resources": true, "podSecurityContext": true, "securityContext": true,
		"nodeSelector": true, "affinity": true, "commonLabels": true, "podAnnotations": true, "podLabels": true,
		"annotations": true, "labels": true,
	}
	var out []string
	for k, v := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok && !freeForm[k] && len(sub) > 0 {
			out = append(out, leafKeys(key, sub)...)
			continue
		}
		out = append(out, key)
	}
	sort.Strings(out)
	return out
}

// TestTemplate prints the rendered chart, like `helm template`, when
// INTAKE_TEMPLATE names a values file of the chart ("ci/demo-values.yaml")
// or "defaults": deploy/validate/run -run TestTemplate -v.
func TestTemplate(t *testing.T) {
	file := os.Getenv("INTAKE_TEMPLATE")
	if file == "" {
		t.Skip("set INTAKE_TEMPLATE to a values file of the chart, or defaults")
	}
	if file == "defaults" {
		file = ""
	}
	out, err := renderFiles(loadValues(t, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range slices.Sorted(maps.Keys(out)) {
		if strings.TrimSpace(out[n]) != "" && !strings.HasPrefix(filepath.Base(n), "_") {
			fmt.Printf("---\n# Source: %s\n%s\n", n, strings.TrimSpace(out[n]))
		}
	}
}

// TestTrustedProxiesReachTheConfig: ingress.trustedProxies and
// ingress.clientIPHeader become the config's ingress.trusted_proxies and
// client_ip_header (issue 30, item 5: behind the Ingress controller every
// client otherwise shares one per-address bucket); the default trusts no
// proxy and writes no header; the chart refuses them set in both places, or
// trustedProxies without a header.
func TestTrustedProxiesReachTheConfig(t *testing.T) {
	rendered := func(values string) (*config.Config, error) {
		t.Helper()
		var vals map[string]any
		if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
			t.Fatal(err)
		}
		objs, err := render(vals)
		if err != nil {
			return nil, err
		}
		for _, cm := range byKind[*corev1.ConfigMap](objs) {
			if raw, ok := cm.Data["ingress.yaml"]; ok {
				cfg, err := config.ParseFor([]byte(raw), func(string) (string, bool) { return "x", true }, config.WebhookSecrets)
				if err != nil {
					t.Fatalf("intake refuses the rendered config: %v\n%s", err, raw)
				}
				return cfg, nil
			}
		}
		t.Fatal("no config ConfigMap")
		return nil, nil
	}
	cfg, err := rendered(`{}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Ingress.TrustedProxies) != 0 || cfg.Ingress.ClientIPHeader != "" {
		t.Errorf("default values: trusted_proxies %v, client_ip_header %q, want none", cfg.Ingress.TrustedProxies, cfg.Ingress.ClientIPHeader)
	}
	cfg, err = rendered(`ingress: {trustedProxies: [10.244.0.0/16, 10.0.0.7]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Ingress.TrustedProxies, ","); got != "10.244.0.0/16,10.0.0.7" || cfg.Ingress.ClientIPHeader != "X-Forwarded-For" {
		t.Errorf("trustedProxies set: trusted_proxies %q, client_ip_header %q, want 10.244.0.0/16,10.0.0.7 and X-Forwarded-For", got, cfg.Ingress.ClientIPHeader)
	}
	cfg, err = rendered(`ingress: {trustedProxies: [10.244.0.0/16], clientIPHeader: X-Real-IP}`)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ingress.ClientIPHeader != "X-Real-IP" {
		t.Errorf("clientIPHeader X-Real-IP: client_ip_header %q", cfg.Ingress.ClientIPHeader)
	}
	for _, c := range []struct{ values, want string }{
		{`{ingress: {trustedProxies: [10.244.0.0/16]}, config: {ingress: {trusted_proxies: [10.0.0.0/8], client_ip_header: X-Forwarded-For}}}`, "not both places"},
		{`ingress: {trustedProxies: [10.244.0.0/16], clientIPHeader: ""}`, "ingress.clientIPHeader: required"},
	} {
		if _, err := rendered(c.values); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %s: render %v, want an error naming %q", c.values, err, c.want)
		}
	}
}

// TestEachRoleGetsOnlyItsSecrets: with the walk-through's values, each
// role's pod is given its own Secrets only (secrets.env.<role>, envFrom)
// and its own part of the config, so an RCE in the internet-facing ingress
// holds no operator token (issue 30, item 6); the list form of earlier
// charts, which gave every Secret to every pod, is refused with how to
// split it.
func TestEachRoleGetsOnlyItsSecrets(t *testing.T) {
	objs, err := render(loadValues(t, "ci/demo-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"ingress": {"intake-ingress-env", "intake-envelope-key"}, "replayer": {"intake-replayer-env"},
		"processor": {"intake-envelope-key"}, "migrate": nil}
	pods := map[string]corev1.PodSpec{}
	for _, d := range byKind[*appsv1.Deployment](objs) {
		pods[d.Spec.Template.Labels["app.kubernetes.io/component"]] = d.Spec.Template.Spec
	}
	for _, j := range byKind[*batchv1.Job](objs) {
		pods[j.Spec.Template.Labels["app.kubernetes.io/component"]] = j.Spec.Template.Spec
	}
	for role, secrets := range want {
		spec, ok := pods[role]
		if !ok {
			t.Errorf("no %s pod", role)
			continue
		}
		var got []string
		for _, e := range spec.Containers[0].EnvFrom {
			if e.SecretRef != nil {
				got = append(got, e.SecretRef.Name)
			}
		}
		if !slices.Equal(got, secrets) {
			t.Errorf("%s pod: envFrom Secrets %v, want %v", role, got, secrets)
		}
		for _, v := range spec.Volumes {
			if v.ConfigMap != nil && !slices.Equal(v.ConfigMap.Items, []corev1.KeyToPath{{Key: role + ".yaml", Path: "intake.yaml"}}) {
				t.Errorf("%s pod: mounts %v of ConfigMap %s, want %s.yaml alone", role, v.ConfigMap.Items, v.ConfigMap.Name, role)
			}
		}
	}
	files := configFiles(t, objs)
	if !strings.Contains(files["ingress"], "${INTAKE_DEMO_SECRET}") || strings.Contains(files["ingress"], "INTAKE_OPERATOR_TOKEN") {
		t.Errorf("ingress.yaml: want the demo secret's reference and no operator token:\n%s", files["ingress"])
	}
	if !strings.Contains(files["replayer"], "${INTAKE_OPERATOR_TOKEN}") || strings.Contains(files["replayer"], "INTAKE_DEMO_SECRET") {
		t.Errorf("replayer.yaml: want the operator token's reference and no webhook secret:\n%s", files["replayer"])
	}
	for _, role := range []string{"ingress", "processor"} {
		if !strings.Contains(files[role], "${INTAKE_ENVELOPE_KEY}") {
			t.Errorf("%s.yaml: want the envelope key's reference:\n%s", role, files[role])
		}
	}
	if strings.Contains(files["replayer"], "INTAKE_ENVELOPE_KEY") {
		t.Errorf("replayer.yaml holds the envelope key's reference:\n%s", files["replayer"])
	}
	for _, c := range []struct{ values, want string }{
		{`secrets: {env: [intake-config-env]}`, "secrets.env: a list gave every Secret to every pod"},
		{`secrets: {env: {ingres: [intake-ingress-env]}}`, "secrets.env.ingres: not a role"},
	} {
		var vals map[string]any
		if err := yaml.Unmarshal([]byte(c.values), &vals); err != nil {
			t.Fatal(err)
		}
		if _, err := render(vals); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %s: render %v, want an error naming %q", c.values, err, c.want)
		}
	}
}

// TestAPIUnreachableFromIngressPods: the replayer's API port admits, by
// default, only pods labelled as operators', never the ingress pods (issue
// 30, item 6: an RCE in the internet-facing role must not reach the
// operator API); an apiFrom peer that would admit them — an empty
// podSelector, or one the ingress pods' labels match — is refused.
func TestAPIUnreachableFromIngressPods(t *testing.T) {
	objs, err := render(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	var ingressLabels map[string]string
	for _, d := range byKind[*appsv1.Deployment](objs) {
		if d.Spec.Template.Labels["app.kubernetes.io/component"] == "ingress" {
			ingressLabels = d.Spec.Template.Labels
		}
	}
	if ingressLabels == nil {
		t.Fatal("no ingress Deployment")
	}
	checked := 0
	for _, p := range byKind[*networkingv1.NetworkPolicy](objs) {
		if p.Labels["app.kubernetes.io/component"] != "replayer" {
			continue
		}
		for _, r := range p.Spec.Ingress {
			if !slices.ContainsFunc(r.Ports, func(port networkingv1.NetworkPolicyPort) bool { return port.Port.String() == "http" }) {
				continue
			}
			checked++
			if len(r.From) == 0 {
				t.Errorf("NetworkPolicy %s: the API port is open to anyone", p.Name)
			}
			for i, peer := range r.From {
				if peer.IPBlock != nil || peer.PodSelector == nil {
					t.Errorf("NetworkPolicy %s from[%d]: want a podSelector peer by default, got %+v", p.Name, i, peer)
					continue
				}
				sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
				if err != nil {
					t.Fatal(err)
				}
				if sel.Matches(labels.Set(ingressLabels)) {
					t.Errorf("NetworkPolicy %s from[%d] selects the ingress pods %v", p.Name, i, ingressLabels)
				}
			}
		}
	}
	if checked != 1 {
		t.Fatalf("%d replayer API rules, want 1", checked)
	}
	for _, c := range []struct{ values, want string }{
		{`networkPolicy: {apiFrom: [{podSelector: {}}]}`, "networkPolicy.apiFrom[0]: an empty podSelector"},
		{`networkPolicy: {apiFrom: [{namespaceSelector: {}, podSelector: {}}]}`, "networkPolicy.apiFrom[0]: an empty podSelector"},
		{`networkPolicy: {apiFrom: [{podSelector: {matchLabels: {app.kubernetes.io/instance: intake}}}]}`, "networkPolicy.apiFrom[0]: its podSelector selects the ingress pods"},
		{`{ingress: {podLabels: {intakehq.github.io/operator-api: "true"}}}`, "networkPolicy.apiFrom[0]: its podSelector selects the ingress pods"},
	} {
		var vals map[string]any
		if err := yaml.Unmarshal([]byte(c.values), &vals); err != nil {
			t.Fatal(err)
		}
		if _, err := render(vals); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %s: render %v, want an error naming %q", c.values, err, c.want)
		}
	}
}

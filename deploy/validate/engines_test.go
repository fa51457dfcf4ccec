package validate

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

const enginesDir = "../engines"

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// natsChartKeys are the keys of the official NATS chart's values (chart
// 2.14.2, helm/charts/nats/values.yaml of nats-io/k8s) that
// nats-values.yaml may use; a key maps to its known children, nil for a
// value whose content the chart passes through (merge, env, resources, …).
// A misspelt key would be ignored by the chart: here it fails.
var natsChartKeys = map[string]any{
	"config": map[string]any{
		"cluster": map[string]any{"enabled": nil, "port": nil, "replicas": nil, "noAdvertise": nil,
			"routeURLs": nil, "tls": nil, "merge": nil, "patch": nil},
		"jetstream": map[string]any{"enabled": nil, "merge": nil, "patch": nil,
			"fileStore": map[string]any{"enabled": nil, "dir": nil, "maxSize": nil,
				"pvc": map[string]any{"enabled": nil, "size": nil, "storageClassName": nil, "merge": nil, "patch": nil, "name": nil}},
			"memoryStore": map[string]any{"enabled": nil, "maxSize": nil}},
		"nats":             map[string]any{"port": nil, "tls": nil},
		"monitor":          map[string]any{"enabled": nil, "port": nil, "tls": nil},
		"merge":            nil,
		"patch":            nil,
		"serverNamePrefix": nil,
	},
	"container": map[string]any{"image": map[string]any{"repository": nil, "tag": nil, "pullPolicy": nil,
		"registry": nil, "digest": nil, "fullImageName": nil}, "ports": nil, "env": nil, "merge": nil, "patch": nil, "resources": nil},
	"podTemplate":         map[string]any{"configChecksumAnnotation": nil, "topologySpreadConstraints": nil, "merge": nil, "patch": nil},
	"podDisruptionBudget": map[string]any{"enabled": nil, "merge": nil, "patch": nil, "name": nil},
	"natsBox":             map[string]any{"enabled": nil},
	"promExporter":        map[string]any{"enabled": nil, "podMonitor": nil},
	"service":             nil,
	"statefulSet":         nil,
}

func checkKnownKeys(t *testing.T, path string, v any, known map[string]any) {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Errorf("%s: want a map", path)
		return
	}
	for k, sub := range m {
		kn, ok := known[k]
		if !ok {
			t.Errorf("%s.%s: not a key of the NATS chart's values", path, k)
			continue
		}
		if kmap, ok := kn.(map[string]any); ok {
			checkKnownKeys(t, path+"."+k, sub, kmap)
		}
	}
}

func dig(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// natsUser is one user's identity and permissions, from either file.
type natsUser struct {
	Password       string // the environment variable it comes from
	PublishAllow   []string
	PublishDeny    []string
	SubscribeAllow []string
}

func strings_(v any) []string {
	var out []string
	switch l := v.(type) {
	case []any:
		for _, s := range l {
			out = append(out, s.(string))
		}
	case string:
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

func usersOf(t *testing.T, users any, password func(string) string) map[string]natsUser {
	t.Helper()
	out := map[string]natsUser{}
	list, ok := users.([]any)
	if !ok {
		t.Fatalf("accounts.INTAKE.users is not a list")
	}
	for _, u := range list {
		m := u.(map[string]any)
		out[m["user"].(string)] = natsUser{
			Password:       password(toString(m["password"])),
			PublishAllow:   strings_(dig(m, "permissions", "publish", "allow")),
			PublishDeny:    strings_(dig(m, "permissions", "publish", "deny")),
			SubscribeAllow: strings_(dig(m, "permissions", "subscribe", "allow")),
		}
	}
	return out
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

var chartVariable = regexp.MustCompile(`^<< \$([A-Z0-9_]+) >>$`)

// TestNATSValues checks deploy/engines/nats-values.yaml: known keys of the
// official chart, a 3-node JetStream cluster on disk with sync always, and
// the users and permissions of deploy/nats/intake.conf exactly.
func TestNATSValues(t *testing.T) {
	raw := readFile(t, filepath.Join(enginesDir, "nats-values.yaml"))
	js, err := yaml.YAMLToJSONStrict([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(js, &vals); err != nil {
		t.Fatal(err)
	}
	checkKnownKeys(t, "", vals, natsChartKeys)

	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"config", "cluster", "enabled"}, true},
		{[]string{"config", "cluster", "replicas"}, float64(3)},
		{[]string{"config", "jetstream", "enabled"}, true},
		{[]string{"config", "jetstream", "fileStore", "enabled"}, true},
		{[]string{"config", "jetstream", "fileStore", "pvc", "enabled"}, true},
		{[]string{"config", "jetstream", "merge", "sync_interval"}, "always"},
		{[]string{"config", "monitor", "enabled"}, true},
	} {
		if got := dig(vals, c.path...); got != c.want {
			t.Errorf("%s: %v, want %v", strings.Join(c.path, "."), got, c.want)
		}
	}

	// deploy/nats/intake.conf, parsed by nats-server's own parser with its
	// password variables set to their names.
	vars := regexp.MustCompile(`\$(INTAKE_NATS_[A-Z]+_PASSWORD)`).FindAllStringSubmatch(readFile(t, "../nats/intake.conf"), -1)
	for _, v := range vars {
		t.Setenv(v[1], "env:"+v[1])
	}
	parsed, err := conf.ParseFile("../nats/intake.conf")
	if err != nil {
		t.Fatal(err)
	}
	want := usersOf(t, dig(parsed, "accounts", "INTAKE", "users"), func(s string) string { return strings.TrimPrefix(s, "env:") })
	got := usersOf(t, dig(vals, "config", "merge", "accounts", "INTAKE", "users"), func(s string) string {
		if m := chartVariable.FindStringSubmatch(s); m != nil {
			return m[1]
		}
		t.Errorf("password %q is not a << $VAR >> reference", s)
		return s
	})
	if len(got) != len(want) {
		t.Errorf("users %v, want those of intake.conf", slices.Sorted(maps.Keys(got)))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("user %s of intake.conf is missing", name)
			continue
		}
		if g.Password != w.Password || !slices.Equal(g.PublishAllow, w.PublishAllow) ||
			!slices.Equal(g.PublishDeny, w.PublishDeny) || !slices.Equal(g.SubscribeAllow, w.SubscribeAllow) {
			t.Errorf("user %s differs from intake.conf:\n got %+v\nwant %+v", name, g, w)
		}
		// The server reads the password from its environment: the chart's
		// container.env must set it from a Secret.
		ref := dig(vals, "container", "env", w.Password, "valueFrom", "secretKeyRef", "name")
		if ref == nil {
			t.Errorf("container.env.%s must come from a Secret (valueFrom.secretKeyRef)", w.Password)
		}
	}
	// JetStream's limit below the volume: at the limit the server refuses
	// writes; at a full filesystem it fails them.
	size, err := resource.ParseQuantity(toString(dig(vals, "config", "jetstream", "fileStore", "pvc", "size")))
	if err != nil {
		t.Errorf("config.jetstream.fileStore.pvc.size: %v", err)
	}
	max, err := resource.ParseQuantity(toString(dig(vals, "config", "jetstream", "fileStore", "maxSize")))
	if err != nil {
		t.Errorf("config.jetstream.fileStore.maxSize: %v (set it to about 90%% of pvc.size)", err)
	} else if max.Value()*10 > size.Value()*9 {
		t.Errorf("config.jetstream.fileStore.maxSize %s is above 90%% of pvc.size %s", max.String(), size.String())
	}
	if dig(vals, "config", "merge", "accounts", "INTAKE", "jetstream") != "enabled" {
		t.Errorf("account INTAKE must have jetstream: enabled")
	}
}

// The CloudNativePG objects, as minimal local structs with the fields
// postgres-cluster.yaml uses (names from cloudnative-pg's api/v1 and the
// Barman Cloud Plugin's ObjectStore); strict decoding refuses any other.
type cnpgCluster struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Instances             int    `json:"instances"`
		ImageName             string `json:"imageName"`
		PrimaryUpdateStrategy string `json:"primaryUpdateStrategy"`
		MinSyncReplicas       int    `json:"minSyncReplicas"`
		MaxSyncReplicas       int    `json:"maxSyncReplicas"`
		Bootstrap             struct {
			InitDB struct {
				Database string `json:"database"`
				Owner    string `json:"owner"`
			} `json:"initdb"`
		} `json:"bootstrap"`
		PostgreSQL struct {
			Synchronous *struct {
				Method         string `json:"method"`
				Number         int    `json:"number"`
				DataDurability string `json:"dataDurability"`
			} `json:"synchronous"`
			Parameters map[string]string `json:"parameters"`
		} `json:"postgresql"`
		Storage    cnpgStorage  `json:"storage"`
		WalStorage *cnpgStorage `json:"walStorage"`
		Resources  struct {
			Requests map[string]string `json:"requests"`
			Limits   map[string]string `json:"limits"`
		} `json:"resources"`
		Affinity struct {
			EnablePodAntiAffinity bool   `json:"enablePodAntiAffinity"`
			PodAntiAffinityType   string `json:"podAntiAffinityType"`
			TopologyKey           string `json:"topologyKey"`
		} `json:"affinity"`
		Plugins []struct {
			Name          string            `json:"name"`
			IsWALArchiver bool              `json:"isWALArchiver"`
			Parameters    map[string]string `json:"parameters"`
		} `json:"plugins"`
	} `json:"spec"`
}

type cnpgStorage struct {
	Size         string  `json:"size"`
	StorageClass *string `json:"storageClass"`
}

type s3Key struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

type barmanObjectStore struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		RetentionPolicy string `json:"retentionPolicy"`
		Configuration   struct {
			DestinationPath string `json:"destinationPath"`
			EndpointURL     string `json:"endpointURL"`
			S3Credentials   struct {
				AccessKeyID     s3Key `json:"accessKeyId"`
				SecretAccessKey s3Key `json:"secretAccessKey"`
			} `json:"s3Credentials"`
			WAL struct {
				Compression string `json:"compression"`
				MaxParallel int    `json:"maxParallel"`
			} `json:"wal"`
			Data struct {
				Compression string `json:"compression"`
			} `json:"data"`
		} `json:"configuration"`
	} `json:"spec"`
}

type cnpgScheduledBackup struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Schedule             string `json:"schedule"`
		BackupOwnerReference string `json:"backupOwnerReference"`
		Immediate            bool   `json:"immediate"`
		Method               string `json:"method"`
		PluginConfiguration  struct {
			Name string `json:"name"`
		} `json:"pluginConfiguration"`
		Cluster struct {
			Name string `json:"name"`
		} `json:"cluster"`
	} `json:"spec"`
}

// TestPostgresCluster checks deploy/engines/postgres-cluster.yaml: three
// instances with synchronous replication, WAL archiving through the plugin
// to the ObjectStore it defines, a ScheduledBackup of that cluster, and the
// chart's walk-through values reading the cluster's generated Secret.
func TestPostgresCluster(t *testing.T) {
	docs := releaseutil.SplitManifests(readFile(t, filepath.Join(enginesDir, "postgres-cluster.yaml")))
	var cluster *cnpgCluster
	var store *barmanObjectStore
	var backup *cnpgScheduledBackup
	for _, doc := range docs {
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		var into any
		switch head.APIVersion + "/" + head.Kind {
		case "postgresql.cnpg.io/v1/Cluster":
			cluster = &cnpgCluster{}
			into = cluster
		case "barmancloud.cnpg.io/v1/ObjectStore":
			store = &barmanObjectStore{}
			into = store
		case "postgresql.cnpg.io/v1/ScheduledBackup":
			backup = &cnpgScheduledBackup{}
			into = backup
		default:
			t.Fatalf("unexpected %s %s", head.APIVersion, head.Kind)
		}
		if err := decodeStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: %v", head.Kind, err)
		}
	}
	if cluster == nil || store == nil || backup == nil {
		t.Fatalf("want a Cluster, an ObjectStore and a ScheduledBackup")
	}
	s := cluster.Spec
	if s.Instances != 3 {
		t.Errorf("instances %d, want 3", s.Instances)
	}
	sync := s.PostgreSQL.Synchronous
	if (sync == nil || sync.Number < 1 || (sync.Method != "any" && sync.Method != "first")) && s.MinSyncReplicas < 1 {
		t.Errorf("want synchronous replication (postgresql.synchronous or minSyncReplicas ≥ 1)")
	}
	if sync != nil && sync.Number >= s.Instances {
		t.Errorf("synchronous.number %d must be below instances %d", sync.Number, s.Instances)
	}
	// storageClass: "" is a PVC with no class (Pending where nothing
	// provisions those), not the cluster's default; leave the key out.
	for name, st := range map[string]*cnpgStorage{"storage": &s.Storage, "walStorage": s.WalStorage} {
		if st != nil && st.StorageClass != nil && *st.StorageClass == "" {
			t.Errorf(`%s.storageClass: "" asks for no class, not the default one; leave it out`, name)
		}
	}
	if s.Bootstrap.InitDB.Database == "" || s.Bootstrap.InitDB.Owner == "" {
		t.Errorf("bootstrap.initdb must name the database and its owner")
	}
	archiver := false
	for _, p := range s.Plugins {
		if p.Name == "barman-cloud.cloudnative-pg.io" && p.IsWALArchiver && p.Parameters["barmanObjectName"] == store.Metadata.Name {
			archiver = true
		}
	}
	if !archiver {
		t.Errorf("want the barman-cloud plugin as WAL archiver, on ObjectStore %s", store.Metadata.Name)
	}
	if store.Spec.Configuration.DestinationPath == "" || store.Spec.RetentionPolicy == "" {
		t.Errorf("ObjectStore: destinationPath and retentionPolicy are required")
	}
	b := backup.Spec
	if b.Cluster.Name != cluster.Metadata.Name || b.Method != "plugin" || b.PluginConfiguration.Name != "barman-cloud.cloudnative-pg.io" {
		t.Errorf("ScheduledBackup must back up %s through the plugin: %+v", cluster.Metadata.Name, b)
	}
	if n := len(strings.Fields(b.Schedule)); n != 6 {
		t.Errorf("ScheduledBackup schedule %q has %d fields; CloudNativePG's has 6 (seconds first)", b.Schedule, n)
	}

	// The walk-through reads the DSN from the cluster's generated Secret.
	demo := loadValues(t, "ci/demo-values.yaml")
	if got := dig(demo, "secrets", "databaseURL", "name"); got != cluster.Metadata.Name+"-app" {
		t.Errorf("ci/demo-values.yaml secrets.databaseURL.name %v, want %s-app (its uri names %s-rw)", got, cluster.Metadata.Name, cluster.Metadata.Name)
	}
}

// TestNATSValuesRenderWithTheChart renders the official NATS chart with
// nats-values.yaml and parses the nats.conf it writes with nats-server's own
// parser. It needs the chart on disk (no network here):
//
//	helm pull nats/nats --version 2.14.2 --untar -d /tmp   # or a checkout of nats-io/k8s
//	INTAKE_NATS_CHART=/tmp/nats deploy/validate/run -run TestNATSValuesRenderWithTheChart -v
func TestNATSValuesRenderWithTheChart(t *testing.T) {
	dir := os.Getenv("INTAKE_NATS_CHART")
	if dir == "" {
		t.Skip("set INTAKE_NATS_CHART to the NATS chart's directory")
	}
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ReadValuesFile(filepath.Join(enginesDir, "nats-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "nats", Namespace: "nats", Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatal(err)
	}
	var natsConf string
	var sts *appsv1.StatefulSet
	for name, content := range out {
		for _, doc := range releaseutil.SplitManifests(content) {
			var head struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			switch head.Kind {
			case "ConfigMap":
				var cm corev1.ConfigMap
				if err := decodeStrict([]byte(doc), &cm); err != nil {
					t.Fatal(err)
				}
				natsConf = cm.Data["nats.conf"]
			case "StatefulSet":
				sts = &appsv1.StatefulSet{}
				if err := decodeStrict([]byte(doc), sts); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if natsConf == "" || sts == nil {
		t.Fatalf("want the chart's ConfigMap (nats.conf) and StatefulSet")
	}
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet replicas %v, want 3", sts.Spec.Replicas)
	}
	// nats-networkpolicy.yaml selects the servers by these labels.
	for k, v := range natsServerLabels {
		if got := sts.Spec.Template.Labels[k]; got != v {
			t.Errorf("the StatefulSet's pods have %s=%q, want %q (nats-networkpolicy.yaml selects them so)", k, got, v)
		}
	}
	// The server's environment as the kubelet makes it from the rendered
	// container's env (in its order: $(VAR) sees only the entries before).
	var env []envVar
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name != "nats" {
			continue
		}
		for _, e := range c.Env {
			v := envVar{name: e.Name, value: e.Value}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				v.secret, v.key = e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key
			} else if e.ValueFrom != nil {
				v.value = "nats-0" // POD_NAME
			}
			env = append(env, v)
		}
	}
	secret := func(name, key string) string { return "secret-" + key }
	for k, v := range expandEnv(env, secret) {
		t.Setenv(k, v)
	}
	parsed, err := conf.Parse(natsConf)
	if err != nil {
		t.Fatalf("nats-server refuses the rendered nats.conf: %v\n%s", err, natsConf)
	}
	if got := dig(parsed, "jetstream", "sync_interval"); got != "always" {
		t.Errorf("jetstream.sync_interval %v, want always", got)
	}
	if users, _ := dig(parsed, "accounts", "INTAKE", "users").([]any); len(users) != 6 {
		t.Errorf("accounts.INTAKE has %d users, want intake.conf's 6", len(users))
	}
	// The cluster block TestRogueRouteIsRefused runs is the chart's, and the
	// env the values expect is the rendered container's.
	vals2 := loadNATSValues(t)
	if got, want := expandEnv(env, secret), expandEnv(natsPodEnv(vals2), secret); !mapsContain(got, want) {
		t.Errorf("the rendered container's env %v, want (at least) %v", got, want)
	}
	emulated, err := conf.Parse("cluster: " + natsConfText(natsClusterBlock(t, vals2)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dig(parsed, "cluster"), emulated["cluster"]) {
		t.Errorf("the chart's cluster block\n%v\nis not natsClusterBlock's\n%v", dig(parsed, "cluster"), emulated["cluster"])
	}
	if r, _ := dig(parsed, "cluster", "routes").([]any); len(r) != 3 || !strings.HasPrefix(toString(r[0]), "tls://intake-route:secret-INTAKE_NATS_ROUTE_PASSWORD@nats-0.nats-headless:6222") {
		t.Errorf("the rendered routes %v do not log in with the route password", dig(parsed, "cluster", "routes"))
	}
	t.Logf("rendered nats.conf:\n%s", natsConf)
}

// mapsContain: every entry of want is in got.
func mapsContain(got, want map[string]string) bool {
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}

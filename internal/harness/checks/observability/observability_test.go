package observability

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/replayer"
)

// The files under test, from this package's directory.
const (
	dir           = "../../../../deploy/observability/"
	rulesFile     = dir + "prometheus-rules.yaml"
	rulesTestFile = dir + "prometheus-rules.test.yaml"
	operatorFile  = dir + "prometheusrule.yaml"
	dashboardFile = dir + "intake-pipeline.json"
	docsFile      = "../../../../docs/observability.md"
	// chartRules is the Helm chart's copy, which its PrometheusRule
	// template reads (a chart cannot read files outside its directory).
	chartRules = "../../../../deploy/helm/intake/files/prometheus-rules.yaml"
)

var update = flag.Bool("update", false, "rewrite "+operatorFile+" and "+chartRules+" from "+rulesFile)

type rules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string `yaml:"alert"`
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// promtool is the path of promtool, or the test is skipped.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not on PATH: the alert rules are not checked (Debian/Ubuntu: apt-get install prometheus)")
	}
	return p
}

// TestRulesPassPromtool: promtool check rules, then the unit tests of
// prometheus-rules.test.yaml.
func TestRulesPassPromtool(t *testing.T) {
	p := promtool(t)
	for _, args := range [][]string{{"check", "rules", filepath.Base(rulesFile)}, {"test", "rules", filepath.Base(rulesTestFile)}} {
		cmd := exec.Command(p, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertHasAFiringUnitTest: each alert of the rules file has a
// promtool case in which it fires.
func TestEveryAlertHasAFiringUnitTest(t *testing.T) {
	var r rules
	readYAML(t, rulesFile, &r)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, rulesTestFile, &tests)
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" {
				continue
			}
			n++
			if !fires[rule.Alert] {
				t.Errorf("alert %s has no unit test in %s in which it fires", rule.Alert, rulesTestFile)
			}
		}
	}
	if n == 0 {
		t.Fatalf("%s has no alerts", rulesFile)
	}
}

// TestPrometheusRuleMatchesRulesFile: prometheusrule.yaml carries the rules
// file's groups unchanged, and the Helm chart's files/prometheus-rules.yaml is a
// copy of it. go test -run TestPrometheusRuleMatchesRulesFile -update
// rewrites both.
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	if *update {
		writeOperatorFile(t)
		b, err := os.ReadFile(rulesFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(chartRules, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plainBytes, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if chart, err := os.ReadFile(chartRules); err != nil || !bytes.Equal(chart, plainBytes) {
		t.Errorf("%s differs from %s (or is missing: %v); run go test ./internal/observability -run TestPrometheusRuleMatchesRulesFile -update", chartRules, rulesFile, err)
	}
	var plain map[string]any
	readYAML(t, rulesFile, &plain)
	var op struct {
		APIVersion string         `yaml:"apiVersion"`
		Kind       string         `yaml:"kind"`
		Spec       map[string]any `yaml:"spec"`
	}
	readYAML(t, operatorFile, &op)
	if op.APIVersion != "monitoring.coreos.com/v1" || op.Kind != "PrometheusRule" {
		t.Errorf("%s: apiVersion %q kind %q, want monitoring.coreos.com/v1 PrometheusRule", operatorFile, op.APIVersion, op.Kind)
	}
	if !reflect.DeepEqual(plain["groups"], op.Spec["groups"]) {
		t.Errorf("%s's spec.groups differ from %s's groups: run go test ./internal/observability -run %s -update",
			operatorFile, rulesFile, t.Name())
	}
}

func writeOperatorFile(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var groups *yaml.Node
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "groups" {
			groups = root.Content[i+1]
		}
	}
	if groups == nil {
		t.Fatalf("%s has no groups", rulesFile)
	}
	str := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }
	mapping := func(kv ...*yaml.Node) *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Content: kv} }
	out := mapping(
		str("apiVersion"), str("monitoring.coreos.com/v1"),
		str("kind"), str("PrometheusRule"),
		str("metadata"), mapping(str("name"), str("intake"), str("labels"), mapping(str("app.kubernetes.io/name"), str("intake"))),
		str("spec"), mapping(str("groups"), groups),
	)
	var buf bytes.Buffer
	base := filepath.Base(rulesFile)
	buf.WriteString("# Generated from " + base + " by\n#   go test ./internal/observability -run TestPrometheusRuleMatchesRulesFile -update\n# Do not edit: edit " + base + " and regenerate.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(operatorFile, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// metricName finds Intake metric names in PromQL (and prose): identifiers
// starting intake_. Not a PromQL parser (github.com/prometheus/prometheus
// is a heavy dependency for this): a label value or a string holding such
// a word would count too, which the files here do not have. A prefix
// (intake_ingress_*, intake_replays*) is not a name.
var metricName = regexp.MustCompile(`(?:^|[^A-Za-z0-9_:])(intake_[A-Za-z0-9_:]*)(\*?)`)

func namesIn(s string) []string {
	var names []string
	for _, m := range metricName.FindAllStringSubmatch(s, -1) {
		if m[2] == "*" || strings.HasSuffix(m[1], "_") {
			continue
		}
		names = append(names, m[1])
	}
	return names
}

// exported is every intake_ name a role exports: each role's registry as
// the app builds it (telemetry.NewMetrics is every role's), the
// replayer's series, and the pool and NATS collectors the app adds;
// histograms with their _bucket, _sum and _count.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := replayer.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(store.NewPoolCollector(nil), telemetry.NewNATSCollector(nil))
	names := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range []prometheus.Collector{telemetry.NewMetrics().Registry, reg} {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no fqName in %s", d)
			}
			if strings.HasPrefix(m[1], "intake_") {
				names[m[1]] = true
			}
		}
	}
	// Which are histograms: their series carry suffixes.
	hist := map[string]bool{}
	m := telemetry.NewMetrics()
	for _, h := range []prometheus.Collector{m.PublishLatency, m.RequestLatency, m.TxLatency, m.HandlerLatency, m.FailureDelivery,
		m.Dispatch.Latency} {
		ch := make(chan *prometheus.Desc, 1)
		h.Describe(ch)
		hist[fqName.FindStringSubmatch((<-ch).String())[1]] = true
	}
	for h := range hist {
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			names[h+s] = true
		}
	}
	return names
}

// TestQueriedMetricsAreExported: every intake_ metric the dashboard's
// queries, the rules' expressions and docs/observability.md name is
// exported by some role.
func TestQueriedMetricsAreExported(t *testing.T) {
	have := exported(t)
	check := func(where, text string) int {
		n := 0
		for _, name := range namesIn(text) {
			n++
			if !have[name] {
				t.Errorf("%s names %s, which no role exports", where, name)
			}
		}
		return n
	}

	var r rules
	readYAML(t, rulesFile, &r)
	n := 0
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			n += check(rulesFile+" "+rule.Alert+rule.Record, rule.Expr)
		}
	}
	if n == 0 {
		t.Errorf("no metric found in %s", rulesFile)
	}

	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	n = 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			n += check(dashboardFile+" "+p.Title, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		n += check(dashboardFile+" variable", v.Definition)
	}
	if n == 0 {
		t.Errorf("no metric found in %s", dashboardFile)
	}

	doc, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	if check(docsFile, string(doc)) == 0 {
		t.Errorf("no metric found in %s", docsFile)
	}
}

// TestDocsListEveryMetric: docs/observability.md's table has a row for
// every intake_ metric a role exports.
func TestDocsListEveryMetric(t *testing.T) {
	doc, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `(intake_[a-z0-9_]+)`")
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		rows[m[1]] = true
	}
	var missing []string
	for name := range exported(t) {
		base := name
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, s)
		}
		if base == name && !rows[name] || base != name && !rows[base] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	missing = slices.Compact(missing)
	if len(missing) > 0 {
		t.Errorf("%s has no table row for %v", docsFile, missing)
	}
}

package validate

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// withDestination is a config with one HTTP destination, its secret from
// the dispatcher's Secret.
const withDestination = `
secrets:
  env:
    dispatcher: [intake-dispatcher-env]
config:
  destinations:
    - name: billing
      url: https://billing.internal/webhooks/intake
      secrets: ["${BILLING_DEST_SECRET}"]
`

func renderYAML(t *testing.T, values string) ([]object, error) {
	t.Helper()
	var vals map[string]any
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		t.Fatal(err)
	}
	return render(vals)
}

// dispatcherObjects are the rendered objects of the dispatcher role.
func dispatcherObjects(objs []object) (d *appsv1.Deployment, pdbs, policies int) {
	for _, o := range objs {
		if o.labels["app.kubernetes.io/component"] != "dispatcher" {
			continue
		}
		switch v := o.typed.(type) {
		case *appsv1.Deployment:
			d = v
		case *policyv1.PodDisruptionBudget:
			pdbs++
		case *networkingv1.NetworkPolicy:
			policies++
		}
	}
	return d, pdbs, policies
}

// TestDispatcherFollowsTheDestinations: dispatcher.enabled "auto" (the
// default) runs the dispatcher exactly when config.destinations lists any;
// true and false say so whatever the config; anything else is refused.
func TestDispatcherFollowsTheDestinations(t *testing.T) {
	for _, c := range []struct {
		name, values string
		want         bool
	}{
		{"auto, no destinations", `{}`, false},
		{"auto, a destination", withDestination, true},
		{"false, a destination", withDestination + "dispatcher: {enabled: false}\n", false},
		{"true, no destinations", `dispatcher: {enabled: true}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, err := renderYAML(t, c.values)
			if err != nil {
				t.Fatal(err)
			}
			d, pdbs, policies := dispatcherObjects(objs)
			if got := d != nil; got != c.want {
				t.Fatalf("dispatcher Deployment rendered %v, want %v", got, c.want)
			}
			if want := map[bool]int{true: 1, false: 0}[c.want]; pdbs != want || policies != 2*want {
				t.Errorf("dispatcher: %d PodDisruptionBudgets and %d NetworkPolicies, want %d and %d", pdbs, policies, want, 2*want)
			}
			// dispatcher.yaml is in the config either way (its checksum is the pods').
			if _, ok := configFiles(t, objs)["dispatcher"]; !ok {
				t.Error("no dispatcher.yaml in the config ConfigMap")
			}
		})
	}
	if _, err := renderYAML(t, `dispatcher: {enabled: "yes"}`); err == nil || !strings.Contains(err.Error(), "dispatcher.enabled: true, false or auto") {
		t.Errorf(`dispatcher.enabled "yes": render %v, want an error naming dispatcher.enabled`, err)
	}
}

// TestDispatcherPod: the dispatcher's pod runs `intake dispatcher` with its
// own NATS user and password, the Postgres URL, its Secrets only
// (secrets.env.dispatcher: the destinations' signing secrets) and its part
// of the config, the only one holding destinations[].secrets.
func TestDispatcherPod(t *testing.T) {
	objs, err := renderYAML(t, withDestination)
	if err != nil {
		t.Fatal(err)
	}
	d, _, _ := dispatcherObjects(objs)
	if d == nil {
		t.Fatal("no dispatcher Deployment")
	}
	if d.Name != release+"-dispatcher" || d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("Deployment %s, replicas %v: want %s-dispatcher with 2", d.Name, d.Spec.Replicas, release)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.Args) < 3 || !slices.Equal(c.Args[:3], []string{"dispatcher", "--http-addr", "127.0.0.1:9091"}) {
		t.Errorf("args %v, want dispatcher --http-addr 127.0.0.1:9091 …", c.Args)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if pw := env["INTAKE_NATS_PASSWORD"].ValueFrom; pw == nil || pw.SecretKeyRef == nil || pw.SecretKeyRef.Key != "INTAKE_NATS_DISPATCHER_PASSWORD" {
		t.Errorf("INTAKE_NATS_PASSWORD %+v, want the Secret's key INTAKE_NATS_DISPATCHER_PASSWORD", pw)
	}
	var from []string
	for _, e := range c.EnvFrom {
		from = append(from, e.SecretRef.Name)
	}
	if !slices.Equal(from, []string{"intake-dispatcher-env"}) {
		t.Errorf("envFrom %v, want secrets.env.dispatcher's intake-dispatcher-env alone", from)
	}
	files := configFiles(t, objs)
	if !strings.Contains(files["dispatcher"], "${BILLING_DEST_SECRET}") {
		t.Errorf("dispatcher.yaml has no destination secret's reference:\n%s", files["dispatcher"])
	}
	for role, raw := range files {
		checkRoleSecrets(t, role, raw)
	}
	// A literal destination secret is refused like any other secret.
	_, err = renderYAML(t, `config: {destinations: [{name: a, url: "https://a.internal/", secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]}]}`)
	if err == nil || !strings.Contains(err.Error(), "config.destinations[0].secrets[0]: a literal secret") || strings.Contains(err.Error(), "whsec_") {
		t.Errorf("a literal destination secret: render %v, want an error naming config.destinations[0].secrets[0] without the value", err)
	}
}

// TestDispatcherEgress: the dispatcher's pods, and theirs only, may connect
// to the destinations (networkPolicy.egress.destinations): by default HTTPS
// and HTTP to any address but link-local ones (the cloud metadata
// service); the other pods keep DNS, NATS and Postgres only.
func TestDispatcherEgress(t *testing.T) {
	objs, err := renderYAML(t, withDestination)
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]labels.Set{}
	for _, d := range byKind[*appsv1.Deployment](objs) {
		pods[d.Spec.Template.Labels["app.kubernetes.io/component"]] = d.Spec.Template.Labels
	}
	ports := func(role string) map[int32]bool {
		out := map[int32]bool{}
		for _, p := range byKind[*networkingv1.NetworkPolicy](objs) {
			sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
			if err != nil {
				t.Fatal(err)
			}
			if !sel.Matches(pods[role]) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				continue
			}
			for _, r := range p.Spec.Egress {
				for _, port := range r.Ports {
					out[port.Port.IntVal] = true
				}
			}
		}
		return out
	}
	for role := range pods {
		got := ports(role)
		want := map[int32]bool{53: true, 4222: true, 5432: true}
		if role == "dispatcher" {
			want[443], want[80] = true, true
		}
		if len(got) != len(want) {
			t.Errorf("%s pods may connect to ports %v, want %v", role, got, want)
		}
		for p := range want {
			if !got[p] {
				t.Errorf("%s pods may not connect to port %d", role, p)
			}
		}
	}
	for _, p := range byKind[*networkingv1.NetworkPolicy](objs) {
		if p.Name != release+"-dispatcher-egress" {
			continue
		}
		if len(p.Spec.Egress) != 1 || len(p.Spec.Egress[0].To) != 1 || p.Spec.Egress[0].To[0].IPBlock == nil ||
			!slices.Contains(p.Spec.Egress[0].To[0].IPBlock.Except, "169.254.0.0/16") {
			t.Errorf("NetworkPolicy %s: egress %+v, want one rule to any address but 169.254.0.0/16", p.Name, p.Spec.Egress)
		}
		return
	}
	t.Errorf("no NetworkPolicy %s-dispatcher-egress", release)
}

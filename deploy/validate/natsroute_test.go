package validate

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The NATS chart's names for release "nats" (deploy/engines/nats-values.yaml
// installs it so): the StatefulSet and the headless Service its route URLs
// name.
const (
	natsRelease         = "nats"
	natsHeadlessService = natsRelease + "-headless"
)

// loadNATSValues reads deploy/engines/nats-values.yaml strictly.
func loadNATSValues(t *testing.T) map[string]any {
	t.Helper()
	js, err := yaml.YAMLToJSONStrict([]byte(readFile(t, filepath.Join(enginesDir, "nats-values.yaml"))))
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(js, &vals); err != nil {
		t.Fatal(err)
	}
	return vals
}

// chartMerge is the chart's mergeOverwrite (sprig, mergo with override):
// maps merge key by key; any other value of src replaces dst's, unless it
// is empty and dst has one.
func chartMerge(dst, src map[string]any) map[string]any {
	for k, sv := range src {
		dv, ok := dst[k]
		dm, dIsMap := dv.(map[string]any)
		sm, sIsMap := sv.(map[string]any)
		switch {
		case dIsMap && sIsMap:
			dst[k] = chartMerge(dm, sm)
		case !ok || !emptyValue(sv) || emptyValue(dv):
			dst[k] = sv
		}
	}
	return dst
}

func emptyValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case float64:
		return v == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}

// natsClusterBlock is the cluster block of nats.conf that the NATS chart
// (2.14.2: files/config/cluster.yaml and files/config/tls.yaml of
// nats-io/k8s) writes from these values, as a map whose "<< … >>" strings
// are raw NATS config (variables, units). TestNATSValuesRenderWithTheChart
// compares it with the chart's own rendering when the chart is on disk.
func natsClusterBlock(t *testing.T, vals map[string]any) map[string]any {
	t.Helper()
	c := asMap(dig(vals, "config", "cluster"))
	str := func(m map[string]any, k, def string) string {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
		return def
	}
	num := func(m map[string]any, k string, def int) int {
		if f, ok := m[k].(float64); ok {
			return int(f)
		}
		return def
	}
	for _, p := range []any{c["patch"], dig(c, "tls", "patch")} {
		if l, _ := p.([]any); len(l) > 0 {
			t.Fatalf("config.cluster: a JSON patch is not emulated here; use merge")
		}
	}
	port := num(c, "port", 6222)
	noAdvertise := true
	if b, ok := c["noAdvertise"].(bool); ok {
		noAdvertise = b
	}
	sts := str(asMap(vals["statefulSet"]), "name", natsRelease)
	ru := asMap(c["routeURLs"])
	tlsv := asMap(c["tls"])
	tlsOn, _ := tlsv["enabled"].(bool)
	proto := "nats"
	if tlsOn {
		proto = "tls"
	}
	user, pass := str(ru, "user", ""), str(ru, "password", "")
	auth := ""
	if user != "" && pass != "" {
		auth = url.QueryEscape(user) + ":" + url.QueryEscape(pass) + "@"
	}
	domain := natsHeadlessService
	if b, _ := ru["useFQDN"].(bool); b {
		domain = fmt.Sprintf("%s.%s.svc.%s", domain, natsRelease, str(ru, "k8sClusterDomain", "cluster.local"))
	}
	var routes []any
	for i := range num(c, "replicas", 3) {
		routes = append(routes, fmt.Sprintf("%s://%s%s-%d.%s:%d", proto, auth, sts, i, domain, port))
	}
	block := map[string]any{"name": sts, "port": float64(port), "no_advertise": noAdvertise, "routes": routes}
	if user != "" && pass != "" {
		block["authorization"] = map[string]any{"user": user, "password": pass}
	}
	if tlsOn {
		tb := map[string]any{}
		if str(tlsv, "secretName", "") != "" {
			dir := strings.TrimSuffix(str(tlsv, "dir", "/etc/nats-certs/cluster"), "/")
			tb["cert_file"] = dir + "/" + str(tlsv, "cert", "tls.crt")
			tb["key_file"] = dir + "/" + str(tlsv, "key", "tls.key")
		}
		if ca := asMap(vals["tlsCA"]); ca["enabled"] == true && (str(ca, "configMapName", "") != "" || str(ca, "secretName", "") != "") {
			tb["ca_file"] = strings.TrimSuffix(str(ca, "dir", "/etc/nats-ca-cert"), "/") + "/" + str(ca, "key", "ca.crt")
		}
		block["tls"] = chartMerge(tb, deepCopyMap(asMap(tlsv["merge"])))
	}
	return chartMerge(block, deepCopyMap(asMap(c["merge"])))
}

func deepCopyMap(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

var rawNATSValue = regexp.MustCompile(`"<< (.*?) >>"`)

// natsConfText writes v as the chart does (JSON, with "<< x >>" unquoted).
func natsConfText(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return rawNATSValue.ReplaceAllString(b.String(), "$1")
}

// envVar is one entry of the NATS container's env.
type envVar struct {
	name, value  string
	secret, key  string // valueFrom.secretKeyRef
	fromPodField bool
}

// natsPodEnv is the container env the chart writes from container.env: the
// map in key order (Go templates range over a map so).
func natsPodEnv(vals map[string]any) []envVar {
	env := asMap(dig(vals, "container", "env"))
	var out []envVar
	for _, k := range slices.Sorted(maps.Keys(env)) {
		switch v := env[k].(type) {
		case string:
			out = append(out, envVar{name: k, value: v})
		case map[string]any:
			out = append(out, envVar{name: k, secret: toString(dig(v, "valueFrom", "secretKeyRef", "name")),
				key: toString(dig(v, "valueFrom", "secretKeyRef", "key")), value: toString(v["value"])})
		}
	}
	return out
}

var k8sVarRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expandEnv resolves the env as the kubelet does: a secretKeyRef from
// secret(name, key), and $(NAME) in a value from the entries before it
// ($$ is a literal $; an unknown name stays as written).
func expandEnv(env []envVar, secret func(name, key string) string) map[string]string {
	got := map[string]string{}
	for _, e := range env {
		if e.secret != "" {
			got[e.name] = secret(e.secret, e.key)
			continue
		}
		got[e.name] = k8sVarRef.ReplaceAllStringFunc(e.value, func(ref string) string {
			if ref == "$$" {
				return "$"
			}
			if v, ok := got[ref[2:len(ref)-1]]; ok {
				return v
			}
			return ref
		})
	}
	return got
}

// resolveNATS resolves a "<< $VAR >>" value from env as nats-server does
// (the variable's value parsed as NATS config); other values are returned
// as they are.
func resolveNATS(t *testing.T, v any, env map[string]string) any {
	t.Helper()
	s, ok := v.(string)
	m := chartVariable.FindStringSubmatch(s)
	if !ok || m == nil {
		return v
	}
	val, ok := env[m[1]]
	if !ok {
		return nil
	}
	parsed, err := conf.Parse("v: " + val)
	if err != nil {
		t.Errorf("$%s: nats-server cannot parse its value: %v", m[1], err)
		return nil
	}
	return parsed["v"]
}

// checkRouteSecurity: the cluster block makes every route log in with a
// user and a password from a Secret and present a certificate the other
// side verifies. It returns what is wrong, if anything.
func checkRouteSecurity(t *testing.T, vals, block map[string]any) []string {
	t.Helper()
	var bad []string
	const sentinel = "route-password-from-the-secret"
	env := natsPodEnv(vals)
	secretOf := map[string]string{}
	for _, e := range env {
		if e.secret != "" {
			secretOf[e.name] = e.secret + "/" + e.key
		}
	}
	auth, _ := block["authorization"].(map[string]any)
	user := toString(auth["user"])
	passVar := chartVariable.FindStringSubmatch(toString(auth["password"]))
	switch {
	case auth == nil || user == "" || auth["password"] == nil:
		bad = append(bad, "no authorization {user, password}: any server that reaches the route port joins the cluster "+
			"(set config.cluster.merge.authorization)")
	case passVar == nil:
		bad = append(bad, "the route password is not a << $VAR >> reference: it would be written into the chart's ConfigMap")
	case secretOf[passVar[1]] == "":
		bad = append(bad, fmt.Sprintf("container.env.%s must come from a Secret (valueFrom.secretKeyRef)", passVar[1]))
	}
	// The routes this server dials must log in as that user.
	resolved := expandEnv(env, func(name, key string) string {
		if passVar != nil && secretOf[passVar[1]] == name+"/"+key {
			return sentinel
		}
		return "other-secret"
	})
	routes, _ := resolveNATS(t, block["routes"], resolved).([]any)
	if n := num(dig(vals, "config", "cluster", "replicas"), 3); len(routes) != n {
		bad = append(bad, fmt.Sprintf("%d route URLs, want one per replica (%d)", len(routes), n))
	}
	for _, r := range routes {
		u, err := url.Parse(toString(r))
		if err != nil {
			bad = append(bad, fmt.Sprintf("route %v: %v", r, err))
			continue
		}
		p, _ := u.User.Password()
		if user == "" || u.User.Username() != user || p != sentinel {
			bad = append(bad, fmt.Sprintf("route %s://%s does not log in as the cluster's authorization user with its password", u.Scheme, u.Host))
		}
	}
	tb, _ := block["tls"].(map[string]any)
	switch {
	case tb == nil:
		bad = append(bad, "no route TLS: routes are clear text and a route is admitted by its password alone (set config.cluster.tls)")
	default:
		for _, k := range []string{"cert_file", "key_file", "ca_file"} {
			if toString(tb[k]) == "" {
				bad = append(bad, "route TLS has no "+k)
			}
		}
		if tb["verify"] != true {
			bad = append(bad, "route TLS: verify is not true")
		}
	}
	return bad
}

func num(v any, def int) int {
	if f, ok := v.(float64); ok {
		return int(f)
	}
	return def
}

// TestNATSRoutesAreAuthenticated: the shipped values' cluster block makes a
// route log in (user and password, the password from a Secret, in no
// ConfigMap) and present a certificate of the route CA, verified.
func TestNATSRoutesAreAuthenticated(t *testing.T) {
	vals := loadNATSValues(t)
	for _, b := range checkRouteSecurity(t, vals, natsClusterBlock(t, vals)) {
		t.Errorf("deploy/engines/nats-values.yaml config.cluster: %s", b)
	}
}

// testPKI is a route CA and certificates signed by it, in files.
type testPKI struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPool *x509.CertPool
}

func newTestPKI(t *testing.T, name string) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	p := &testPKI{dir: t.TempDir(), ca: ca, caKey: key, caPool: pool}
	writePEM(t, filepath.Join(p.dir, "ca.crt"), "CERTIFICATE", der)
	return p
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// leaf issues a route certificate (server and client use, as
// nats-route-tls.yaml asks cert-manager for) naming the pods as the route
// URLs do and 127.0.0.1, where the test's servers listen; with files, also
// writes it as <base>.crt and <base>.key.
func (p *testPKI) leaf(t *testing.T, base string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "nats-route"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"*." + natsHeadlessService, "*." + natsHeadlessService + "." + natsRelease + ".svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if base != "" {
		writePEM(t, filepath.Join(p.dir, base+".crt"), "CERTIFICATE", der)
		writePEM(t, filepath.Join(p.dir, base+".key"), "EC PRIVATE KEY", kder)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// logLines records a server's errors and warnings.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(format string, v ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
	l.mu.Unlock()
}
func (l *logLines) Noticef(string, ...any)         {}
func (l *logLines) Debugf(string, ...any)          {}
func (l *logLines) Tracef(string, ...any)          {}
func (l *logLines) Warnf(format string, v ...any)  { l.add(format, v...) }
func (l *logLines) Errorf(format string, v ...any) { l.add(format, v...) }
func (l *logLines) Fatalf(format string, v ...any) { l.add(format, v...) }
func (l *logLines) count(substr string) (n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// peers is the set of servers s has a route to.
func peers(s *server.Server) map[string]bool {
	out := map[string]bool{}
	rz, err := s.Routez(&server.RoutezOptions{})
	if err != nil {
		return out
	}
	for _, r := range rz.Routes {
		out[r.RemoteID] = true
	}
	return out
}

func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(25 * time.Millisecond)
	}
	return cond()
}

// shippedCluster starts the three servers of the shipped values on
// loopback: each one's cluster block is natsClusterBlock's, parsed by
// nats-server from text with the container's env set as the kubelet would
// (the route password a random one of the Secret), with the pods' names
// (nats-N.nats-headless:PORT) mapped to 127.0.0.1 and a port of each
// server's own, and the certificate files (Secret nats-route-tls) those of
// a test CA. It returns the servers, their logs, the password and the PKI.
func shippedCluster(t *testing.T, vals map[string]any) ([]*server.Server, []*logLines, string, *testPKI) {
	t.Helper()
	block := natsClusterBlock(t, vals)
	replicas := num(dig(vals, "config", "cluster", "replicas"), 3)
	ports := freePorts(t, replicas)
	podAddr := regexp.MustCompile(regexp.QuoteMeta(natsRelease) + `-(\d+)\.` + regexp.QuoteMeta(natsHeadlessService) +
		`(?:\.[a-z0-9.-]+)?:` + strconv.Itoa(num(block["port"], 6222)))
	toLoopback := func(s string) string {
		return podAddr.ReplaceAllStringFunc(s, func(m string) string {
			i, _ := strconv.Atoi(podAddr.FindStringSubmatch(m)[1])
			return "127.0.0.1:" + strconv.Itoa(ports[i])
		})
	}
	pki := newTestPKI(t, "intake route CA")
	pki.leaf(t, "tls")
	password := randomHex(t)
	env := expandEnv(natsPodEnv(vals), func(name, key string) string {
		if strings.Contains(key, "ROUTE") {
			return password
		}
		return randomHex(t)
	})
	for k, v := range env {
		t.Setenv(k, toLoopback(v))
	}
	// Certificate paths of the pod → the test CA's files, by base name.
	var files func(v any) any
	files = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				v[k] = files(x)
			}
		case []any:
			for i, x := range v {
				v[i] = files(x)
			}
		case string:
			if strings.HasPrefix(v, "/etc/") {
				return filepath.Join(pki.dir, path.Base(v))
			}
			return toLoopback(v)
		}
		return v
	}
	var servers []*server.Server
	var logs []*logLines
	for i, port := range ports {
		b := files(deepCopyMap(block)).(map[string]any)
		b["port"] = float64(port)
		b["host"] = "127.0.0.1"
		text := fmt.Sprintf("server_name: %s-%d\nhost: 127.0.0.1\nport: -1\ncluster: %s\n", natsRelease, i, natsConfText(b))
		opts := &server.Options{}
		if err := opts.ProcessConfigString(text); err != nil {
			t.Fatalf("nats-server refuses the cluster block of the values: %v\n%s", err, text)
		}
		opts.NoSigs = true
		s, l := startServer(t, opts)
		servers = append(servers, s)
		logs = append(logs, l)
	}
	for i, s := range servers {
		if !waitFor(10*time.Second, func() bool { return len(peers(s)) == replicas-1 }) {
			t.Fatalf("server %d has routes to %d servers, want the %d others", i, len(peers(s)), replicas-1)
		}
	}
	return servers, logs, password, pki
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func startServer(t *testing.T, opts *server.Options) (*server.Server, *logLines) {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	l := &logLines{}
	s.SetLogger(l, false, false)
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("server %s did not start: %v", opts.ServerName, l.lines)
	}
	t.Cleanup(s.Shutdown)
	return s, l
}

func connect(t *testing.T, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestRogueRouteIsRefused reproduces the route side door (issue 30, item
// 2): a server that reaches port 6222 of a cluster run from the shipped
// values, with a route to it, must not join it. Three servers run the
// values' cluster block (shippedCluster); a rogue server then routes to
// the first of them without the route password (but with a certificate
// of the route CA), with the password but a certificate of another CA, and
// with the password and no certificate. Each time the cluster must refuse
// the route (its log says why), keep its routes to its own servers only,
// and carry no message between the rogue and the cluster either way.
// Against values with no route authorization (before issue 30) every
// rogue joins and both messages cross.
func TestRogueRouteIsRefused(t *testing.T) {
	vals := loadNATSValues(t)
	servers, logs, password, pki := shippedCluster(t, vals)
	block := natsClusterBlock(t, vals)
	user := toString(dig(block, "authorization", "user"))
	tlsOn := block["tls"] != nil
	clusterName := toString(block["name"])

	// The cluster carries messages between its own servers.
	sub := connect(t, servers[1])
	seen, err := sub.SubscribeSync("intake.in.>")
	if err != nil {
		t.Fatal(err)
	}
	sub.Flush()
	pub := connect(t, servers[len(servers)-1])
	if !waitFor(5*time.Second, func() bool {
		pub.Publish("intake.in.acme.ping", []byte("ping"))
		pub.Flush()
		_, err := seen.NextMsg(100 * time.Millisecond)
		return err == nil
	}) {
		t.Fatal("the cluster's own servers do not exchange messages")
	}
	for {
		if _, err := seen.NextMsg(200 * time.Millisecond); err != nil {
			break
		}
	}

	other := newTestPKI(t, "rogue CA")
	for _, c := range []struct {
		name     string
		password bool
		cert     *tls.Certificate
		refusal  string // what the cluster logs; "" for the genuine server
	}{
		// The control: a fourth server with what a pod of the StatefulSet
		// has joins, and messages cross — the rogues below differ from it
		// in one credential each.
		{name: "genuine: the route password, a certificate of the route CA", password: true, cert: ptr(pki.leaf(t, ""))},
		{name: "rogue: no route password, a certificate of the route CA", cert: ptr(pki.leaf(t, "")), refusal: "authentication error"},
		{name: "rogue: the route password, a certificate of another CA", password: true, cert: ptr(other.leaf(t, "")), refusal: "TLS route handshake error"},
		{name: "rogue: the route password, no certificate", password: true, refusal: "TLS route handshake error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			genuine := c.refusal == ""
			target := servers[0]
			refusals := func() int { return logs[0].count(c.refusal) }
			before := refusals()
			opts := &server.Options{ServerName: "fourth", Host: "127.0.0.1", Port: -1, NoSigs: true}
			opts.Cluster.Name = clusterName
			opts.Cluster.Host = "127.0.0.1"
			opts.Cluster.Port = -1
			scheme := "nats"
			if tlsOn {
				scheme = "tls"
				tc := &tls.Config{RootCAs: pki.caPool, ClientCAs: pki.caPool, MinVersion: tls.VersionTLS12,
					ClientAuth: tls.RequireAndVerifyClientCert}
				if c.cert != nil {
					tc.Certificates = []tls.Certificate{*c.cert}
				}
				opts.Cluster.TLSConfig = tc
				opts.Cluster.TLSTimeout = 2
			}
			ru := &url.URL{Scheme: scheme, Host: target.ClusterAddr().String()}
			if c.password && user != "" {
				ru.User = url.UserPassword(user, password)
				opts.Cluster.Username, opts.Cluster.Password = user, password
			}
			opts.Routes = []*url.URL{ru}
			r, _ := startServer(t, opts)
			defer r.Shutdown()

			joinedAny := func() bool {
				if len(peers(r)) > 0 {
					return true
				}
				for _, s := range servers {
					if peers(s)[r.ID()] {
						return true
					}
				}
				return false
			}
			// A rogue retries its route every second: two refusals, or a join.
			waitFor(5*time.Second, func() bool {
				return joinedAny() || (!genuine && refusals() >= before+2)
			})
			joined := joinedAny()
			switch {
			case genuine && !joined:
				t.Fatalf("a server with the route password and a certificate of the route CA did not join: %q", logs[0].lines)
			case !genuine && joined:
				t.Errorf("the rogue server joined the cluster: routes to %d of its servers", len(peers(r)))
			case !genuine && refusals() == before:
				t.Errorf("the cluster logged no %q for the rogue's route: %q", c.refusal, logs[0].lines)
			}
			if !genuine {
				for i, s := range servers {
					if p := peers(s); len(p) != len(servers)-1 || p[r.ID()] {
						t.Errorf("server %d has routes to %d servers (the rogue among them: %v), want its %d peers only", i, len(p), p[r.ID()], len(servers)-1)
					}
				}
			}

			// Injection: published on the fourth server, seen by a
			// subscriber on the cluster? Reading: published on the
			// cluster, seen by a subscriber on the fourth server?
			rc := connect(t, r)
			rsub, err := rc.SubscribeSync("intake.in.acme.card")
			if err != nil {
				t.Fatal(err)
			}
			rc.Flush()
			wait := time.Second
			if genuine {
				wait = 5 * time.Second
			}
			injected := waitFor(wait, func() bool {
				rc.Publish("intake.in.acme.invoice.paid", []byte(`{"type":"invoice.paid","forged":true}`))
				rc.Flush()
				_, err := seen.NextMsg(50 * time.Millisecond)
				return err == nil
			})
			read := waitFor(wait, func() bool {
				pub.Publish("intake.in.acme.card", []byte(`{"card":"4242424242424242"}`))
				pub.Flush()
				_, err := rsub.NextMsg(50 * time.Millisecond)
				return err == nil
			})
			if genuine && (!injected || !read) {
				t.Errorf("messages do not cross to and from a genuine fourth server (published there: %v, read there: %v)", injected, read)
			}
			if !genuine && injected {
				t.Errorf("a message published on the rogue reached a subscriber on the cluster")
			}
			if !genuine && read {
				t.Errorf("the rogue read a message published on the cluster")
			}
			for {
				if _, err := seen.NextMsg(100 * time.Millisecond); err != nil {
					break
				}
			}
			r.Shutdown()
			if !waitFor(5*time.Second, func() bool {
				for _, s := range servers {
					if len(peers(s)) != len(servers)-1 {
						return false
					}
				}
				return true
			}) {
				t.Fatalf("the cluster did not settle back to its %d servers", len(servers))
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// cert-manager's Issuer and Certificate, as minimal local structs with the
// fields nats-route-tls.yaml uses (names from cert-manager.io/v1); strict
// decoding refuses any other.
type cmIssuer struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		SelfSigned *struct{} `json:"selfSigned"`
		CA         *struct {
			SecretName string `json:"secretName"`
		} `json:"ca"`
	} `json:"spec"`
}

type cmCertificate struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		IsCA        bool     `json:"isCA"`
		CommonName  string   `json:"commonName"`
		SecretName  string   `json:"secretName"`
		Duration    string   `json:"duration"`
		RenewBefore string   `json:"renewBefore"`
		Usages      []string `json:"usages"`
		DNSNames    []string `json:"dnsNames"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
		IssuerRef struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// TestNATSRouteCertificate checks deploy/engines/nats-route-tls.yaml: the
// Secret the values' cluster TLS mounts is a cert-manager Certificate for
// both ends of a route, issued by a CA Issuer of its own, naming every
// host the route URLs dial.
func TestNATSRouteCertificate(t *testing.T) {
	issuers := map[string]*cmIssuer{}
	certs := map[string]*cmCertificate{} // by secretName
	for _, doc := range releaseutil.SplitManifests(readFile(t, filepath.Join(enginesDir, "nats-route-tls.yaml"))) {
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		switch head.APIVersion + "/" + head.Kind {
		case "cert-manager.io/v1/Issuer":
			var i cmIssuer
			if err := decodeStrict([]byte(doc), &i); err != nil {
				t.Fatalf("Issuer: %v", err)
			}
			issuers[i.Metadata.Name] = &i
		case "cert-manager.io/v1/Certificate":
			var c cmCertificate
			if err := decodeStrict([]byte(doc), &c); err != nil {
				t.Fatalf("Certificate: %v", err)
			}
			certs[c.Spec.SecretName] = &c
		default:
			t.Fatalf("unexpected %s %s", head.APIVersion, head.Kind)
		}
	}
	vals := loadNATSValues(t)
	secretName := toString(dig(vals, "config", "cluster", "tls", "secretName"))
	c := certs[secretName]
	if c == nil {
		t.Fatalf("no Certificate writes the Secret %q that config.cluster.tls.secretName mounts", secretName)
	}
	for _, u := range []string{"server auth", "client auth"} {
		if !slices.Contains(c.Spec.Usages, u) {
			t.Errorf("Certificate %s: usages %v lack %q (a route is both ends of TLS)", c.Metadata.Name, c.Spec.Usages, u)
		}
	}
	is := issuers[c.Spec.IssuerRef.Name]
	switch {
	case c.Spec.IssuerRef.Kind != "Issuer" || is == nil:
		t.Errorf("Certificate %s: issuerRef %+v is not an Issuer of this file (a ClusterIssuer's CA would be shared)", c.Metadata.Name, c.Spec.IssuerRef)
	case is.Spec.CA == nil || certs[is.Spec.CA.SecretName] == nil || !certs[is.Spec.CA.SecretName].Spec.IsCA:
		t.Errorf("Issuer %s: want a CA Issuer whose Secret is a CA Certificate of this file", is.Metadata.Name)
	}
	// Every host the route URLs dial (the password aside) is named.
	block := natsClusterBlock(t, vals)
	env := expandEnv(natsPodEnv(vals), func(_, _ string) string { return "x" })
	routes, _ := resolveNATS(t, block["routes"], env).([]any)
	if len(routes) == 0 {
		t.Fatalf("no route URLs")
	}
	for _, r := range routes {
		u, err := url.Parse(toString(r))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(c.Spec.DNSNames, func(n string) bool { return dnsNameMatches(n, u.Hostname()) }) {
			t.Errorf("Certificate %s: dnsNames %v do not name route host %s", c.Metadata.Name, c.Spec.DNSNames, u.Hostname())
		}
	}
}

// dnsNameMatches: pattern (a name, or *.name for one more label) names host.
func dnsNameMatches(pattern, host string) bool {
	if rest, ok := strings.CutPrefix(pattern, "*."); ok {
		label, domain, found := strings.Cut(host, ".")
		return found && label != "" && domain == rest
	}
	return pattern == host
}

// natsServerLabels are the labels of the NATS chart's server pods for
// release "nats" (its nats.selectorLabels).
var natsServerLabels = map[string]string{
	"app.kubernetes.io/name":      "nats",
	"app.kubernetes.io/instance":  natsRelease,
	"app.kubernetes.io/component": "nats",
}

// peerAdmits: the NetworkPolicy peer admits a pod with podLabels in a
// namespace with nsLabels, when the policy is in namespace policyNS.
func peerAdmits(t *testing.T, p networkingv1.NetworkPolicyPeer, policyNS string, nsLabels, podLabels map[string]string) bool {
	t.Helper()
	if p.IPBlock != nil {
		return true // an address range admits pods too; refused below
	}
	matches := func(s *metav1.LabelSelector, l map[string]string) bool {
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel.Matches(labels.Set(l))
	}
	if p.NamespaceSelector == nil {
		if nsLabels["kubernetes.io/metadata.name"] != policyNS {
			return false
		}
	} else if !matches(p.NamespaceSelector, nsLabels) {
		return false
	}
	return p.PodSelector == nil || matches(p.PodSelector, podLabels)
}

func nsLabels(name string, more ...string) map[string]string {
	l := map[string]string{"kubernetes.io/metadata.name": name}
	for i := 0; i+1 < len(more); i += 2 {
		l[more[i]] = more[i+1]
	}
	return l
}

// TestNATSNetworkPolicy checks deploy/engines/nats-networkpolicy.yaml: in
// namespace nats nothing is admitted but what the servers' policy opens;
// the route port only to the NATS servers, the client port to Intake's pods
// (as the chart renders them) and the subscribers' namespaces, monitoring
// to Prometheus and KEDA; every rule names its peers, none by address.
func TestNATSNetworkPolicy(t *testing.T) {
	const ns = "nats"
	var policies []*networkingv1.NetworkPolicy
	for _, doc := range releaseutil.SplitManifests(readFile(t, filepath.Join(enginesDir, "nats-networkpolicy.yaml"))) {
		var p networkingv1.NetworkPolicy
		if err := decodeStrict([]byte(doc), &p); err != nil {
			t.Fatal(err)
		}
		if p.APIVersion != "networking.k8s.io/v1" || p.Kind != "NetworkPolicy" {
			t.Fatalf("unexpected %s %s", p.APIVersion, p.Kind)
		}
		policies = append(policies, &p)
	}
	// admitted: the ports a pod (podLabels in namespace nsl) may reach on
	// a pod of the nats namespace with target labels.
	admitted := func(target, nsl, podLabels map[string]string) map[int32]bool {
		ports := map[int32]bool{}
		isolated := false
		for _, p := range policies {
			sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
			if err != nil {
				t.Fatal(err)
			}
			if !sel.Matches(labels.Set(target)) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				continue
			}
			isolated = true
			for _, r := range p.Spec.Ingress {
				if !slices.ContainsFunc(r.From, func(peer networkingv1.NetworkPolicyPeer) bool {
					return peerAdmits(t, peer, ns, nsl, podLabels)
				}) {
					continue
				}
				for _, port := range r.Ports {
					ports[port.Port.IntVal] = true
				}
			}
		}
		if !isolated {
			t.Errorf("no policy isolates pods labelled %v: everything reaches them", target)
		}
		return ports
	}
	for _, p := range policies {
		for i, r := range p.Spec.Ingress {
			if len(r.From) == 0 || len(r.Ports) == 0 {
				t.Errorf("NetworkPolicy %s rule %d: want both ports and from (an empty one admits every source or port)", p.Name, i)
			}
			for _, peer := range r.From {
				if peer.IPBlock != nil {
					t.Errorf("NetworkPolicy %s rule %d: an ipBlock admits pods by address; name them by labels", p.Name, i)
				}
			}
		}
	}
	vals := loadNATSValues(t)
	route := int32(num(dig(vals, "config", "cluster", "port"), 6222))
	client := int32(num(dig(vals, "config", "nats", "port"), 4222))
	monitor := int32(num(dig(vals, "config", "monitor", "port"), 8222))
	want := func(who string, got map[int32]bool, ports ...int32) {
		t.Helper()
		var g []int32
		for p := range got {
			g = append(g, p)
		}
		slices.Sort(g)
		slices.Sort(ports)
		if !slices.Equal(g, ports) {
			t.Errorf("%s may reach the NATS servers on %v, want %v", who, g, ports)
		}
	}
	want("another NATS server", admitted(natsServerLabels, nsLabels(ns), natsServerLabels), route)
	nonServer := map[string]string{"app.kubernetes.io/name": "nats", "app.kubernetes.io/instance": natsRelease, "app.kubernetes.io/component": "nats-box"}
	want("nats-box (a pod of the namespace that is no server)", admitted(natsServerLabels, nsLabels(ns), nonServer))
	want("a pod of namespace nats", admitted(nonServer, nsLabels(ns), natsServerLabels))
	want("a pod of another namespace", admitted(natsServerLabels, nsLabels("default"), map[string]string{"app": "x"}))
	want("a pod of namespace intake that is not Intake's", admitted(natsServerLabels, nsLabels("intake"), map[string]string{"app": "x"}))
	want("a pod labelled as a NATS server in another namespace", admitted(natsServerLabels, nsLabels("default"), natsServerLabels))
	want("a subscriber", admitted(natsServerLabels, nsLabels("billing", "intakehq.github.io/nats-client", "true"), map[string]string{"app": "billing"}), client)
	want("Prometheus", admitted(natsServerLabels, nsLabels("monitoring"), map[string]string{"app": "prometheus"}), monitor)
	want("KEDA", admitted(natsServerLabels, nsLabels("keda"), map[string]string{"app": "keda-operator"}), monitor)
	// Every pod the Intake chart renders (its defaults, namespace intake).
	objs, err := render(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]map[string]string{}
	for _, d := range byKind[*appsv1.Deployment](objs) {
		pods["Deployment "+d.Name] = d.Spec.Template.Labels
	}
	for _, j := range byKind[*batchv1.Job](objs) {
		pods["Job "+j.Name] = j.Spec.Template.Labels
	}
	if len(pods) != 4 {
		t.Fatalf("the Intake chart renders %d workloads, want 4", len(pods))
	}
	for name, l := range pods {
		want("Intake's "+name, admitted(natsServerLabels, nsLabels(namespace), l), client)
	}
}

package config

import "net"

// HTTP configures every role's HTTP listeners. The public listener (address
// from `ingress.addr` or the role's --http-addr) serves webhooks and
// /api/v1; the internal one, when set, takes what only operators and their
// tools should reach.
type HTTP struct {
	// InternalAddr, when set, is a second, plain-HTTP listener serving
	// /metrics, /debug (with debug.pprof), /healthz and /readyz; the public
	// listener then answers 404 for /metrics and /debug (it keeps /healthz
	// and /readyz for load balancers). Bind it to loopback or a private
	// network. Defaults to "": everything on the public listener, as
	// `intake dev` wants.
	InternalAddr string `yaml:"internal_addr"`
	// TLS serves the public listener over HTTPS. Defaults to off.
	TLS TLS `yaml:"tls"`
}

// The public listener of the roles whose address is not in the file:
// `intake processor`, `intake replayer` and `intake dispatcher` listen here
// unless --http-addr says otherwise (ingress listens on ingress.addr,
// DefaultIngressAddr).
const (
	DefaultProcessorHTTPAddr  = ":9090"
	DefaultReplayerHTTPAddr   = ":8081"
	DefaultDispatcherHTTPAddr = ":9091"
)

// TLS names a PEM certificate (chain) and its key. Both or neither are set.
// They are read at start (a bad pair fails the start) and again on the first
// handshake after either file changes (mtime, size or inode: an atomic
// rename, a Kubernetes secret update); a new pair that does not load keeps
// the current certificate and logs the error.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Validate checks the section; errors name the YAML field.
func (h HTTP) Validate() error {
	var p problems
	if h.InternalAddr != "" {
		if _, _, err := net.SplitHostPort(h.InternalAddr); err != nil {
			p.add("http.internal_addr", "must be host:port (\":9100\", \"127.0.0.1:9100\"): %v", err)
		}
	}
	switch {
	case h.TLS.CertFile != "" && h.TLS.KeyFile == "":
		p.add("http.tls.key_file", "required with http.tls.cert_file")
	case h.TLS.CertFile == "" && h.TLS.KeyFile != "":
		p.add("http.tls.cert_file", "required with http.tls.key_file")
	}
	return p.err()
}

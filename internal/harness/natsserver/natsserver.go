package natsserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultAddr is where an embedded server listens unless told
// otherwise: NATS's own default port, on loopback only.
const DefaultAddr = "127.0.0.1:4222"

// Config configures an in-process nats-server with JetStream.
type Config struct {
	// Addr to listen on, host:port. Defaults to DefaultAddr; port 0 picks a free one.
	Addr string
	// StoreDir holds the JetStream file store. Required.
	StoreDir string
	// SyncAlways fsyncs every JetStream write before the PubAck. Defaults to
	// false: nats-server then fsyncs every 2 minutes, so on a single node an
	// acknowledged write can be lost on power loss (not on a process crash).
	// Clusters with R3 streams get durability from replication instead.
	SyncAlways bool
	// ServerName names the server (defaults to "intake-embedded").
	ServerName string
	// Cluster, when set, joins the embedded server to a NATS cluster.
	Cluster *ClusterConfig
	// ReadyTimeout bounds the wait for the server to accept connections. Defaults to 10s.
	ReadyTimeout time.Duration
	// ConfigFile, when set, is a nats-server configuration file (accounts,
	// users, permissions: deploy/nats/intake.conf) the server starts from;
	// the fields above override its listen address, store, name and cluster.
	// Defaults to none: no authentication.
	ConfigFile string
}

// ClusterConfig joins an embedded server to a cluster (tests and the chaos harness).
type ClusterConfig struct {
	Name   string
	Addr   string   // this node's cluster listener host:port
	Routes []string // nats-route://host:port of the other nodes
}

// Embedded is a running in-process nats-server.
type Embedded struct {
	srv *server.Server
}

// Run starts an in-process nats-server with JetStream and waits until
// it accepts connections.
func Run(cfg Config) (*Embedded, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("stream: Config.StoreDir is required")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.ServerName == "" {
		cfg.ServerName = "intake-embedded"
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 10 * time.Second
	}
	host, portStr, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("stream: nats addr %q: %w", cfg.Addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("stream: nats addr %q: bad port", cfg.Addr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{MaxPayload: 8 << 20, JetStreamMaxMemory: 256 << 20}
	if cfg.ConfigFile != "" {
		if opts, err = server.ProcessConfigFile(cfg.ConfigFile); err != nil {
			return nil, fmt.Errorf("stream: nats-server config: %w", err)
		}
		if opts.JetStreamMaxMemory <= 0 {
			opts.JetStreamMaxMemory = 256 << 20
		}
	}
	opts.ServerName, opts.Host, opts.Port = cfg.ServerName, host, port
	opts.JetStream, opts.StoreDir = true, cfg.StoreDir
	opts.SyncAlways = opts.SyncAlways || cfg.SyncAlways
	opts.NoSigs, opts.NoLog = true, true
	if c := cfg.Cluster; c != nil {
		chost, cportStr, err := net.SplitHostPort(c.Addr)
		if err != nil {
			return nil, fmt.Errorf("stream: cluster addr %q: %w", c.Addr, err)
		}
		cport, _ := strconv.Atoi(cportStr)
		opts.Cluster = server.ClusterOpts{Name: c.Name, Host: chost, Port: cport}
		opts.Routes = server.RoutesFromStr(joinComma(c.Routes))
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("stream: embedded nats-server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(cfg.ReadyTimeout) {
		srv.Shutdown()
		return nil, fmt.Errorf("stream: embedded nats-server on %s not ready after %s (port in use?)", cfg.Addr, cfg.ReadyTimeout)
	}
	return &Embedded{srv: srv}, nil
}

// ClientURL is the nats:// URL clients connect to.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Server exposes the underlying server (tests use it for JetStream state).
func (e *Embedded) Server() *server.Server { return e.srv }

// Shutdown stops the server and waits until it is down.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

func joinComma(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}

package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/logger"
	"github.com/spf13/cobra"

	"github.com/intakehq/intake/internal/harness/natsserver"
)

// newNATSCmd runs the embedded nats-server as a process of its own, so the
// chaos harness can kill -9 and restart NATS like any other piece. Hidden:
// in production run the real nats-server.
func newNATSCmd() *cobra.Command {
	var (
		c      natsserver.Config
		cl     natsserver.ClusterConfig
		routes string
	)
	cmd := &cobra.Command{
		Use:    "nats",
		Short:  "Run the embedded NATS JetStream server until signalled (chaos harness, tests)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cl.Name != "" {
				if routes != "" {
					cl.Routes = strings.Split(routes, ",")
				}
				c.Cluster = &cl
			}
			emb, err := natsserver.Run(c)
			if err != nil {
				return err
			}
			// The server's own notices (routes, leader elections, stream
			// recovery) go to stderr: the harness keeps them in the node's log.
			emb.Server().SetLogger(logger.NewStdLogger(true, false, false, false, true), false, false)
			fmt.Fprintf(cmd.ErrOrStderr(), "nats %s ready on %s\n", c.ServerName, emb.ClientURL())
			<-cmd.Context().Done()
			emb.Shutdown()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Addr, "addr", natsserver.DefaultAddr, "client listen address")
	f.StringVar(&c.StoreDir, "store-dir", "", "JetStream file store (required)")
	f.StringVar(&c.ServerName, "name", "intake-nats", "server name (unique in a cluster)")
	f.BoolVar(&c.SyncAlways, "sync-always", false, "fsync every write before its PubAck")
	f.StringVar(&c.ConfigFile, "config", "", "nats-server configuration file (users, permissions: deploy/nats/intake.conf); the flags override its listeners, store and cluster")
	f.DurationVar(&c.ReadyTimeout, "ready-timeout", time.Minute, "how long to wait for the listeners (a large store takes time to recover)")
	f.StringVar(&cl.Name, "cluster-name", "", "join a cluster of this name")
	f.StringVar(&cl.Addr, "cluster-addr", "", "this node's cluster listen address")
	f.StringVar(&routes, "routes", "", "comma-separated nats-route://host:port of the other nodes")
	return cmd
}

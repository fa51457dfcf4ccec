package store

import (
	"context"
	"net"
	neturl "net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// What a hanging Postgres (a network partition that drops packets, a
// server frozen without closing) may cost a connection of Intake's at most.
// The URL overrides each: connect_timeout (0: wait indefinitely), and the
// session settings as URL parameters (…&idle_in_transaction_session_timeout=2min).
const (
	// DefaultConnectTimeout bounds a dial with its startup and
	// authentication when the URL has no connect_timeout: without it a
	// dial into a partition hangs, and enough of them fill the pool.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultTCPUserTimeout is how long sent bytes may stay unacknowledged
	// before the kernel drops the connection (TCP_USER_TIMEOUT, Linux):
	// a statement sent into a partition fails after it rather than
	// when the statement's own deadline (if any) ends.
	DefaultTCPUserTimeout = 15 * time.Second
	// DefaultKeepAlive is TCP keepalive's idle time and probe interval
	// (3 probes): an idle connection whose peer vanished is found within
	// about 20s.
	DefaultKeepAlive = 5 * time.Second
	// DefaultIdleInTransactionTimeout is the server's
	// idle_in_transaction_session_timeout for Intake's sessions: a
	// transaction whose client vanished mid-way is ended by the server,
	// and its locks released, this long after its last statement.
	// Intake's transactions run within their own deadline (the processor's
	// is processor.ack_wait, 30s by default), so none of its own idles
	// that long. It is SET once per new connection, not sent as a startup
	// parameter: PgBouncer refuses startup parameters it does not know
	// ("unsupported startup parameter"). A value in the URL is sent as
	// the URL says; an empty one (idle_in_transaction_session_timeout=)
	// sets none: the server's setting applies.
	DefaultIdleInTransactionTimeout = "30s"
)

// idleInTransaction is the session setting DefaultIdleInTransactionTimeout sets.
const idleInTransaction = "idle_in_transaction_session_timeout"

// withDeadlines gives cc (parsed from url) the bounds above where url set none: a
// connect timeout, a dialer with TCP keepalive and TCP_USER_TIMEOUT, and
// the server-side idle-in-transaction timeout. They are socket options and,
// for the timeout, one SET when a connection opens: no round trip per
// statement.
func withDeadlines(cc *pgconn.Config, url string) {
	// An explicit connect_timeout=0 is libpq's "wait indefinitely": kept.
	if cc.ConnectTimeout == 0 && !setsConnectTimeout(url) {
		cc.ConnectTimeout = DefaultConnectTimeout
	}
	switch v, set := cc.RuntimeParams[idleInTransaction]; {
	case !set:
		after := cc.AfterConnect
		cc.AfterConnect = func(ctx context.Context, c *pgconn.PgConn) error {
			if err := c.Exec(ctx, "SET "+idleInTransaction+" = '"+DefaultIdleInTransactionTimeout+"'").Close(); err != nil {
				return err
			}
			if after != nil {
				return after(ctx, c)
			}
			return nil
		}
	case v == "":
		delete(cc.RuntimeParams, idleInTransaction)
	}
	d := &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: DefaultKeepAlive, Interval: DefaultKeepAlive, Count: 3},
		Control:         tcpUserTimeout(DefaultTCPUserTimeout),
	}
	cc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if network != "tcp" && network != "tcp4" && network != "tcp6" {
			return (&net.Dialer{}).DialContext(ctx, network, addr) // a unix socket
		}
		return d.DialContext(ctx, network, addr)
	}
}

// connectTimeoutKey finds connect_timeout in a keyword/value connection
// string ("host=… connect_timeout=0").
var connectTimeoutKey = regexp.MustCompile(`(^|\s)connect_timeout\s*=`)

// setsConnectTimeout reports whether url (a URL or a keyword/value string)
// or PGCONNECT_TIMEOUT gives connect_timeout, whatever its value.
func setsConnectTimeout(url string) bool {
	if _, ok := os.LookupEnv("PGCONNECT_TIMEOUT"); ok {
		return true
	}
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		u, err := neturl.Parse(url)
		return err == nil && u.Query().Has("connect_timeout")
	}
	return connectTimeoutKey.MatchString(url)
}

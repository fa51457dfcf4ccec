// Package pgcluster runs a private PostgreSQL cluster from the server binaries
// on PATH, for `intake dev` and for tests.
//
// Start creates the data directory, runs initdb when it holds no cluster yet,
// and starts `postgres` as a child process listening only on 127.0.0.1 with
// trust authentication for the user postgres. Nothing else on the machine is
// touched: no unix socket in /var/run/postgresql, no system service, no
// configuration outside the data directory; the server log goes to
// postgres.log inside it.
//
// The cluster belongs to the Go process that started it. On Linux the
// postmaster gets a parent-death signal, so a crashed or killed Go process
// does not leave a server running (see startProcess for why postgres is
// started directly rather than through pg_ctl).
//
// PostgreSQL refuses to run as root. When the Go process is root (containers,
// CI) initdb and postgres run as the OS user "postgres" and the data
// directory is handed to that user.
//
// Stop, Start and Kill exist for fault injection: tests restart or crash the
// server under a running pipeline and check that nothing acknowledged is lost.
// StartStandby, Promote, Follow, Pause and Resume (replication.go) add a
// streaming standby for failover: kill the primary, promote the standby,
// bring the old primary back as a standby of the new one. StartBouncer
// (bouncer.go) puts a pgbouncer in front of a server, for the tests behind
// a transaction-mode pooler; it runs as a child the same way, as the OS user
// postgres when we are root.
package pgcluster

package chaos

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/intakehq/intake/pkg/config"
)

// The run's NATS nodes run the shipped server configuration
// (deploy/nats/intake.conf): every role connects as its own user with the
// shipped least-privilege permissions, `intake migrate` creates the streams
// as admin, and a missing permission shows up as a role that cannot work.
// The harness adds one user of its own, without permissions, to observe
// the streams and consumers it judges.

// shippedNATSConfig is the configuration's path inside the source tree.
const shippedNATSConfig = "deploy/nats/intake.conf"

// harnessUser is the harness's own user: all of the account, no more.
const harnessUser = "harness"

// natsUsers are the shipped users the run gives passwords to.
var natsUsers = []string{"admin", "ingress", "processor", "replayer", "dispatcher", "subscriber", harnessUser}

// findNATSConfig looks for deploy/nats/intake.conf from the working
// directory upward (a test runs in internal/harness/chaos, `intake bench chaos`
// from the repository root).
func findNATSConfig() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, shippedNATSConfig)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("chaos: %s not found above the working directory: give its path (Options.NATSConfig, --nats-config)", shippedNATSConfig)
		}
		dir = parent
	}
}

// writeNATSConfig copies the shipped configuration into the run directory
// with the harness's user added to the Intake account and fsync relaxed,
// and draws a random password for every user.
func (h *harness) writeNATSConfig() error {
	src := h.o.NATSConfig
	if src == "" {
		var err error
		if src, err = findNATSConfig(); err != nil {
			return err
		}
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("chaos: nats config: %w", err)
	}
	const users = "users: ["
	if n := strings.Count(string(raw), users); n != 1 {
		return errors.New("chaos: " + src + ": want exactly one `users: [` list to add the harness's user to")
	}
	conf := strings.Replace(string(raw), users, users+"\n      # added by the chaos harness: observes the streams and consumers it judges\n"+
		"      { user: "+harnessUser+", password: $INTAKE_NATS_HARNESS_PASSWORD }\n", 1)
	// The harness kills processes, never the machine: a write the kernel
	// holds survives kill -9, so the nodes keep nats-server's periodic fsync
	// as the harness always ran them. With an fsync per write, three nodes on
	// one shared disk turn the run into a disk benchmark.
	const syncAlways = "sync_interval: always"
	if strings.Contains(conf, syncAlways) {
		conf = strings.Replace(conf, syncAlways, "sync_interval: 2m  # chaos harness: kills processes, not the machine", 1)
	}
	h.natsConfPath = h.path("nats.conf")
	if err := os.WriteFile(h.natsConfPath, []byte("# "+src+" for one chaos run\n"+conf), 0o600); err != nil {
		return fmt.Errorf("chaos: nats config: %w", err)
	}
	h.natsPasswords = map[string]string{}
	for _, u := range natsUsers {
		h.natsPasswords[u] = randomHex(16)
	}
	h.logf("nats: users and permissions from %s", src)
	return nil
}

// natsServerEnv is the environment of a NATS node: every user's password.
func (h *harness) natsServerEnv() []string {
	var env []string
	for _, u := range natsUsers {
		env = append(env, "INTAKE_NATS_"+strings.ToUpper(u)+"_PASSWORD="+h.natsPasswords[u])
	}
	return env
}

// roleEnv is the environment of an Intake process dialing as user; the
// run's config reads it through ${INTAKE_NATS_USER} / ${INTAKE_NATS_PASSWORD}.
func (h *harness) roleEnv(user string) []string {
	return []string{"INTAKE_NATS_USER=" + user, "INTAKE_NATS_PASSWORD=" + h.natsPasswords[user]}
}

// harnessNATS is the harness's own identity.
func (h *harness) harnessNATS() config.NATS {
	return config.NATS{URL: h.natsURL(), User: harnessUser, Password: h.natsPasswords[harnessUser]}
}

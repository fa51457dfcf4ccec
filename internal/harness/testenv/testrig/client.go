package testrig

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/replayer/apiclient"
)

// clientTimeout bounds one API call of a test: a hung replayer fails the
// test instead of holding it until the binary's timeout.
const clientTimeout = time.Minute

// Client is a client of the app's operator API with token: the CLI's own
// (apiclient), so tests read the answers as operators' programs do.
func (a *App) Client(token string) *apiclient.Client {
	return apiclient.New(a.URL, token, &http.Client{Timeout: clientTimeout})
}

// WaitReplay polls the replay (or redelivery) id through c until it is no
// longer running and returns it; it fails the test after timeout.
func WaitReplay(t testing.TB, c *apiclient.Client, id string, timeout time.Duration) apiclient.Replay {
	t.Helper()
	var (
		rep apiclient.Replay
		err error
	)
	testenv.Eventually(t, timeout, func() bool {
		rep, err = c.Replay(context.Background(), id)
		return err == nil && rep.State != apiclient.ReplayRunning
	}, "replay %s never finished", id)
	return rep
}

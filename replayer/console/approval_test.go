package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/replayer/apiclient"
)

// A re-execution above api.replays.reexecute_approval_above waits; its
// page offers Approve to another operator only, and the requester's own
// POST is refused.
func TestApproveALargeReexecution(t *testing.T) {
	r := setupConfig(t, strings.Replace(testConfig, "  tokens:\n", "  replays: {reexecute_approval_above: 1}\n  tokens:\n", 1))
	keys := []string{}
	for _, id := range []string{"evt_x", "evt_y"} {
		r.publish(id, `{"id":"`+id+`"}`)
		keys = append(keys, key(id).String())
	}
	r.settled()
	dry := false
	rep, err := apiclient.New(r.base, operatorToken, nil).StartReplay(context.Background(), apiclient.ReplayRequest{
		Selector: apiclient.Selector{Keys: keys}, Mode: inbox.ReplayReexecute, Reason: "the CRM lost both", DryRun: &dry})
	if err != nil || rep.State != apiclient.ReplayAwaitingApproval {
		t.Fatalf("re-execution of 2 above a ceiling of 1 = %+v, %v; want awaiting_approval", rep, err)
	}
	page := "/ui/replays/" + rep.ID

	ops := r.client() // the requester
	csrf := ops.signIn(operatorToken)
	resp, body := ops.do(http.MethodGet, page, nil, nil)
	must(t, "the requester's view", resp, body, http.StatusOK)
	if !strings.Contains(body, `id="awaiting"`) || strings.Contains(body, `id="approve"`) {
		t.Fatalf("the requester's page: want the awaiting note and no Approve button:\n%s", body)
	}
	resp, body = ops.do(http.MethodPost, page+"/approve", url.Values{"csrf": {csrf}}, nil)
	must(t, "approval by the requester", resp, body, http.StatusForbidden)

	other := r.client()
	ocsrf := other.signIn(deployToken)
	resp, body = other.do(http.MethodGet, page, nil, nil)
	must(t, "another operator's view", resp, body, http.StatusOK)
	if !strings.Contains(body, `id="approve"`) {
		t.Fatalf("another operator's page has no Approve button:\n%s", body)
	}
	resp, body = other.do(http.MethodPost, page+"/approve", url.Values{"csrf": {ocsrf}}, nil)
	must(t, "approval by another operator", resp, body, http.StatusSeeOther)
	_, body = other.do(http.MethodGet, page, nil, nil)
	if !strings.Contains(body, `id="approved-by">deploy`) {
		t.Fatalf("replay page does not name the approver:\n%s", body)
	}
}

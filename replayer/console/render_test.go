package console

import (
	"bytes"
	"testing"
)

// TestPagesRender executes every page's template with its zero data, as a
// signed-in operator and as nobody: a field a template names but the data
// lacks fails here, not in an operator's browser.
func TestPagesRender(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{
		"error": nil, "signin": signInData{}, "events": eventsData{}, "event": eventData{},
		"conflicts": conflictsData{}, "conflict": conflictData{}, "failed": failedData{}, "dryrun": dryRunData{},
		"replays": replaysData{}, "replay": replayData{}, "reconcile": reconcileData{Ran: true}, "overview": overviewData{},
	}
	for name, tp := range pages {
		d, ok := data[name]
		if !ok {
			t.Errorf("page %s has no test data", name)
			continue
		}
		for _, p := range []page{{Data: d}, {Data: d, CSRF: "x", Operator: true}} {
			var b bytes.Buffer
			if err := tp.ExecuteTemplate(&b, "layout", p); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

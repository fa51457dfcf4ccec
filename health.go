package intake

import (
	"slices"
	"sync"
)

// health is what the roles last reported, for /readyz: a role with an error
// is not doing its work (it may be retrying, or have failed for good).
type health struct {
	mu   sync.Mutex
	down map[string]error // by role; absent when fine
}

func (h *health) set(role string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		delete(h.down, role)
		return
	}
	if h.down == nil {
		h.down = map[string]error{}
	}
	h.down[role] = err
}

// reporter is a role's report function (processor.WithHealth).
func (h *health) reporter(role string) func(error) {
	return func(err error) { h.set(role, err) }
}

// problems lists the reported errors, sorted by role.
func (h *health) problems() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for role, err := range h.down {
		out = append(out, role+": "+err.Error())
	}
	slices.Sort(out)
	return out
}

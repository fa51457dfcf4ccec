package config

import (
	"errors"
	"fmt"
)

// problems collects validation errors, each prefixed with the YAML field it
// is about ("processor.ack_wait: must be at least 1s").
type problems []error

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

// also appends a section's own Validate result (nil is skipped).
func (p *problems) also(err error) {
	if err != nil {
		*p = append(*p, err)
	}
}

func (p problems) err() error { return errors.Join(p...) }

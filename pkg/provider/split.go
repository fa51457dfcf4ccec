package provider

// Batch split (split: {field, id, type}): one delivery carries many events
// (SendGrid's and Auth0's top-level arrays, Okta's data.events, Xero's
// events, HubSpot's array, QuickBooks' eventNotifications). The signature
// covers the whole delivery, so the family verifies it as usual; then each
// item of the array at split.field becomes an event of its own, its id
// (split.id) and type (split.type) read inside the item, its body the
// item's exact bytes. Ingress publishes one message per item and answers 2xx
// only when every one is PubAcked.
//
// One bad item refuses the whole delivery (400 bad_batch): an item that is
// not an object, without a usable id or with an unusable type, a split.field
// that is absent or no array, or more than split.max_items items. Nothing
// of it is published, and the provider's retry (or its fix) brings the batch
// again as a whole; quarantining one item would accept a delivery the
// operator cannot fully read. An empty array is a verified delivery of no
// events (Xero's intent-to-receive): answered 200, nothing published.
//
// Only the configurable families (hmac, pairs, pubkey, token, basic and
// their presets) split: the others name one event per delivery. With
// split, event_id, object_id and object_version are not configured (each
// item names its own id); event_type may be, as the delivery's type for
// items without split.type.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// SplitConfig configures a batch split.
type SplitConfig struct {
	// Field is the path of the array of items in the body, e.g.
	// "data.events"; "" when the body itself is the array.
	Field string `yaml:"field,omitempty"`
	// ID is the path of each item's event id inside the item. Required:
	// setting it turns the split on.
	ID string `yaml:"id,omitempty"`
	// Type is the path of each item's event type inside the item. Defaults
	// to the delivery's event_type (or none).
	Type string `yaml:"type,omitempty"`
	// IDWithType names each item by its id and its type together,
	// "id:type" (Adyen: pspReference and eventCode). Needs Type; an id
	// containing ':' is then refused. Defaults to false.
	IDWithType bool `yaml:"id_with_type,omitempty"`
	// MaxItems bounds the items of one delivery (400 bad_batch above it).
	// Defaults to DefaultMaxSplitItems, at most MaxSplitItems.
	MaxItems int `yaml:"max_items,omitempty"`
}

// DefaultMaxSplitItems is split.max_items's default: above the largest
// batch a surveyed provider sends (HubSpot's and Auth0's 100, SendGrid's
// few hundred), below a number of publishes that outlasts a sender's
// timeout.
const DefaultMaxSplitItems = 1000

// MaxSplitItems is the largest split.max_items accepted.
const MaxSplitItems = 10000

// IsZero reports whether no split is configured.
func (c SplitConfig) IsZero() bool { return c == (SplitConfig{}) }

// splitFamilies are the families whose integrations may split.
var splitFamilies = []string{"hmac", "pairs", "pubkey", "token", "basic", "adyen"}

// Item is one event of a split delivery.
type Item struct {
	ID, Type string
	// Body is the item's bytes as sent: a slice of the delivery's body.
	Body []byte
}

// Splitter cuts a verified delivery into its items.
type Splitter struct {
	field, id, typ string
	withType       bool
	max            int
}

// NewSplitter returns cfg's splitter, or nil when cfg splits nothing. The
// errors name the field, as New's do (New validates the same way).
func NewSplitter(cfg Config) (*Splitter, error) {
	r, err := resolvePreset(cfg)
	if err != nil {
		return nil, err
	}
	c := r.Split
	if c.IsZero() {
		return nil, nil
	}
	if !slices.Contains(splitFamilies, r.Provider) {
		return nil, fmt.Errorf("split: only for providers %v and their presets, not %s", splitFamilies, cfg.Provider)
	}
	if c.ID == "" {
		return nil, fmt.Errorf("split.id: required (the path of each item's event id)")
	}
	if c.IDWithType && c.Type == "" {
		return nil, fmt.Errorf("split.id_with_type: needs split.type")
	}
	s := &Splitter{field: c.Field, id: c.ID, typ: c.Type, withType: c.IDWithType, max: c.MaxItems}
	for _, p := range []struct{ name, path string }{{"field", c.Field}, {"id", c.ID}, {"type", c.Type}} {
		if p.path == "" {
			continue
		}
		if err := validatePath(p.path); err != nil {
			return nil, fmt.Errorf("split.%s: %w", p.name, err)
		}
	}
	switch {
	case s.max == 0:
		s.max = DefaultMaxSplitItems
	case s.max < 0 || s.max > MaxSplitItems:
		return nil, fmt.Errorf("split.max_items: must be 1..%d, got %d", MaxSplitItems, s.max)
	}
	return s, nil
}

// checkSplitIdentity refuses identity fields that a split leaves to the
// items: an event id (or object) of the whole delivery would be one key
// for many events.
func checkSplitIdentity(cfg Config) error {
	if cfg.Split.IsZero() {
		return nil
	}
	for _, f := range []struct {
		name string
		f    Field
	}{{"event_id", cfg.EventID}, {"object_id", cfg.ObjectID}, {"object_version", cfg.ObjectVersion}} {
		if !f.f.IsZero() {
			return fmt.Errorf("%s: not with split (each item's id is split.id)", f.name)
		}
	}
	return nil
}

// Split returns the items of a verified delivery, appended to dst;
// delivery is what the verifier read of the whole (its type is each item's
// unless split.type names one). Any bad item fails the whole delivery with
// an error wrapping ErrMalformed.
func (s *Splitter) Split(body []byte, delivery Identity, dst []Item) ([]Item, error) {
	if !gjson.ValidBytes(body) {
		return nil, errNotJSON
	}
	arr := gjson.Parse(view(body)) // the items' ids and types are copied (lookup), their bodies are body's
	if s.field != "" {
		var err error
		if arr, err = walk(body, s.field); err != nil {
			return nil, err
		}
	}
	if !arr.IsArray() {
		return nil, fmt.Errorf("%w: split.field %q is not an array", ErrMalformed, s.field)
	}
	var err error
	n := 0
	arr.ForEach(func(_, item gjson.Result) bool {
		if n++; n > s.max {
			err = fmt.Errorf("%w: more than split.max_items (%d) items", ErrMalformed, s.max)
			return false
		}
		if !item.IsObject() {
			err = fmt.Errorf("%w: item %d is not an object", ErrMalformed, n-1)
			return false
		}
		raw := itemBytes(body, item)
		it := Item{Type: delivery.Type, Body: raw}
		if it.ID, err = lookup(raw, s.id); err != nil {
			return false
		}
		if it.ID == "" {
			err = fmt.Errorf("%w: item %d has no id at %s", ErrMalformed, n-1, s.id)
			return false
		}
		if s.typ != "" {
			if it.Type, err = lookup(raw, s.typ); err != nil {
				return false
			}
		}
		if err = checkType(it.Type); err != nil {
			return false
		}
		if s.withType {
			if strings.IndexByte(it.ID, ':') >= 0 || it.Type == "" {
				err = fmt.Errorf("%w: item %d: with split.id_with_type the id must have no ':' and the type must be set", ErrMalformed, n-1)
				return false
			}
			it.ID += ":" + it.Type
		}
		dst = append(dst, it)
		return true
	})
	if err != nil {
		return nil, err
	}
	return dst, nil
}

// itemBytes returns item's bytes as a slice of body when gjson located it
// there (it does for a body it parsed), else a copy.
func itemBytes(body []byte, item gjson.Result) []byte {
	if i := item.Index; i > 0 && i+len(item.Raw) <= len(body) && string(body[i:i+len(item.Raw)]) == item.Raw {
		return body[i : i+len(item.Raw) : i+len(item.Raw)]
	}
	return []byte(item.Raw)
}

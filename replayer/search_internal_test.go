package replayer

import "testing"

func TestMatchPath(t *testing.T) {
	body := []byte(`{"data":{"object":{"customer":"cus_1","amount":4200,"live":true,"note":null,"items":[{"sku":"a"},{"sku":"b"}]}}}`)
	for _, c := range []struct {
		path, value string
		want        bool
	}{
		{"data.object.customer", "cus_1", true},
		{"data.object.customer", "cus_2", false},
		{"data.object.amount", "4200", true},
		{"data.object.live", "true", true},
		{"data.object.note", "null", true},
		{"data.object.items.1.sku", "b", true},
		{"data.object.items.2.sku", "b", false},
		{"data.object", "x", false}, // an object is not a value
		{"data.object.customer.x", "cus_1", false},
	} {
		path, err := parsePath(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := matchPath(body, path, c.value); got != c.want {
			t.Errorf("%s = %q: %v, want %v", c.path, c.value, got, c.want)
		}
	}
	if matchPath([]byte(`not json`), []string{"a"}, "x") {
		t.Error("a body that is not JSON matched")
	}
}

// FuzzMatchPath: no payload or path panics.
func FuzzMatchPath(f *testing.F) {
	f.Add([]byte(`{"a":[{"b":1}]}`), "a.0.b", "1")
	f.Add([]byte(`[[[[`), "0.0", "")
	f.Fuzz(func(t *testing.T, body []byte, p, v string) {
		if path, err := parsePath(p); err == nil {
			matchPath(body, path, v)
		}
	})
}

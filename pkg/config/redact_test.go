package config

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://svc:s3cret@nats:4222", "nats://svc:xxxxx@nats:4222"},
		{"nats://s3cret-token@nats:4222", "nats://xxxxx@nats:4222"},
		{"postgres://intake@db/intake", "postgres://intake@db/intake"},
		{"postgres://u@db/intake?sslpassword=s3cret", "postgres://u@db/intake?sslpassword=xxxxx"},
		{"nats://a:s3cret@h1:4222,nats://b:s3cret@h2:4222", "nats://a:xxxxx@h1:4222,nats://b:xxxxx@h2:4222"},
		{"postgres://intake:s3cret@db:5432/intake?sslmode=disable", "postgres://intake:xxxxx@db:5432/intake?sslmode=disable"},
		{"postgres://db/intake?user=intake&password=s3cret", "postgres://db/intake?password=xxxxx&user=intake"},
		{"host=db user=intake password=s3cret dbname=intake", "host=db user=intake password=xxxxx dbname=intake"},
		{"host=db password = 's3 cret' dbname=intake", "host=db password = xxxxx dbname=intake"},
		{"postgres://u:s3cret@[bad", "postgres://xxxxx@[bad"},
	} {
		got := Redact(c.in)
		if got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "s3cret") || strings.Contains(got, "s3 cret") {
			t.Errorf("Redact(%q) = %q keeps the password", c.in, got)
		}
	}
}

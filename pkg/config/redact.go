package config

import (
	"net/url"
	"regexp"
	"strings"
)

// dsnPassword is a password in a Postgres keyword/value connection string.
var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// Redact returns a NATS or Postgres URL fit for errors and logs: the
// password of every URL in a comma-separated list (NATS takes several
// servers) and a keyword/value DSN's password= are replaced by "xxxxx".
// Anything it cannot parse is returned with its user information cut.
func Redact(s string) string {
	if !strings.Contains(s, "://") {
		return dsnPassword.ReplaceAllString(s, "${1}xxxxx")
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = redactURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

var natsSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		// Unparsable: drop everything between the scheme and the last '@'.
		if at := strings.LastIndex(s, "@"); at >= 0 {
			if sch := strings.Index(s, "://"); sch >= 0 && sch < at {
				return s[:sch+3] + "xxxxx" + s[at:]
			}
			return "xxxxx" + s[at:]
		}
		return s
	}
	if u.User != nil {
		switch _, has := u.User.Password(); {
		case has:
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		case natsSchemes[strings.ToLower(u.Scheme)]:
			u.User = url.User("xxxxx") // NATS takes a lone user part as a token
		}
	}
	q := u.Query()
	changed := false
	for _, k := range []string{"password", "sslpassword"} {
		if q.Has(k) {
			q.Set(k, "xxxxx")
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

package provider

// The request's method and URL (template placeholders {method} and {url}):
// Square signs "{notification URL}{body}", HubSpot's v3 signature
// "{method}{URI}{body}{timestamp}". Behind proxies and load balancers the
// Host header and the request line say where the request arrived, not what
// the sender signed, and a Host header is the sender's to choose: so {url}
// is public_url, the URL exactly as registered with the sender, set by the
// operator, and {method} is POST, the only method a delivery arrives by.
// Both are fixed text once configured: the template's injectivity rule
// (checkAdjacency) sees them as literals.

import (
	"fmt"
	"net/url"
	"strings"
)

// maxPublicURL bounds public_url.
const maxPublicURL = 2048

// checkPublicURL validates public_url: an absolute http(s) URL of printable
// ASCII without user info, fragment or braces.
func checkPublicURL(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > maxPublicURL {
		return fmt.Errorf("public_url: longer than %d bytes", maxPublicURL)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '{' || c == '}' {
			return fmt.Errorf("public_url: must be printable ASCII without spaces or braces (percent-encode, or write it as the sender signs it)")
		}
	}
	if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
		// url.Parse takes "HTTPS://" too, and lowercases it: {url} is the
		// text the sender signs, so write it as the sender does.
		return fmt.Errorf("public_url: must start with https:// or http://, in lowercase")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" || strings.Contains(s, "#") {
		return fmt.Errorf("public_url: must be an absolute http(s) URL without user info or fragment, as registered with the sender")
	}
	return nil
}

// expandRequestPlaceholders writes {url} and {method} into template t as
// the literal text they stand for; field names the option for messages.
func expandRequestPlaceholders(field, t, publicURL string) (string, error) {
	usesURL := strings.Contains(t, "{url}")
	if usesURL && publicURL == "" {
		return "", fmt.Errorf("%s: {url} needs public_url (the URL exactly as registered with the sender; the Host header is never read)", field)
	}
	if !usesURL && publicURL != "" {
		return "", fmt.Errorf("public_url: set but %s does not sign {url}", field)
	}
	t = strings.ReplaceAll(t, "{url}", publicURL)
	return strings.ReplaceAll(t, "{method}", "POST"), nil
}

package provider

import "time"

// RetryWindow is how long after an event's first delivery its provider
// retries it, as the provider documents it, and where that figure comes
// from. The inbox must remember a key at least this long: a copy that
// arrives after its key was purged is a new event. GitHub retries nothing by
// itself, so its window is the manual redelivery it offers. A provider that
// documents no window (standard, hmac: the sender decides) returns 0; the
// stream's max_age is then the only floor. A resend an operator starts by
// hand long after (Stripe's dashboard, Svix's portal) is not a retry: past
// retention it is processed as the new delivery it was asked to be.
func RetryWindow(provider string) (time.Duration, string) {
	switch provider {
	case "stripe":
		return 3 * 24 * time.Hour, "Stripe retries for up to 3 days"
	case "github":
		return 3 * 24 * time.Hour, "GitHub retries nothing by itself and redelivers by hand for 3 days"
	case "shopify":
		// Today 8 retries over 4 hours; for years 19 over 48 hours. The
		// longer is the floor, so a change back costs nothing.
		return 48 * time.Hour, "Shopify retries for up to 48 hours"
	case "svix":
		// Now, 5s, 5m, 30m, 2h, 5h, 10h, 10h: 27h35m after the first.
		return 28 * time.Hour, "Svix retries for about 28 hours"
	case "slack":
		// At once, after a minute, after five minutes.
		return time.Hour, "Slack retries three times within minutes"
	}
	return 0, ""
}

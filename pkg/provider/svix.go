package provider

// Svix (https://www.svix.com) is the Standard Webhooks scheme under its own
// header names: svix-id, svix-timestamp, svix-signature. Like svix's own
// library, when any of the three is missing the webhook-* set is read
// instead, so a Svix account that switched to the standard names keeps
// verifying. The event id is svix-id (or webhook-id); secrets are whsec_.

func newSvix(cfg Config) (Verifier, error) {
	return newStandardScheme(cfg, []headerNames{
		canonicalHeaders("svix-id", "svix-timestamp", "svix-signature"),
		canonicalHeaders("webhook-id", "webhook-timestamp", "webhook-signature"),
	})
}

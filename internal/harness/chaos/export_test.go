package chaos

// RedriveKeysKnown is redriveKeysKnown, for the failover test's gate.
func RedriveKeysKnown() bool { return redriveKeysKnown() }

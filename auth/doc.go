// Package auth owns credentials: the format of API keys and join tokens
// (prefix + random + checksum, so a leaked key is recognisable and a typo is
// caught before any lookup), how they are hashed for storage, and the rules
// for scopes, team roles and expiry; temporary and instance tokens; the
// sealing of secrets at rest; and the rate limits and lockouts that guard
// authentication. It stores nothing itself.
package auth

// Package tlsca gives a self-hosted control plane HTTPS without an outside
// authority (DESIGN §7, `suanli server --tls auto`): it creates a private CA
// and a server certificate signed by it (kept in the server's home, keys
// 0600), and the client side of trusting only that CA: a tls.Config that
// pins the CA certificate, and fetching the CA over the wire by its SHA-256
// fingerprint for an agent's first contact (the fingerprint travels with
// the join token).
//
// It stores nothing but the files it is pointed at and knows nothing of
// HTTP routes or accounts.
package tlsca

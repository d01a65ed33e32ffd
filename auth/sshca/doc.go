// Package sshca is Suanli's SSH certificate authority (DESIGN §7): the CA key
// (generated once, kept in a 0600 file in the server's home), signing of
// short-lived user certificates bound to one instance, and the rules both
// sides share for what such a certificate means: its critical options
// (source-address, the instance binding), their strict parsing, and the
// verification the agent's SSH endpoint runs before it lets anyone in.
//
// A certificate it signs has exactly one principal, the instance id (which
// is also the SSH login name), a key id naming instance, account and key,
// the critical options OptionInstance and OptionSourceAddress, and the
// permit-pty extension. Verify accepts nothing else: a plain key, another
// authority, a host certificate, several or no principals, an unknown or
// missing critical option, a malformed source-address, a peer outside it,
// or a time outside the validity window is refused with a reason.
//
// It knows nothing of accounts, stores or HTTP; callers pass plain values.
package sshca

package sshca_test

import (
	"net/netip"
	"testing"

	"github.com/suanli/suanli/auth/sshca"
)

// FuzzParseSourceAddress: parsing never panics, and what it accepts is
// canonical: formatting and parsing again gives the same networks, and each
// network contains its own address.
func FuzzParseSourceAddress(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "10.0.0.0/8,192.168.1.0/24", "::1,2001:db8::/32", "10.0.0.1/8", "", ",", "1.2.3.4/0", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := sshca.ParseSourceAddress(s)
		if err != nil {
			return
		}
		if len(ps) == 0 || len(ps) > sshca.MaxSources {
			t.Fatalf("ParseSourceAddress(%q) accepted %d networks", s, len(ps))
		}
		text := sshca.FormatSourceAddress(ps)
		again, err := sshca.ParseSourceAddress(text)
		if err != nil || sshca.FormatSourceAddress(again) != text {
			t.Fatalf("round trip of %q: %q → %v, %v", s, text, again, err)
		}
		for _, p := range ps {
			if !sshca.Allowed(ps, p.Addr()) {
				t.Fatalf("%v does not contain its own address", p)
			}
		}
	})
}

// FuzzCheckOptions: for any critical options, a login is allowed only when
// the options are exactly the two known ones, the instance option is the
// login name, and the peer is inside source-address.
func FuzzCheckOptions(f *testing.F) {
	f.Add("instance@suanli", "42", "source-address", "127.0.0.1/32", "42", "127.0.0.1")
	f.Add("instance@suanli", "42", "source-address", "127.0.0.2/32", "42", "127.0.0.1")
	f.Add("instance@suanli", "042", "source-address", "0.0.0.0/0", "042", "10.0.0.1")
	f.Add("force-command", "true", "source-address", "0.0.0.0/0", "1", "10.0.0.1")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, user, peer string) {
		opts := map[string]string{k1: v1, k2: v2}
		addr, _ := netip.ParseAddr(peer)
		b, err := sshca.CheckOptions(opts, user, addr)
		if err != nil {
			return
		}
		if len(opts) != 2 || opts[sshca.OptionInstance] != user {
			t.Fatalf("CheckOptions(%q, %q) allowed a login", opts, user)
		}
		if id, err := sshca.ParseInstance(user); err != nil || id != b.InstanceID {
			t.Fatalf("binding %d for login %q", b.InstanceID, user)
		}
		ps, err := sshca.ParseSourceAddress(opts[sshca.OptionSourceAddress])
		if err != nil || !sshca.Allowed(ps, addr) {
			t.Fatalf("peer %v allowed outside %q", addr, opts[sshca.OptionSourceAddress])
		}
	})
}

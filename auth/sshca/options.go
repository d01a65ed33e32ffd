package sshca

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// MaxSources is the most networks one source-address option may list.
const MaxSources = 64

// ParseSourceAddress parses a source-address value strictly: a
// comma-separated list of IP addresses and CIDRs, without spaces, empty
// entries, zones, IPv4-mapped IPv6 forms or host bits set past the prefix.
// A bare address is a /32 (IPv4) or /128 (IPv6) network. The result is
// canonical (deduplicated, sorted), so Parse(Format(p)) == p.
func ParseSourceAddress(v string) ([]netip.Prefix, error) {
	if v == "" {
		return nil, fmt.Errorf("source-address is empty")
	}
	parts := strings.Split(v, ",")
	if len(parts) > MaxSources {
		return nil, fmt.Errorf("source-address lists %d networks, more than %d", len(parts), MaxSources)
	}
	out := make([]netip.Prefix, 0, len(parts))
	for _, p := range parts {
		pfx, err := ParseNetwork(p)
		if err != nil {
			return nil, fmt.Errorf("source-address: %w", err)
		}
		out = append(out, pfx)
	}
	return canonical(out), nil
}

// ParseNetwork parses one address or CIDR the way ParseSourceAddress does
// for each entry.
func ParseNetwork(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, fmt.Errorf("empty network")
	}
	if strings.ContainsAny(s, " \t%") {
		return netip.Prefix{}, fmt.Errorf("%q: no spaces or zones", s)
	}
	var pfx netip.Prefix
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR: %v", s, err)
		}
		if p != p.Masked() {
			return netip.Prefix{}, fmt.Errorf("%q has host bits set: did you mean %s?", s, p.Masked())
		}
		pfx = p
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR", s)
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	if pfx.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q: write IPv4 networks in IPv4 form", s)
	}
	return pfx, nil
}

func canonical(ps []netip.Prefix) []netip.Prefix {
	sort.Slice(ps, func(i, j int) bool {
		if c := ps[i].Addr().Compare(ps[j].Addr()); c != 0 {
			return c < 0
		}
		return ps[i].Bits() < ps[j].Bits()
	})
	out := ps[:0]
	for i, p := range ps {
		if i == 0 || p != ps[i-1] {
			out = append(out, p)
		}
	}
	return out
}

// FormatSourceAddress writes networks as a source-address value, in
// canonical order. Host networks keep their /32 or /128.
func FormatSourceAddress(ps []netip.Prefix) string {
	cp := canonical(append([]netip.Prefix(nil), ps...))
	s := make([]string, len(cp))
	for i, p := range cp {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Allowed reports whether addr is inside one of the networks. An
// IPv4-mapped IPv6 peer counts as its IPv4 address.
func Allowed(ps []netip.Prefix, addr netip.Addr) bool {
	addr = addr.Unmap().WithZone("")
	for _, p := range ps {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// ParseInstance parses the OptionInstance value: a positive decimal id
// without sign or leading zeros.
func ParseInstance(v string) (int64, error) {
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != v {
		return 0, fmt.Errorf("%s %q is not an instance id", OptionInstance, v)
	}
	return id, nil
}

// Binding is what a certificate's critical options say.
type Binding struct {
	InstanceID int64
	Sources    []netip.Prefix
}

// CheckOptions enforces a certificate's critical options: each must be
// known (OptionInstance, OptionSourceAddress), both must be present and well
// formed, the instance must be the one the login asks for (user, the login
// name), and peer must lie inside source-address.
func CheckOptions(opts map[string]string, user string, peer netip.Addr) (Binding, error) {
	var b Binding
	for name := range opts {
		if name != OptionInstance && name != OptionSourceAddress {
			return b, fmt.Errorf("unknown critical option %q: refused", name)
		}
	}
	v, ok := opts[OptionInstance]
	if !ok {
		return b, fmt.Errorf("certificate is not bound to an instance (no %s option)", OptionInstance)
	}
	id, err := ParseInstance(v)
	if err != nil {
		return b, err
	}
	if user != v {
		return b, fmt.Errorf("certificate is for instance %d, not %q: get one for this instance with `suanli ssh %s`", id, user, user)
	}
	b.InstanceID = id
	src, ok := opts[OptionSourceAddress]
	if !ok {
		return b, fmt.Errorf("certificate has no source-address option")
	}
	if b.Sources, err = ParseSourceAddress(src); err != nil {
		return b, err
	}
	if !peer.IsValid() || !Allowed(b.Sources, peer) {
		return b, fmt.Errorf("address %s is outside the certificate's source-address %s: add it with `suanli allowlist add`", peer, src)
	}
	return b, nil
}

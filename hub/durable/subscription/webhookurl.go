package subscription

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// devHost is a host a development webhook may reach over http: localhost
// and 127.0.0.x.
var devHost = regexp.MustCompile(`^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$`)

func isDevHost(h string) bool { return h == "localhost" || devHost.MatchString(h) }

// localAddr reports whether a is a local network target: loopback,
// RFC 1918 and unique local, link-local, unspecified, multicast, carrier
// NAT and the other special-purpose ranges.
func localAddr(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast() {
		return true
	}
	for _, p := range reserved {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
}

// maxURLLen bounds a webhook URL.
const maxURLLen = 2048

// ValidateURL checks a webhook URL as the protocol asks against SSRF:
// https, or http to localhost or 127.0.0.x only (development); no local
// network target named by its address. The message says what is wrong.
func ValidateURL(raw string) error {
	if len(raw) > maxURLLen {
		return errors.New("webhook.url must be at most 2048 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return errors.New("webhook.url must be a valid URL")
	}
	if u.User != nil {
		return errors.New("webhook.url must not carry credentials")
	}
	host := strings.ToLower(u.Hostname())
	switch u.Scheme {
	case "http":
		if isDevHost(host) {
			return nil
		}
		return errors.New("http webhook URLs are only allowed for localhost or 127.0.0.x")
	case "https":
	default:
		return errors.New("webhook.url must use https")
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return errors.New("localhost webhook URLs must use http for dev")
	}
	if a, err := netip.ParseAddr(host); err == nil && localAddr(a) {
		return errors.New("webhook.url must not target private or link-local hosts")
	}
	return nil
}

type devKey struct{}

// client is the webhook HTTP client: it never follows a redirect and its
// dialer refuses every local network address (a name resolving to one
// included), except loopback for a development URL (localhost, 127.0.0.x).
func newClient(timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dev, _ := ctx.Value(devKey{}).(bool)
		d := &net.Dialer{Timeout: timeout, Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			if a := ap.Addr().Unmap(); localAddr(a) && !(dev && a.IsLoopback()) {
				return errors.New("subscription: webhook target " + a.String() + " is a local network address")
			}
			return nil
		}}
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

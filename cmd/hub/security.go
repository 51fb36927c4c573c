package main

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/auth"
)

// apply fills the security settings of a hub.Config: the JWT verifier (nil
// without a key: the hub runs open as subject "local"), the allowed
// origins and the limits.
func (s Security) apply(cfg *hub.Config) error {
	a, err := s.authenticator()
	if err != nil {
		return err
	}
	if a != nil {
		cfg.Authenticator = a
	}
	cfg.OriginPatterns = s.origins()
	cfg.MessagesPerSecond = s.WSRate
	cfg.MessageBurst = s.WSBurst
	cfg.MaxSocketsPerSubject = s.MaxSockets
	cfg.MaxRunsPerSubject = s.MaxRunsPerSub
	if s.HelloTimeout != 0 {
		cfg.HelloTimeout = s.HelloTimeout
	}
	if s.FrameTimeout != 0 {
		cfg.FrameTimeout = s.FrameTimeout
	}
	return nil
}

// authenticator builds the verifier of RUNHUB_JWT_SECRET or
// RUNHUB_JWT_PUBLIC_KEY; nil when neither is set.
func (s Security) authenticator() (hub.Authenticator, error) {
	ac := auth.Config{Issuer: s.JWTIssuer, Audience: s.JWTAudience, Leeway: s.JWTLeeway}
	if ac.Leeway == 0 {
		ac.Leeway = -1 // an explicit 0s means no skew
	}
	switch {
	case s.JWTSecret != "":
		ac.Secret = []byte(s.JWTSecret)
	case s.JWTPublicKey != "":
		key, err := auth.LoadPublicKey(s.JWTPublicKey)
		if err != nil {
			return nil, err
		}
		ac.PublicKey = key
	default:
		if s.JWTIssuer != "" || s.JWTAudience != "" {
			return nil, errors.New("RUNHUB_JWT_ISSUER/AUDIENCE need RUNHUB_JWT_SECRET or RUNHUB_JWT_PUBLIC_KEY")
		}
		return nil, nil
	}
	v, err := auth.New(ac)
	if err != nil {
		return nil, err
	}
	return v, nil
}

func (s Security) origins() []string {
	var out []string
	for _, p := range strings.Split(s.AllowedOrigins, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// checkListen refuses a hub without authentication on an address other
// machines can reach, unless insecure says so explicitly.
func checkListen(addr net.Addr, open, insecure bool) error {
	if !open || insecure {
		return nil
	}
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to serve %s without authentication: set RUNHUB_JWT_SECRET or RUNHUB_JWT_PUBLIC_KEY, "+
		"listen on a loopback address (127.0.0.1), or pass -insecure-listen (RUNHUB_INSECURE_LISTEN=1) to run open on purpose", addr)
}

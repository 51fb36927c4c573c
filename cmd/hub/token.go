package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/runhub/runhub/hub/auth"
)

// TokenConfig is the configuration of `hub token`, which mints an HS256
// token with RUNHUB_JWT_SECRET (for development, the workbench's ?token=,
// and scripts; production tokens come from the identity provider).
type TokenConfig struct {
	Subject  string        // -sub: the token's subject (required)
	TTL      time.Duration // -ttl: lifetime (default 24h)
	Role     string        // -role: "admin" for an admin, else empty
	Issuer   string        // -iss, RUNHUB_JWT_ISSUER
	Audience string        // -aud, RUNHUB_JWT_AUDIENCE
	secret   string        // RUNHUB_JWT_SECRET
}

// tokenFlags defines the flags of `hub token` on cfg.
func tokenFlags(cfg *TokenConfig, getenv func(string) string) *flagSet {
	f := newFlagSet("token", getenv)
	f.StringVar(&cfg.Subject, "sub", "", "the token's subject, sub (required)")
	f.DurationVar(&cfg.TTL, "ttl", 24*time.Hour, "lifetime")
	f.defOf["ttl"] = "24h"
	f.StringVar(&cfg.Role, "role", "", `role: "admin" for an admin, else empty`)
	f.str(&cfg.Issuer, "iss", "RUNHUB_JWT_ISSUER", "", "issuer, iss")
	f.str(&cfg.Audience, "aud", "RUNHUB_JWT_AUDIENCE", "", "audience, aud")
	f.envOnly = append(f.envOnly, envSetting{"RUNHUB_JWT_SECRET", "HS256 shared secret the token is signed with, at least 32 bytes (required)"})
	return f
}

func parseTokenConfig(args []string, getenv func(string) string) (TokenConfig, error) {
	var cfg TokenConfig
	f := tokenFlags(&cfg, getenv)
	if err := parseFlags(f, args); err != nil {
		return cfg, err
	}
	cfg.secret = getenv("RUNHUB_JWT_SECRET")
	switch {
	case cfg.secret == "":
		return cfg, errors.New("hub token signs with RUNHUB_JWT_SECRET, which is not set")
	case len(cfg.secret) < auth.MinSecretBytes:
		return cfg, fmt.Errorf("RUNHUB_JWT_SECRET is %d bytes, want at least %d", len(cfg.secret), auth.MinSecretBytes)
	case cfg.Subject == "":
		return cfg, errors.New("hub token needs -sub")
	case cfg.TTL <= 0:
		return cfg, errors.New("hub token needs a positive -ttl")
	case cfg.Role != "" && cfg.Role != auth.RoleAdmin:
		return cfg, fmt.Errorf("role %q: want %q or none", cfg.Role, auth.RoleAdmin)
	}
	return cfg, nil
}

// MintToken writes a token of cfg to w.
func MintToken(w io.Writer, cfg TokenConfig) error {
	now := time.Now()
	c := auth.Claims{Role: cfg.Role, RegisteredClaims: jwt.RegisteredClaims{Subject: cfg.Subject, Issuer: cfg.Issuer,
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(cfg.TTL))}}
	if cfg.Audience != "" {
		c.Audience = jwt.ClaimStrings{cfg.Audience}
	}
	tok, err := auth.Sign([]byte(cfg.secret), c)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, tok)
	return err
}

// Package auth verifies the JWT bearer tokens of hub callers: HS256 with a
// shared secret, or RS256/ES256 with a public key. It implements
// hub.Authenticator.
//
// A token is accepted when its signature verifies with the configured key
// and algorithm (no other algorithm is ever accepted, "none" included), it
// has a `sub` (at most 256 bytes, no control characters) and an `exp` in
// the future, its `nbf` (if any) is past, and its `iss` and `aud` match
// when the Verifier is configured with them; every time check allows Leeway
// of clock skew. The subject is `sub`; the claim `role: "admin"` makes the
// caller an admin (it may read every session; see hub.Principal).
//
// A Verifier is immutable and safe for concurrent use.
package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"
	"unicode"

	"github.com/golang-jwt/jwt/v5"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// DefaultLeeway is the clock skew allowed on exp, nbf and iat.
const DefaultLeeway = 30 * time.Second

// MinSecretBytes is the least HS256 secret length (RFC 7518 §3.2: a key at
// least as long as the hash).
const MinSecretBytes = 32

// MaxSubjectBytes bounds the sub claim.
const MaxSubjectBytes = 256

// RoleAdmin is the role claim value of an admin.
const RoleAdmin = "admin"

// Config configures a Verifier. Exactly one of Secret and PublicKey is set.
type Config struct {
	// Secret is the HS256 shared secret (RUNHUB_JWT_SECRET), at least
	// MinSecretBytes. Danger: anyone who has it can mint any subject.
	Secret []byte
	// PublicKey verifies RS256 (an *rsa.PublicKey of at least 2048 bits)
	// or ES256 (an *ecdsa.PublicKey on P-256) tokens; see LoadPublicKey.
	PublicKey crypto.PublicKey
	// Issuer, when set, must equal the token's iss.
	Issuer string
	// Audience, when set, must be one of the token's aud.
	Audience string
	// Leeway is the clock skew allowed (default DefaultLeeway; negative: none).
	Leeway time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Claims are the claims the hub reads: the registered ones and role.
type Claims struct {
	Role string `json:"role,omitempty"`
	jwt.RegisteredClaims
}

// Verifier checks tokens; see the package doc.
type Verifier struct {
	parser *jwt.Parser
	key    any
	leeway time.Duration
}

// New builds a Verifier.
func New(cfg Config) (*Verifier, error) {
	var alg string
	var key any
	switch k := cfg.PublicKey.(type) {
	case nil:
		if len(cfg.Secret) == 0 {
			return nil, errors.New("auth: a secret or a public key is required")
		}
		if len(cfg.Secret) < MinSecretBytes {
			return nil, fmt.Errorf("auth: the HS256 secret is %d bytes, want at least %d", len(cfg.Secret), MinSecretBytes)
		}
		alg, key = jwt.SigningMethodHS256.Alg(), append([]byte(nil), cfg.Secret...)
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("auth: the RSA key has %d bits, want at least 2048", k.N.BitLen())
		}
		alg, key = jwt.SigningMethodRS256.Alg(), k
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, errors.New("auth: ES256 needs a P-256 key")
		}
		alg, key = jwt.SigningMethodES256.Alg(), k
	default:
		return nil, fmt.Errorf("auth: unsupported public key type %T (want RSA or ECDSA P-256)", cfg.PublicKey)
	}
	if cfg.PublicKey != nil && len(cfg.Secret) > 0 {
		return nil, errors.New("auth: set a secret or a public key, not both")
	}
	leeway := cfg.Leeway
	if leeway == 0 {
		leeway = DefaultLeeway
	}
	leeway = max(leeway, 0)
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{alg}), jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway), jwt.WithIssuedAt()}
	if cfg.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(cfg.Now))
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	return &Verifier{parser: jwt.NewParser(opts...), key: key, leeway: leeway}, nil
}

// Authenticate verifies token and returns its caller. Errors are
// *protocol.Error values with CodeUnauthorized whose message names the
// failed check without echoing the token.
func (v *Verifier) Authenticate(token string) (hub.Principal, error) {
	var c Claims
	_, err := v.parser.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return v.key, nil })
	if err != nil {
		return hub.Principal{}, unauthorized(err)
	}
	if err := checkSubject(c.Subject); err != nil {
		return hub.Principal{}, err
	}
	return hub.Principal{Subject: c.Subject, Admin: c.Role == RoleAdmin, Expires: c.ExpiresAt.Add(v.leeway)}, nil
}

func checkSubject(sub string) error {
	if sub == "" {
		return protocol.Errorf(protocol.CodeUnauthorized, "the token has no subject")
	}
	if len(sub) > MaxSubjectBytes {
		return protocol.Errorf(protocol.CodeUnauthorized, "the token's subject is over %d bytes", MaxSubjectBytes)
	}
	for _, r := range sub {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return protocol.Errorf(protocol.CodeUnauthorized, "the token's subject has invalid characters")
		}
	}
	return nil
}

// unauthorized names the failed check; the library's texts can quote
// claim values, so only fixed messages go out.
func unauthorized(err error) error {
	msg := "invalid token"
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		msg = "malformed token"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		msg = "the token's signature or algorithm is not accepted"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		msg = "the token lacks a required claim (exp, or the configured iss/aud)"
	case errors.Is(err, jwt.ErrTokenExpired):
		msg = "the token has expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		msg = "the token is not valid yet"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		msg = "the token's issuer is not accepted"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		msg = "the token's audience is not accepted"
	}
	return protocol.Errorf(protocol.CodeUnauthorized, "%s", msg)
}

// LoadPublicKey reads a PEM file holding an RSA or ECDSA P-256 public key
// (PKIX "PUBLIC KEY", PKCS #1 "RSA PUBLIC KEY", or a "CERTIFICATE").
func LoadPublicKey(path string) (crypto.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: public key: %w", err)
	}
	return ParsePublicKey(data)
}

// ParsePublicKey parses the first PEM block of data; see LoadPublicKey.
func ParsePublicKey(data []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("auth: public key: no PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	default:
		return nil, fmt.Errorf("auth: public key: PEM block %q (want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE)", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: public key: %w", err)
	}
	switch key.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
		return key, nil
	}
	return nil, fmt.Errorf("auth: public key: unsupported type %T (want RSA or ECDSA P-256)", key)
}

// Sign mints a token of claims for key: a []byte secret (HS256), an
// *rsa.PrivateKey (RS256) or an *ecdsa.PrivateKey (ES256). For tests and
// the `hub token` command.
func Sign(key any, claims Claims) (string, error) {
	var m jwt.SigningMethod
	switch key.(type) {
	case []byte:
		m = jwt.SigningMethodHS256
	case *rsa.PrivateKey:
		m = jwt.SigningMethodRS256
	case *ecdsa.PrivateKey:
		m = jwt.SigningMethodES256
	default:
		return "", fmt.Errorf("auth: cannot sign with %T", key)
	}
	return jwt.NewWithClaims(m, claims).SignedString(key)
}

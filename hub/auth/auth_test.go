package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/runhub/runhub/hub/auth"
	"github.com/runhub/runhub/protocol"
)

var secret = []byte("0123456789abcdef0123456789abcdef-test")

func claims(sub string, ttl time.Duration) auth.Claims {
	now := time.Now()
	return auth.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: sub, ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		IssuedAt: jwt.NewNumericDate(now)}}
}

func sign(t *testing.T, key any, c auth.Claims) string {
	t.Helper()
	tok, err := auth.Sign(key, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func newVerifier(t *testing.T, cfg auth.Config) *auth.Verifier {
	t.Helper()
	v, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// wantUnauthorized checks err is an unauthorized protocol error whose
// message contains want and never the token.
func wantUnauthorized(t *testing.T, err error, token, want string) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeUnauthorized {
		t.Fatalf("want unauthorized, got %v", err)
	}
	if !strings.Contains(pe.Message, want) {
		t.Fatalf("message %q, want it to contain %q", pe.Message, want)
	}
	if token != "" && strings.Contains(pe.Message, token) {
		t.Fatalf("the message echoes the token")
	}
}

func TestVerifier_HS256(t *testing.T) {
	v := newVerifier(t, auth.Config{Secret: secret, Leeway: 5 * time.Second})
	c := claims("alice", time.Hour)
	p, err := v.Authenticate(sign(t, secret, c))
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "alice" || p.Admin {
		t.Fatalf("principal %+v", p)
	}
	if want := c.ExpiresAt.Add(5 * time.Second); !p.Expires.Equal(want) {
		t.Fatalf("expires %v, want exp+leeway %v", p.Expires, want)
	}
	c.Role = auth.RoleAdmin
	if p, err := v.Authenticate(sign(t, secret, c)); err != nil || !p.Admin {
		t.Fatalf("admin role: %+v %v", p, err)
	}
	c.Role = "Admin" // roles are exact
	if p, err := v.Authenticate(sign(t, secret, c)); err != nil || p.Admin {
		t.Fatalf("role Admin: %+v %v", p, err)
	}
}

func TestVerifier_Refusals(t *testing.T) {
	v := newVerifier(t, auth.Config{Secret: secret, Leeway: 5 * time.Second})
	now := time.Now()
	other := []byte("another-secret-of-thirty-two-bytes!!")
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	noExp := claims("alice", time.Hour)
	noExp.ExpiresAt = nil
	expired := claims("alice", -10*time.Second)
	inLeeway := claims("alice", -2*time.Second) // within the 5 s skew
	future := claims("alice", time.Hour)
	future.NotBefore = jwt.NewNumericDate(now.Add(time.Minute))
	soon := claims("alice", time.Hour)
	soon.NotBefore = jwt.NewNumericDate(now.Add(2 * time.Second)) // within the skew
	for _, tc := range []struct {
		name  string
		token string
		want  string // "" = accepted
	}{
		{"valid", sign(t, secret, claims("alice", time.Hour)), ""},
		{"within leeway of exp", sign(t, secret, inLeeway), ""},
		{"nbf within leeway", sign(t, secret, soon), ""},
		{"empty", "", "malformed"},
		{"garbage", "not.a.jwt", "malformed"},
		{"wrong secret", sign(t, other, claims("alice", time.Hour)), "signature"},
		{"expired", sign(t, secret, expired), "expired"},
		{"no exp", sign(t, secret, noExp), "required claim"},
		{"nbf in the future", sign(t, secret, future), "not valid yet"},
		{"no subject", sign(t, secret, claims("", time.Hour)), "no subject"},
		{"long subject", sign(t, secret, claims(strings.Repeat("s", 257), time.Hour)), "over 256"},
		{"control chars in subject", sign(t, secret, claims("al\nice", time.Hour)), "invalid characters"},
		{"alg none", noneToken(t, claims("alice", time.Hour)), "signature or algorithm"},
		{"RS256 to an HS256 verifier", sign(t, rsaKey, claims("alice", time.Hour)), "signature or algorithm"},
		{"HS512", hs512(t, claims("alice", time.Hour)), "signature or algorithm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := v.Authenticate(tc.token)
			if tc.want == "" {
				if err != nil || p.Subject != "alice" {
					t.Fatalf("want alice, got %+v %v", p, err)
				}
				return
			}
			wantUnauthorized(t, err, tc.token, tc.want)
		})
	}
}

func noneToken(t *testing.T, c auth.Claims) string {
	tok, err := jwt.NewWithClaims(jwt.SigningMethodNone, c).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func hs512(t *testing.T, c auth.Claims) string {
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS512, c).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestVerifier_IssuerAudience(t *testing.T) {
	v := newVerifier(t, auth.Config{Secret: secret, Issuer: "https://idp.example", Audience: "runhub"})
	good := claims("alice", time.Hour)
	good.Issuer, good.Audience = "https://idp.example", jwt.ClaimStrings{"other", "runhub"}
	if _, err := v.Authenticate(sign(t, secret, good)); err != nil {
		t.Fatal(err)
	}
	badIss := good
	badIss.Issuer = "https://evil.example"
	wantUnauthorized(t, errOf(v, sign(t, secret, badIss)), "", "issuer")
	badAud := good
	badAud.Audience = jwt.ClaimStrings{"other"}
	wantUnauthorized(t, errOf(v, sign(t, secret, badAud)), "", "audience")
	noAud := good
	noAud.Audience = nil
	wantUnauthorized(t, errOf(v, sign(t, secret, noAud)), "", "required claim")
	noIss := good
	noIss.Issuer = ""
	wantUnauthorized(t, errOf(v, sign(t, secret, noIss)), "", "required claim")
}

func errOf(v *auth.Verifier, token string) error {
	_, err := v.Authenticate(token)
	return err
}

func writePEM(t *testing.T, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVerifier_RS256(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pkix, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	for _, path := range []string{writePEM(t, "PUBLIC KEY", pkix), writePEM(t, "RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&key.PublicKey))} {
		pub, err := auth.LoadPublicKey(path)
		if err != nil {
			t.Fatal(err)
		}
		v := newVerifier(t, auth.Config{PublicKey: pub})
		if p, err := v.Authenticate(sign(t, key, claims("bob", time.Hour))); err != nil || p.Subject != "bob" {
			t.Fatalf("RS256: %+v %v", p, err)
		}
		// Algorithm confusion: an HS256 token "signed" with the public key's
		// bytes must not verify against the RSA key.
		forged := sign(t, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix}), claims("bob", time.Hour))
		wantUnauthorized(t, errOf(v, forged), forged, "signature or algorithm")
		other, _ := rsa.GenerateKey(rand.Reader, 2048)
		wantUnauthorized(t, errOf(v, sign(t, other, claims("bob", time.Hour))), "", "signature")
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	if _, err := auth.New(auth.Config{PublicKey: &small.PublicKey}); err == nil {
		t.Fatal("a 1024-bit RSA key was accepted")
	}
}

func TestVerifier_ES256(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkix, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pub, err := auth.LoadPublicKey(writePEM(t, "PUBLIC KEY", pkix))
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier(t, auth.Config{PublicKey: pub})
	if p, err := v.Authenticate(sign(t, key, claims("carol", time.Hour))); err != nil || p.Subject != "carol" {
		t.Fatalf("ES256: %+v %v", p, err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	wantUnauthorized(t, errOf(v, sign(t, other, claims("carol", time.Hour))), "", "signature")
	// A tampered payload (sub changed) fails the signature.
	tok := sign(t, key, claims("carol", time.Hour))
	parts := strings.Split(tok, ".")
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(body), "carol", "admin", 1)))
	wantUnauthorized(t, errOf(v, strings.Join(parts, ".")), "", "signature")

	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if _, err := auth.New(auth.Config{PublicKey: &p384.PublicKey}); err == nil {
		t.Fatal("a P-384 key was accepted for ES256")
	}
}

func TestNew_Config(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, tc := range []struct {
		name string
		cfg  auth.Config
	}{
		{"nothing", auth.Config{}},
		{"short secret", auth.Config{Secret: []byte("short")}},
		{"both", auth.Config{Secret: secret, PublicKey: &key.PublicKey}},
		{"unsupported key", auth.Config{PublicKey: "not a key"}},
	} {
		if _, err := auth.New(tc.cfg); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if _, err := auth.ParsePublicKey([]byte("no pem here")); err == nil {
		t.Error("ParsePublicKey accepted garbage")
	}
	if _, err := auth.ParsePublicKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})); err == nil {
		t.Error("ParsePublicKey accepted a private key block")
	}
	if _, err := auth.LoadPublicKey(filepath.Join(t.TempDir(), "missing.pem")); err == nil {
		t.Error("LoadPublicKey accepted a missing file")
	}
}

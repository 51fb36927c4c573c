package profile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// What drivers' settings share: durations, the API key's variable, an
// upstream's base URL, environment variable names, and the decoding
// errors that never echo a value.

var (
	reName   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	reEnvVar = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// Duration is a time.Duration written as a Go duration string ("30s",
// "2m", "1m30s") in the file.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Or returns d, or def when d is zero.
func (d Duration) Or(def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return time.Duration(d)
}

// Check refuses a negative d, naming its setting.
func (d Duration) Check(name string) error {
	if d < 0 {
		return fmt.Errorf("%s must not be negative", name)
	}
	return nil
}

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`want a duration string like "30s"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf(`%q is not a duration (want e.g. "30s", "2m")`, s)
	}
	*d = Duration(v)
	return nil
}

// Key is the api_key_env setting drivers embed in their settings: the
// NAME of the environment variable that holds the profile's API key.
// Secrets never live in the file.
type Key struct {
	APIKeyEnv string `json:"api_key_env,omitempty"`
}

// Validate refuses a value that is not a variable name, without echoing
// it (it may be the key itself, pasted by mistake).
func (k Key) Validate() error {
	if k.APIKeyEnv != "" && !reEnvVar.MatchString(k.APIKeyEnv) {
		return errors.New("api_key_env must be the NAME of an environment variable (letters, digits and '_'), not the key itself")
	}
	return nil
}

// KeyEnv implements KeyEnver.
func (k Key) KeyEnv() string { return k.APIKeyEnv }

// APIKey reads the key from the variable api_key_env names; no
// api_key_env (or an unset variable) is an empty Secret. A driver reads
// its key here, once, when it is built, and nowhere else.
func (k Key) APIKey(getenv func(string) string) Secret {
	if k.APIKeyEnv == "" {
		return Secret{}
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	return Secret{v: getenv(k.APIKeyEnv)}
}

// CheckBaseURL checks an upstream's base_url for driver kind: required,
// http(s) with a host, no credentials, no query or fragment.
func CheckBaseURL(base, kind string) error {
	if base == "" {
		return fmt.Errorf("base_url is required for driver %s", kind)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("base_url must be an http:// or https:// URL with a host")
	}
	if u.User != nil {
		return errors.New("base_url must not carry credentials; name the key's variable in api_key_env")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errors.New("base_url must not have a query or fragment")
	}
	return nil
}

// CheckEnvNames refuses a name that is not an environment variable's,
// naming the setting.
func CheckEnvNames(setting string, names ...string) error {
	for _, k := range names {
		if !reEnvVar.MatchString(k) {
			return fmt.Errorf("%s: %q is not a valid variable name", setting, k)
		}
	}
	return nil
}

// DecodeObject decodes a JSON object of settings into v strictly (a field
// v lacks is an error), with errors that never echo a value. A driver
// whose settings nest an object decodes it with DecodeObject in its
// UnmarshalJSON, naming the object in the error.
func DecodeObject(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return settingError{decodeError(err)}
	}
	return nil
}

// settingError is an error decodeError has explained already: it passes
// through an UnmarshalJSON of nested settings as it is.
type settingError struct{ error }

func (e settingError) Unwrap() error { return e.error }

// decodeField decodes one common field strictly.
func decodeField(raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("want %s", te.Type)
		}
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

func isEmptyObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && len(m) == 0
}

// unknownField is the error of a key no driver takes; a key that looks
// like a credential gets a hint, and its value is never echoed.
func unknownField(field string) error {
	if k := strings.ToLower(field); k == "api_key" || k == "apikey" || k == "key" || k == "token" {
		return fmt.Errorf("unknown field %q: keys never go in the profile file; put the key in an environment variable and name it in api_key_env", field)
	}
	return fmt.Errorf("unknown field %q", field)
}

// decodeError explains a JSON error without echoing file content beyond a
// field name (a key pasted into the wrong field is never printed).
func decodeError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var done settingError
	switch {
	case errors.As(err, &done):
		return err
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d", se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("invalid JSON: the file ends before the object does")
	case errors.As(err, &te):
		return fmt.Errorf("field %s: want %s", te.Field, te.Type)
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return unknownField(strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`))
	}
	if strings.Contains(msg, "want a duration") || strings.Contains(msg, "is not a duration") {
		return errors.New(strings.TrimPrefix(msg, "json: "))
	}
	return errors.New("invalid profile file: " + strings.TrimPrefix(msg, "json: "))
}

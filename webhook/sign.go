package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Sign is the Standard Webhooks signature of a message: "v1," and the
// base64 of HMAC-SHA256(key, id + "." + timestamp + "." + body), the
// timestamp in Unix seconds.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Tolerance is how far a message's timestamp may be from now for Verify,
// as in the Standard Webhooks libraries.
const Tolerance = 5 * time.Minute

// ErrVerify is Verify's error.
var ErrVerify = errors.New("webhook: signature verification failed")

// Verify checks a received message the way a receiver does: the three
// headers present, the timestamp within Tolerance of now, and one of the
// space-separated v1 signatures matching.
func Verify(key []byte, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrVerify
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrVerify
	}
	if d := now.Sub(time.Unix(t, 0)); d > Tolerance || d < -Tolerance {
		return ErrVerify
	}
	want := Sign(key, id, t, body)
	for _, s := range strings.Fields(sigs) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return ErrVerify
}

// messageID is the webhook-id of the notification of the event seq of
// run: the same on every attempt, every restart and every replica.
func messageID(runID string, seq uint64) string {
	sum := sha256.Sum256([]byte(runID + ":" + strconv.FormatUint(seq, 10)))
	return "msg_" + base64.RawURLEncoding.EncodeToString(sum[:18])
}

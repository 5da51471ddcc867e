package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// tokenTTL is how long a confirmation page's token stays valid.
const tokenTTL = time.Hour

// tokenSigner issues and checks the tokens of action forms. A token is
// "<expiry unix seconds>.<base64url HMAC-SHA256>" over the action, queue,
// job id and expiry, so it is good for exactly one action on one job, for a
// limited time, and only with the secret of the process (or replicas) that
// issued it.
type tokenSigner struct {
	key []byte
	ttl time.Duration
}

// Errors of verify, for logs; the client only sees 403.
var (
	errTokenMissing   = errors.New("missing token")
	errTokenMalformed = errors.New("malformed token")
	errTokenExpired   = errors.New("expired token")
	errTokenInvalid   = errors.New("token does not match this action")
)

// issue returns a token for action on job id of queue, valid until now+ttl.
func (s tokenSigner) issue(action, queue string, id int64, now time.Time) string {
	exp := now.Add(s.ttl).Unix()
	return strconv.FormatInt(exp, 10) + "." + base64.RawURLEncoding.EncodeToString(s.mac(action, queue, id, exp))
}

// verify checks a token for action on job id of queue at time now.
func (s tokenSigner) verify(token, action, queue string, id int64, now time.Time) error {
	if token == "" {
		return errTokenMissing
	}
	expText, sigText, ok := strings.Cut(token, ".")
	if !ok {
		return errTokenMalformed
	}
	exp, err := strconv.ParseInt(expText, 10, 64)
	if err != nil {
		return errTokenMalformed
	}
	sig, err := base64.RawURLEncoding.DecodeString(sigText)
	if err != nil {
		return errTokenMalformed
	}
	if !hmac.Equal(sig, s.mac(action, queue, id, exp)) {
		return errTokenInvalid
	}
	if now.Unix() > exp {
		return errTokenExpired
	}
	return nil
}

// mac is the HMAC of one action's fields; NUL separators keep field
// boundaries unambiguous (queue names cannot hold NUL).
func (s tokenSigner) mac(action, queue string, id int64, exp int64) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("skipjack-dashboard/1\x00" + action + "\x00" + queue + "\x00" +
		strconv.FormatInt(id, 10) + "\x00" + strconv.FormatInt(exp, 10)))
	return m.Sum(nil)
}

package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// tokenTTL is how long a confirmation page's token stays valid.
const tokenTTL = time.Hour

// tokenSigner issues and checks the tokens of action forms. A token is
// "<expiry unix seconds>.<base64url HMAC-SHA256>" over the action, queue,
// job ids and expiry, so it is good for exactly one action on exactly the
// jobs it was issued for, for a limited time, and only with the secret of
// the process (or replicas) that issued it.
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

// issue returns a token for action on the jobs of queue (their ids as
// idsText writes them), valid until now+ttl.
func (s tokenSigner) issue(action, queue, jobs string, now time.Time) string {
	exp := now.Add(s.ttl).Unix()
	return strconv.FormatInt(exp, 10) + "." + base64.RawURLEncoding.EncodeToString(s.mac(action, queue, jobs, exp))
}

// verify checks a token for action on the jobs of queue at time now.
func (s tokenSigner) verify(token, action, queue, jobs string, now time.Time) error {
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
	if !hmac.Equal(sig, s.mac(action, queue, jobs, exp)) {
		return errTokenInvalid
	}
	if now.Unix() > exp {
		return errTokenExpired
	}
	return nil
}

// mac is the HMAC of one action's fields; NUL separators keep field
// boundaries unambiguous (queue names cannot hold NUL).
func (s tokenSigner) mac(action, queue, jobs string, exp int64) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("skipjack-dashboard/1\x00" + action + "\x00" + queue + "\x00" +
		jobs + "\x00" + strconv.FormatInt(exp, 10)))
	return m.Sum(nil)
}

// idsText writes job ids as a token covers them and forms carry them:
// decimal, comma-separated, in the order given (parseIDs sorts).
func idsText(ids []int64) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	return b.String()
}

// parseIDs reads at most limit comma-separated positive job ids, sorted and
// without duplicates.
func parseIDs(s string, limit int) ([]int64, error) {
	if s == "" {
		return nil, errors.New("no job ids")
	}
	parts := strings.Split(s, ",")
	if len(parts) > limit {
		return nil, fmt.Errorf("%d job ids, at most %d at once", len(parts), limit)
	}
	ids := make([]int64, 0, len(parts))
	for _, p := range parts {
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("%q is not a job id", p)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

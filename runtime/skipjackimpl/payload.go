package skipjackimpl

import (
	"bytes"
	"encoding/json"
	"fmt"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// EncodePayload encodes a payload as the JSON object stored in the payload
// column. It refuses strings containing NUL up front, so that neither an
// INSERT nor a COPY fails half-way on the database side.
//
// The wire format is encoding/json's: time.Time as RFC 3339, time.Duration as
// integer nanoseconds, []byte as base64, maps with sorted keys, and nil
// slices and maps as null. Decoding ignores unknown keys, and a missing
// field decodes to its zero value.
func EncodePayload(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	if hasEscapedNUL(b) {
		return nil, skipjack.ErrNULInPayload
	}
	return b, nil
}

// hasEscapedNUL reports whether JSON text b holds the escape \u0000 (an
// unescaped backslash followed by u0000; "\\u0000" is a literal backslash).
func hasEscapedNUL(b []byte) bool {
	for {
		i := bytes.Index(b, []byte(`\u0000`))
		if i < 0 {
			return false
		}
		backslashes := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return true
		}
		b = b[i+1:]
	}
}

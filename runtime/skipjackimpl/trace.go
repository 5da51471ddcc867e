package skipjackimpl

import (
	"bytes"
	"encoding/json"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// encodeTrace returns the JSON object a job's trace column stores for the
// trace context m, or nil (NULL) when m is empty, too large or holds a NUL
// character. Tracing is best effort: it never fails an enqueue.
func encodeTrace(m map[string]string) []byte {
	if len(m) == 0 {
		return nil
	}
	b, err := json.Marshal(m) // sorted keys: the same context, the same bytes
	if err != nil || len(b) > skipjack.MaxTraceBytes || bytes.Contains(b, []byte(`\u0000`)) {
		return nil
	}
	return b
}

// traceText returns b as the text parameter of the single-row inserts,
// nil for NULL.
func traceText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// decodeTrace decodes a claimed row's trace column. A NULL column, and a
// value that is not an object of strings (a SQL producer's), read as nil.
func decodeTrace(b []byte) map[string]string {
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return nil
	}
	var m map[string]string
	if json.Unmarshal(b, &m) != nil || len(m) == 0 {
		return nil
	}
	return m
}

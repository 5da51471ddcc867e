package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// listFilter narrows a queue page's jobs beyond their state: by payload
// field values (?where=customer=42, repeatable) and by failure group
// (?error=, a normalised error text).
type listFilter struct {
	Where []string
	Error string
}

// active reports whether f filters at all.
func (f listFilter) active() bool { return len(f.Where) > 0 || f.Error != "" }

// values writes f as query parameters.
func (f listFilter) values(v url.Values) {
	for _, w := range f.Where {
		v.Add("where", w)
	}
	if f.Error != "" {
		v.Set("error", f.Error)
	}
}

// fieldPath is a payload field as a filter names it: snake_case keys,
// dotted for nested objects (ship_to.zip).
var fieldPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// payloadFilter turns conditions "field = value" into the JSON object a
// queue's List matches payloads against (jsonb containment, so the value
// is bound as a parameter, never spliced into SQL). A value that is JSON
// (42, true, null, "text", [1]) is taken as such; anything else is a
// string, so customer = acme needs no quotes.
func payloadFilter(conds []string) (string, error) {
	if len(conds) == 0 {
		return "", nil
	}
	root := map[string]any{}
	for _, c := range conds {
		field, value, ok := strings.Cut(c, "=")
		field, value = strings.TrimSpace(field), strings.TrimSpace(value)
		if !ok || field == "" {
			return "", fmt.Errorf("%q is not a condition: write field = value, such as customer = 42", c)
		}
		if !fieldPath.MatchString(field) {
			return "", fmt.Errorf("%q is not a payload field name (letters, digits and _, dotted for nested fields)", field)
		}
		var v any = value
		if json.Valid([]byte(value)) {
			var decoded any
			d := json.NewDecoder(strings.NewReader(value))
			d.UseNumber()
			if err := d.Decode(&decoded); err == nil {
				v = decoded
			}
		}
		keys := strings.Split(field, ".")
		m := root
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = v
	}
	b, err := json.Marshal(root)
	if err != nil {
		return "", fmt.Errorf("payload filter: %w", err)
	}
	return string(b), nil
}

// filterScan bounds the rows one filtered page reads: windows of size ids
// of the primary key, at most pages of them (100,000 ids); the page then
// ends early with a link that continues the search.
var filterScan = scanBound{pages: 10, size: 10_000}

// listFiltered returns up to limit jobs of q after after that p selects
// (its State, Payload and ErrorGroup), in id order, reading the table in
// windows of the primary key within scan. When it stopped at that bound
// with fewer, resume is the id to continue after; otherwise 0.
func listFiltered(ctx context.Context, q skipjack.QueueAdmin, p skipjack.ListParams, limit int, scan scanBound) (recs []*skipjack.Record[json.RawMessage], resume int64, err error) {
	after := p.AfterID
	for range scan.pages {
		p.AfterID, p.UntilID, p.Limit = after, after+int64(scan.size), limit-len(recs)
		page, err := q.List(ctx, p)
		if err != nil {
			return nil, 0, err
		}
		if recs = append(recs, page...); len(recs) >= limit {
			return recs, 0, nil
		}
		after = p.UntilID
		// Does any job of this state lie beyond the window? One step of
		// the primary key says.
		more, err := q.List(ctx, skipjack.ListParams{State: p.State, AfterID: after, Limit: 1})
		if err != nil {
			return nil, 0, err
		}
		if len(more) == 0 {
			return recs, 0, nil
		}
	}
	return recs, after, nil
}

// whereText shows the conditions of a filter in a sentence.
func whereText(conds []string) string {
	quoted := make([]string, len(conds))
	for i, c := range conds {
		quoted[i] = strconv.Quote(strings.TrimSpace(c))
	}
	return strings.Join(quoted, " and ")
}

package config

import (
	"go/token"
	"regexp"
	"strings"
)

// initialisms are staticcheck ST1003's initialisms: a word of a snake_case
// key that spells one of them (in any case) is written all upper-case.
var initialisms = map[string]bool{
	"ACL": true, "AMQP": true, "API": true, "ASCII": true, "CPU": true,
	"CSS": true, "DB": true, "DNS": true, "EOF": true, "GID": true,
	"GUID": true, "HTML": true, "HTTP": true, "HTTPS": true, "ID": true,
	"IP": true, "JSON": true, "QPS": true, "RAM": true, "RPC": true,
	"RTP": true, "SIP": true, "SLA": true, "SMTP": true, "SQL": true,
	"SSH": true, "TCP": true, "TLS": true, "TS": true, "TTL": true,
	"UDP": true, "UI": true, "UID": true, "URI": true, "URL": true,
	"UTF8": true, "UUID": true, "VM": true, "XML": true, "XMPP": true,
	"XSRF": true, "XSS": true,
}

// GoName turns a snake_case key into an exported Go identifier, word by
// word: initialisms are upper-cased (parcel_id → ParcelID, ttl → TTL),
// their plurals keep a lower-case s (user_ids → UserIDs, urls → URLs), and
// every other word is capitalized (send_at → SendAt). Empty words (from
// doubled or trailing underscores) vanish.
func GoName(snake string) string {
	var b strings.Builder
	for word := range strings.SplitSeq(snake, "_") {
		if word == "" {
			continue
		}
		upper := strings.ToUpper(word)
		switch {
		case initialisms[upper]:
			b.WriteString(upper)
		case len(word) > 2 && strings.HasSuffix(word, "s") && initialisms[upper[:len(upper)-1]]:
			b.WriteString(upper[:len(upper)-1])
			b.WriteByte('s')
		default:
			b.WriteString(strings.ToUpper(word[:1]))
			b.WriteString(word[1:])
		}
	}
	return b.String()
}

var (
	// queueName is the form of a queue name; it is also the table name.
	queueName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
	// fieldKey is the form of a payload field key.
	fieldKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	// structName is the form of a shared struct's name.
	structName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	// sqlIdent is the form of the schema name.
	sqlIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	// configName is the form of the config's name.
	configName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
)

// predeclared are Go's predeclared identifiers, which a package name must
// not shadow.
var predeclared = map[string]bool{
	"any": true, "bool": true, "byte": true, "comparable": true,
	"complex64": true, "complex128": true, "error": true, "float32": true,
	"float64": true, "int": true, "int8": true, "int16": true, "int32": true,
	"int64": true, "rune": true, "string": true, "uint": true, "uint8": true,
	"uint16": true, "uint32": true, "uint64": true, "uintptr": true,
	"true": true, "false": true, "iota": true, "nil": true,
	"append": true, "cap": true, "clear": true, "close": true,
	"complex": true, "copy": true, "delete": true, "imag": true, "len": true,
	"make": true, "max": true, "min": true, "new": true, "panic": true,
	"print": true, "println": true, "real": true, "recover": true,
}

// reservedPackages are package names a queue cannot take because the go
// tool or the generated code gives them a meaning.
var reservedPackages = map[string]bool{
	"main": true, "internal": true, "testdata": true, "vendor": true,
	"skipjack": true, "pgx": true, "time": true,
}

// QueueIdentifiers are the top-level names every generated queue package
// declares (its queue.go). The generator renames imports around them, and
// a shared struct re-exported in a queue package by alias must not take
// one; a test ties this list to the rendered file.
var QueueIdentifiers = []string{
	"Name", "Payload", "Job", "Record", "DBTX", "Spec", "Enqueue", "EnqueueMany", "EnqueueAll",
	"CompleteTx", "Stats", "Get", "List", "Retry", "Cancel", "Pause", "Resume", "Admin",
	"Worker", "NewWorker", "queue",
}

// reservedTypes are the exported QueueIdentifiers plus Migrate, the shared
// package's own.
var reservedTypes = func() map[string]bool {
	m := map[string]bool{"Migrate": true}
	for _, id := range QueueIdentifiers {
		if token.IsExported(id) {
			m[id] = true
		}
	}
	return m
}()

// packageProblem says why pkg cannot be a queue's package name, or "".
func packageProblem(pkg string) string {
	switch {
	case token.IsKeyword(pkg):
		return "is a Go keyword"
	case predeclared[pkg]:
		return "is a predeclared Go identifier"
	case reservedPackages[pkg]:
		return "is reserved"
	}
	return ""
}

package api

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"
)

const src = `package p

import "time"

const Max = 3
const hidden = 4

type State string

const Done State = "done"

var Default = Config{Wait: time.Second}

type Config struct {
	Wait time.Duration
	Base
	secret int
}

type Base struct{ ID int64 }

func (Base) Describe() string  { return "" }
func (*Config) Apply() error    { return nil }

type Store interface {
	Get(id int64) (string, error)
	Put(v string) error
}

type Box[T any] struct{ V T }

func (b *Box[T]) Set(v T) { b.V = v }

type IntBox = Box[int]

func New(c Config) *Config { return &c }
`

// TestList lists a package with one of each kind of feature; an alias
// lists what it names (its fields and methods too), an interface its
// method names on one line.
func TestList(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{Importer: importer.Default()}).Check("example.com/p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `const Done State = "done"
const Max untyped int = 3
func New(c Config) *Config
method (*Box) Set(v T)
method (*Config) Apply() error
method (*IntBox) Set(v int)
method (Base) Describe() string
method (Config) Describe() string
type Base struct
type Base struct, ID int64
type Box[T any] struct
type Box[T any] struct, V T
type Config struct
type Config struct, Wait time.Duration
type Config struct, embedded Base
type IntBox = Box[int]
type IntBox struct, V int
type State string
type Store interface { Get, Put }
type Store interface, Get(id int64) (string, error)
type Store interface, Put(v string) error
var Default Config`
	if got := strings.Join(List(pkg), "\n"); got != want {
		t.Errorf("List:\n%s\n\nwant:\n%s", got, want)
	}
}

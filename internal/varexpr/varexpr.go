// Package varexpr compiles and evaluates the boolean expressions a spec
// writes over a chat's context variables (docs/context-variables.md): the
// conditions of hand-offs and graph edges. The expressions are CEL
// (cel.dev/cel-go), a small, side-effect-free language with a checker;
// cel-go stays inside this package.
//
// Every declared variable has CEL's dynamic type: its value is whatever
// JSON the chat holds under that name when the expression runs, so the
// checker refuses unknown names and non-boolean results at create time,
// and a value of the wrong type at run time makes the expression false
// (Program.Holds).
package varexpr

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// Limits of one expression: its text, how deep the parser may nest, and
// what one evaluation may cost (CEL's cost units, about one per
// operation), so that no expression from a client can take long to check
// or to run.
const (
	MaxBytes      = 4096
	maxRecursion  = 64
	maxCost       = 10_000
	maxNestingMsg = "nests too deep"
)

// Program is a checked expression, ready to evaluate any number of times
// and from several goroutines at once (a cel.Program is stateless).
type Program struct {
	src string
	prg cel.Program
}

// Source is the expression's text.
func (p *Program) Source() string { return p.src }

// Identifier reports whether name can be written in an expression: CEL's
// identifiers, except its reserved words. Other keys of the variables
// (Swarm's may be any text) are not declared to expressions.
func Identifier(name string) bool {
	if name == "" || len(name) > 128 || reserved[name] {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}

// reserved are CEL's reserved words and literals (the language
// definition's), which cannot name a variable.
var reserved = map[string]bool{
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true, "const": true,
	"continue": true, "else": true, "for": true, "function": true, "if": true, "import": true,
	"let": true, "loop": true, "package": true, "namespace": true, "return": true, "var": true,
	"void": true, "while": true,
}

// Compile parses and checks src with the names declared as variables of
// any type. The error says what is wrong in words a client can act on:
// the syntax error, the unknown name (and which names there are), or
// that the result is not a boolean.
func Compile(src string, names []string) (*Program, error) {
	if len(src) > MaxBytes {
		return nil, fmt.Errorf("must be at most %d bytes", MaxBytes)
	}
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("must not be empty")
	}
	opts := []cel.EnvOption{cel.ParserRecursionLimit(maxRecursion), cel.ParserExpressionSizeLimit(MaxBytes)}
	declared := make([]string, 0, len(names))
	for _, n := range names {
		if Identifier(n) {
			opts = append(opts, cel.Variable(n, cel.DynType))
			declared = append(declared, n)
		}
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("declare the context variables: %w", err)
	}
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, errors.New(describe(iss.Err().Error(), declared))
	}
	if !ast.OutputType().IsExactType(types.BoolType) {
		return nil, fmt.Errorf("must be a boolean expression (this one is of type %s): compare a variable, e.g. %s",
			ast.OutputType(), example(declared))
	}
	prg, err := env.Program(ast, cel.CostLimit(maxCost))
	if err != nil {
		return nil, fmt.Errorf("cannot be run: %w", err)
	}
	return &Program{src: src, prg: prg}, nil
}

// describe makes cel-go's message (which quotes the expression with a
// caret under the problem) one line, and names the declared variables
// when a name is unknown.
func describe(msg string, declared []string) string {
	msg = strings.TrimPrefix(strings.TrimSpace(msg), "ERROR: ")
	first, _, _ := strings.Cut(msg, "\n")
	first = strings.TrimPrefix(first, "<input>:")
	if strings.Contains(first, "undeclared reference") {
		slices.Sort(declared)
		known := "none"
		if len(declared) > 0 {
			known = strings.Join(declared, ", ")
		}
		return "invalid expression: " + first + " (a variable must be declared in the spec's context_variables; declared: " + known + ")"
	}
	if strings.Contains(msg, "recursion limit") || strings.Contains(msg, "recursion depth") || strings.Contains(msg, "size exceeds") {
		return "invalid expression: " + maxNestingMsg
	}
	return "invalid expression: " + first
}

func example(declared []string) string {
	if len(declared) == 0 {
		return `x == "y"`
	}
	return slices.Min(declared) + " == ..."
}

// Holds evaluates the expression over the variables (each a JSON value).
// An expression that cannot be evaluated — a variable that is not set, a
// value of a type the operator does not take, a division by zero, a cost
// over the limit — does not hold: err says why, for the record.
func (p *Program) Holds(vars map[string]json.RawMessage) (bool, error) {
	act := make(map[string]any, len(vars))
	for k, raw := range vars {
		if !Identifier(k) {
			continue
		}
		v, err := Value(raw)
		if err != nil {
			return false, fmt.Errorf("variable %s: %w", k, err)
		}
		act[k] = v
	}
	out, _, err := p.prg.Eval(act)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the expression gave %s, not a boolean", typeName(out))
	}
	return bool(b), nil
}

func typeName(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().TypeName()
}

// Value is a JSON value as CEL sees it: a number written as an integer in
// int64's range is an int, any other number a double (CEL compares ints
// and doubles by value: 8.0 == 8 and 8.5 >= 8 hold), null CEL's null, and objects and lists
// maps and lists of those.
func Value(raw json.RawMessage) (any, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return celValue(v), nil
}

func celValue(v any) any {
	switch x := v.(type) {
	case nil:
		return types.NullValue
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = celValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = celValue(e)
		}
		return out
	}
	return v
}
